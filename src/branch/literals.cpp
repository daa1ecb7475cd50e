// Literal copies: the words a context holds, and the "5432 became 543ql" check.
#include <algorithm>
#include <cctype>

#include "branch/verdict.h"
#include "workload/workload.h"

namespace flipscope {
namespace {

// Punctuation that ends a sentence or a JSON/CLI fragment rather than a literal.
bool IsTrailingPunct(char c) { return c == '.' || c == ':' || c == '/' || c == '-' || c == '@'; }
// Separators that join two literals into one word (host:port, addr/prefix, user@host).
bool IsJoiner(char c) { return c == ':' || c == '/' || c == '@'; }

size_t Lcp(std::string_view a, std::string_view b) {
  size_t n = std::min(a.size(), b.size()), i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

// Whether a word is known outright: in the context, in the exemptions, or known literals joined
// by ':' '/' '@' (a host:port the context holds as two separate literals).
bool IsKnownWord(std::string_view w, const KnownLiterals& known, const WordFilter& exempt) {
  if (known.Contains(w) || (exempt && exempt(w))) return true;
  for (size_t i = 1; i + 1 < w.size(); ++i) {
    if (!IsJoiner(w[i])) continue;
    std::string_view head = w.substr(0, i), tail = w.substr(i + 1);
    if ((known.Contains(head) || (exempt && exempt(head))) && IsKnownWord(tail, known, exempt)) return true;
  }
  return false;
}

// The known literal a word most plausibly copies: the longest common prefix, which must be at
// least 3 bytes and at least half of that literal. Returns nullptr when none qualifies.
const std::string* CopySource(std::string_view w, const KnownLiterals& known, size_t* lcp_out) {
  const std::string* best = nullptr;
  size_t best_lcp = 0;
  for (const std::string& lit : known.sources()) {
    size_t l = Lcp(w, lit);
    if (l < 3 || 2 * l < lit.size()) continue;
    if (l > best_lcp || (l == best_lcp && best && lit.size() < best->size())) {
      best = &lit;
      best_lcp = l;
    }
  }
  *lcp_out = best_lcp;
  return best;
}

// A known literal whose tail the word is, cut at a separator and at least half of it: the copy
// dropped the literal's head ("251.178" of "10.25.251.178"). Sets *matched to the word's length.
const std::string* HeadDroppedSource(std::string_view w, const KnownLiterals& known, size_t* matched) {
  *matched = 0;
  if (w.size() < 4 ||
      std::none_of(w.begin(), w.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return nullptr;
  for (const std::string& lit : known.sources()) {
    if (lit.size() <= w.size() || 2 * w.size() < lit.size() || lit.compare(lit.size() - w.size(), w.size(), w) != 0)
      continue;
    char before = lit[lit.size() - w.size() - 1];
    if (before == '.' || before == ':' || before == '/' || before == '-') {
      *matched = w.size();
      return &lit;
    }
  }
  return nullptr;
}

// Whether only word characters follow the word to the end of text (trailing punctuation the
// word lost to trimming included): the token budget may have cut it.
bool RunsToEnd(std::string_view text, const Word& w) {
  size_t e = w.offset + w.text.size();
  while (e < text.size() && IsWordChar(text[e])) ++e;
  return e == text.size();
}

// Whether the word could still grow into a known literal (it was cut by the token budget).
bool IsPrefixOfKnown(std::string_view w, const KnownLiterals& known) {
  return std::any_of(known.sources().begin(), known.sources().end(),
                     [&](const std::string& lit) { return lit.size() > w.size() && lit.compare(0, w.size(), w) == 0; });
}

// Whether a word is a dotted IPv4 address: four numbers of 1 to 3 digits.
bool IsIpv4(std::string_view w) {
  size_t parts = 0, digits = 0;
  for (const char c : w) {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      if (++digits > 3) return false;
    } else if (c != '.' || digits == 0) {
      return false;
    } else {
      ++parts, digits = 0;
    }
  }
  return digits > 0 && parts == 3;
}

// Whether what follows an exact copy of a literal, at byte `at` of the word, is text appended
// after it rather than a change of its own characters: it starts with a separator
// ("10.20.0.0/20" then ".ArgumentParser", "/etc/netplan" then "/60-static.yaml", "db-east-02"
// then ".0.0.0"). Characters right after the copy continue its last part and change the literal
// ("5432" then "1", "10.20.30.4" then "1").
// An IPv4 address copied whole and given more dotted numbers (10.40.2.174.2.174) is no address
// any more: a changed copy, not text after one.
bool AppendedAfterCopy(std::string_view w, size_t at) {
  if (at + 1 >= w.size() || std::string_view(".:/@-_").find(w[at]) == std::string_view::npos) return false;
  return !(w[at] == '.' && std::isdigit(static_cast<unsigned char>(w[at + 1])) && IsIpv4(w.substr(0, at)));
}

}  // namespace

bool IsWordChar(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  return std::isalnum(u) || c == '_' || c == '.' || c == ':' || c == '/' || c == '@' || c == '-';
}

std::vector<Word> SplitWords(std::string_view text) {
  std::vector<Word> out;
  size_t i = 0;
  while (i < text.size()) {
    if (!IsWordChar(text[i])) {
      ++i;
      continue;
    }
    size_t start = i;
    while (i < text.size() && IsWordChar(text[i])) ++i;
    size_t end = i;
    while (end > start && IsTrailingPunct(text[end - 1])) --end;
    if (end > start) out.push_back({std::string(text.substr(start, end - start)), start});
  }
  return out;
}

bool IsLiteralLike(std::string_view w) {
  if (w.size() < 4) return false;
  if (std::any_of(w.begin(), w.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) return true;
  // A dotted or dashed name: a separator with a letter or digit on both sides (core-sw.lab).
  for (size_t i = 1; i + 1 < w.size(); ++i)
    if ((w[i] == '.' || w[i] == '-') && std::isalnum(static_cast<unsigned char>(w[i - 1])) &&
        std::isalnum(static_cast<unsigned char>(w[i + 1])))
      return true;
  return false;
}

void KnownLiterals::AddText(std::string_view text) {
  for (Word& w : SplitWords(text)) words_.insert(std::move(w.text));
  // Copy sources are what the transcript uses as literals, by the workload's own rules (the same
  // that mark its literal spans): a plain hyphenated word (user-defined) or a count in prose is
  // not one, however literal-like it looks.
  for (const Literal& l : FindLiterals(text)) AddLiteral(l.text);
}

void KnownLiterals::AddLiteral(const std::string& literal) {
  if (literal.empty()) return;
  words_.insert(literal);
  // The parts before a joiner are right too: the network 10.20.225.0 of 10.20.225.0/24, the host
  // of host:port.
  for (size_t i = 1; i < literal.size(); ++i)
    if (IsJoiner(literal[i])) words_.insert(literal.substr(0, i));
  if (source_set_.insert(literal).second) sources_.push_back(literal);
}

std::optional<LiteralMutation> FindLiteralMutation(std::string_view text, size_t from, bool cut,
                                                   const KnownLiterals& known, const WordFilter& exempt) {
  std::vector<Word> words = SplitWords(text);
  for (const Word& w : words) {
    // Words that end before the first difference are identical in both futures; one that ends
    // exactly there ("543" then " " instead of "2") is cut short by it.
    if (w.offset + w.text.size() < from) continue;
    if (IsKnownWord(w.text, known, exempt)) continue;
    // A word the budget cut off mid-copy is a mutation only once it has left every literal.
    if (cut && RunsToEnd(text, w) && IsPrefixOfKnown(w.text, known)) continue;
    bool has_digit =
        std::any_of(w.text.begin(), w.text.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    if (!has_digit && !IsLiteralLike(w.text)) continue;  // ordinary words are not copies
    // The literal the word copies: the one it shares the longer start (or dropped head) with.
    size_t head = 0, tail = 0;
    const std::string* by_head = CopySource(w.text, known, &head);
    const std::string* by_tail = HeadDroppedSource(w.text, known, &tail);
    if (by_head && head == by_head->size() && head >= tail && AppendedAfterCopy(w.text, head)) continue;
    if (by_head || by_tail) return LiteralMutation{tail > head ? *by_tail : *by_head, w.text};
  }
  return std::nullopt;
}

}  // namespace flipscope
