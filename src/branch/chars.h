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

}  // namespace flipscope::branch_chars
