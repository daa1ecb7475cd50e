// Tokenization and the byte <-> token mapping that turns character spans into token spans.
#include <fmt/format.h>
#include <llama.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "runtime/runtime.h"
#include "workload/internal.h"

namespace flipscope::workload {
namespace {

// The text of one token, special tokens rendered (so concatenated pieces reproduce the prompt).
std::string Piece(const llama_vocab* vocab, int32_t token) { return TokenPiece(vocab, token); }

bool IsControl(const llama_vocab* vocab, int32_t token) {
  return (llama_vocab_get_attr(vocab, token) & (LLAMA_TOKEN_ATTR_CONTROL | LLAMA_TOKEN_ATTR_USER_DEFINED)) != 0;
}

// Aligns tokens [first, last) with text; zero-width tokens outside that range (added BOS/EOS).
// SentencePiece vocabularies with add_space_prefix put a space before the text and after every
// special token that the text does not contain; such a space is matched as zero-width.
Tokenized Align(const llama_vocab* vocab, std::vector<int32_t> tokens, size_t first, size_t last,
                const std::string& text) {
  Tokenized out;
  out.offsets.assign(tokens.size() + 1, 0);
  std::vector<size_t> lengths(tokens.size(), 0);
  size_t pos = 0;
  for (size_t t = first; t < last; ++t) {
    std::string piece = Piece(vocab, tokens[t]);
    lengths[t] = piece.size();
    out.offsets[t] = std::min(pos, text.size());
    if (!out.exact) continue;
    if (text.compare(pos, piece.size(), piece) == 0) {
      pos += piece.size();
    } else if (!piece.empty() && piece[0] == ' ' && (t == first || IsControl(vocab, tokens[t - 1])) &&
               text.compare(pos, piece.size() - 1, piece, 1) == 0) {
      pos += piece.size() - 1;
    } else {
      out.exact = false;
    }
  }
  if (pos != text.size()) out.exact = false;
  if (!out.exact) {
    // Documented approximation: offsets proportional to the cumulative piece lengths.
    size_t total = 0;
    for (size_t l : lengths) total += l;
    size_t cum = 0;
    for (size_t t = first; t < last; ++t) {
      out.offsets[t] = total ? size_t(double(cum) * double(text.size()) / double(total)) : 0;
      cum += lengths[t];
    }
  }
  for (size_t t = last; t <= tokens.size(); ++t) out.offsets[t] = text.size();
  out.tokens = std::move(tokens);
  return out;
}

}  // namespace

Result<Tokenized> Tokenize(const llama_vocab* vocab, const std::string& text, const std::string& path) {
  std::vector<int32_t> core(text.size() + 8);
  int32_t n = llama_tokenize(vocab, text.data(), int32_t(text.size()), core.data(), int32_t(core.size()), false, true);
  if (n < 0) {
    core.resize(size_t(-n));
    n = llama_tokenize(vocab, text.data(), int32_t(text.size()), core.data(), int32_t(core.size()), false, true);
  }
  if (n < 0) return Status::Error(path + ": the tokenizer failed on the rendered text");
  core.resize(size_t(n));
  // BOS/EOS as llama_tokenize(add_special = true) would add them, kept apart so that they are
  // known to be zero-width in the text.
  std::vector<int32_t> tokens;
  const bool bos = llama_vocab_get_add_bos(vocab) && llama_vocab_bos(vocab) != LLAMA_TOKEN_NULL;
  const bool eos = llama_vocab_get_add_eos(vocab) && llama_vocab_eos(vocab) != LLAMA_TOKEN_NULL;
  if (bos) tokens.push_back(llama_vocab_bos(vocab));
  tokens.insert(tokens.end(), core.begin(), core.end());
  if (eos) tokens.push_back(llama_vocab_eos(vocab));
  if (tokens.empty()) return Status::Error(path + ": the workload gives no tokens");
  size_t first = bos ? 1 : 0;
  return Align(vocab, std::move(tokens), first, first + core.size(), text);
}

Tokenized PiecesOf(const llama_vocab* vocab, std::vector<int32_t> tokens, std::string* text) {
  text->clear();
  for (int32_t t : tokens) *text += Piece(vocab, t);
  size_t n = tokens.size();
  return Align(vocab, std::move(tokens), 0, n, *text);
}

Result<std::vector<int32_t>> ParseTokenIds(const std::string& text, const std::string& path, int32_t n_vocab) {
  std::vector<std::string> items;
  size_t start = text.find_first_not_of(" \t\r\n");
  if (start != std::string::npos && text[start] == '[') {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const std::exception& e) {
      return Status::Error(path + ": invalid JSON array of token ids: " + e.what());
    }
    for (const auto& v : j) {
      if (!v.is_number_integer())
        return Status::Error(path + ": token #" + std::to_string(items.size() + 1) + " is not an integer: " + v.dump());
      items.push_back(v.dump());
    }
  } else {
    std::string cur;
    for (char c : text + " ") {
      if (std::isspace(static_cast<unsigned char>(c)) || c == ',') {
        if (!cur.empty()) items.push_back(std::move(cur));
        cur.clear();
      } else {
        cur += c;
      }
    }
  }
  if (items.empty()) return Status::Error(path + ": no token ids");
  std::vector<int32_t> ids;
  ids.reserve(items.size());
  for (const auto& s : items) {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    size_t k = ids.size() + 1;
    if (ec != std::errc() || p != s.data() + s.size())
      return Status::Error(fmt::format("{}: token #{} '{}' is not an integer", path, k, s));
    if (v < 0 || v >= n_vocab)
      return Status::Error(
          fmt::format("{}: token #{} (id {}) is out of range: the vocabulary has {} tokens", path, k, v, n_vocab));
    ids.push_back(int32_t(v));
  }
  return ids;
}

std::pair<int32_t, int32_t> TokenRange(const std::vector<size_t>& offsets, size_t begin, size_t end) {
  const size_t n = offsets.size() - 1;
  // The token containing byte `begin`: the last one starting at or before it.
  auto first_it = std::upper_bound(offsets.begin(), offsets.begin() + n, begin);
  int32_t first = int32_t(std::max<ptrdiff_t>(first_it - offsets.begin() - 1, 0));
  // Tokens that start before `end`.
  int32_t last = int32_t(std::lower_bound(offsets.begin(), offsets.begin() + n, end) - offsets.begin());
  return {first, std::max(first, last)};
}

}  // namespace flipscope::workload
