// Near copies: a transcript's fact word copied with a byte or two wrong is a mangled copy, whether
// or not the workload marks it a literal (a WAL segment, a log file's path).
#include <algorithm>
#include <string_view>
#include <vector>

#include "branch/verdict.h"

namespace flipscope {
namespace {

// Whether a and b split at '.', '/', ':' and '@' into as many parts, the same separators, and
// differ in one part: a
// copy with one part mangled (a WAL segment's digit, `lab-sw1` in a host's name), not a path or
// name put together anew (`/var/log/postgresql/15/main.log` of `/var/lib/postgresql/15/main/log`).
bool OnePartDiffers(std::string_view a, std::string_view b) {
  // The parts, each with the separator that ends it (none for the last).
  auto parts = [](std::string_view s) {
    std::vector<std::string_view> out;
    size_t start = 0;
    for (size_t i = 0; i <= s.size(); ++i)
      if (i == s.size() || std::string_view("./:@").find(s[i]) != std::string_view::npos)
        out.push_back(s.substr(start, i + 1 - start)), start = i + 1;
    return out;
  };
  const std::vector<std::string_view> pa = parts(a), pb = parts(b);
  if (pa.size() != pb.size()) return false;
  for (size_t i = 0; i + 1 < pa.size(); ++i)
    if (pa[i].back() != pb[i].back()) return false;  // the same separators in the same places
  size_t differ = 0;
  for (size_t i = 0; i < pa.size(); ++i) differ += pa[i] != pb[i];
  return differ == 1;
}

// The edit distance of a and b (insertions, deletions, substitutions), or limit + 1 as soon as
// every way through exceeds limit.
size_t EditDistance(std::string_view a, std::string_view b, size_t limit) {
  std::vector<size_t> row(b.size() + 1), next(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    next[0] = i;
    size_t best = next[0];
    for (size_t j = 1; j <= b.size(); ++j) {
      next[j] = std::min({row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] != b[j - 1])});
      best = std::min(best, next[j]);
    }
    if (best > limit) return limit + 1;
    std::swap(row, next);
  }
  return std::min(row[b.size()], limit + 1);
}

}  // namespace

std::optional<LiteralMutation> FindNearCopy(std::string_view text, size_t from, const FactTable& facts,
                                            const WordFilter& known) {
  for (const Word& w : SplitWords(text)) {
    if (w.offset + w.text.size() <= from || w.text.size() + 1 < kNearCopyMinBytes || !IsFactWord(w.text)) continue;
    if (known && known(w.text)) continue;
    for (const auto& [fact, lines] : facts.lines_of) {
      // A copy starts right (its first byte is the fact's) and is at most one edit per 8 bytes off.
      const size_t limit = fact.size() / kNearCopyBytes;
      const size_t longer = std::max(fact.size(), w.text.size()), shorter = std::min(fact.size(), w.text.size());
      if (fact.size() < kNearCopyMinBytes || fact[0] != w.text[0] || longer - shorter > limit) continue;
      // The fact intact with text added (`.log.1`, a rotated log), or a part of it, is no copy gone wrong.
      if (w.text.find(fact) != std::string::npos || fact.find(w.text) != std::string::npos) continue;
      if (OnePartDiffers(w.text, fact) && EditDistance(w.text, fact, limit) <= limit)
        return LiteralMutation{fact, w.text};
    }
  }
  return std::nullopt;
}

}  // namespace flipscope
