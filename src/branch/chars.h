// Internal to the branch stage: the character tests the judge's readings share (ASCII, locale-free).
#pragma once

#include <cctype>
#include <string>
#include <string_view>

namespace flipscope::branch_chars {

inline bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// s with ASCII letters in lower case.
inline std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A sentence's bounds around byte i of text: from after the previous '\n', '!', '?' or '.' that
// ends a sentence (one followed by a space) to the next one.
inline std::string_view SentenceAround(std::string_view text, size_t i) {
  auto stop = [](char c) { return c == '\n' || c == '!' || c == '?'; };
  size_t a = i, b = i;
  while (a > 0 && !stop(text[a - 1]) && !(text[a - 1] == '.' && (a >= text.size() || text[a] == ' '))) --a;
  while (b < text.size() && !stop(text[b]) && !(text[b] == '.' && (b + 1 >= text.size() || text[b + 1] == ' '))) ++b;
  return text.substr(a, b - a);
}

}  // namespace flipscope::branch_chars
