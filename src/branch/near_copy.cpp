// Near copies: a transcript's fact word copied with a byte or two wrong, or cut short, is a mangled
// copy, whether or not the workload marks it a literal (a WAL segment, a log file's path, an
// order's number without its head, an amount rounded).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "branch/chars.h"
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

// Whether copy is fact with its head dropped at a '-' or '_' and holds a digit (`2974` of
// `NW-2025-2974`, `03-19` of `2026-03-19`): a known identifier cut short. A path's last part is a
// file's own name, and a tail without a digit (`example.net`) names something on its own.
bool TailOf(std::string_view copy, std::string_view fact) {
  if (fact.size() <= copy.size() + 1 || fact.find('/') != std::string_view::npos ||
      std::none_of(copy.begin(), copy.end(), branch_chars::IsDigit))
    return false;
  const char before = fact[fact.size() - copy.size() - 1];
  return (before == '-' || before == '_') && fact.substr(fact.size() - copy.size()) == copy;
}

// Whether s is a decimal number: digits, '.', digits.
bool IsDecimal(std::string_view s) {
  const size_t dot = s.find('.');
  return dot != std::string_view::npos && dot > 0 && dot + 1 < s.size() &&
         std::all_of(s.begin(), s.begin() + long(dot), branch_chars::IsDigit) &&
         std::all_of(s.begin() + long(dot) + 1, s.end(), branch_chars::IsDigit);
}

// Whether copy and fact are decimals of the same whole part, the one with fewer decimals the
// other cut or rounded to them (`43.3` of `43.33`, `28.70` of `28.7056`), and not the same number
// (`28.7` and `28.70` are).
bool RoundedOrCut(std::string_view copy, std::string_view fact) {
  if (!IsDecimal(copy) || !IsDecimal(fact) || copy.find('.') != fact.find('.') ||
      copy.substr(0, copy.find('.')) != fact.substr(0, fact.find('.')))
    return false;
  auto bare = [](std::string_view s) {  // without trailing zeros: the number's own digits
    while (s.back() == '0') s.remove_suffix(1);
    return s;
  };
  if (bare(copy) == bare(fact)) return false;
  const std::string_view shorter = copy.size() < fact.size() ? copy : fact,
                         longer = copy.size() < fact.size() ? fact : copy;
  const int decimals = int(shorter.size() - shorter.find('.') - 1);
  const std::string rounded = fmt::format("{:.{}f}", std::strtod(std::string(longer).c_str(), nullptr), decimals);
  return longer.substr(0, shorter.size()) == shorter || rounded == shorter;
}

// A fact word written whole (not cut by the end of the text) that the transcript does not hold
// and that is a transcript fact word cut short: its tail (TailOf) or its number rounded (RoundedOrCut).
std::optional<LiteralMutation> CutShortCopy(std::string_view text, const Word& w, const FactTable& facts) {
  if (w.offset + w.text.size() >= text.size() || facts.lines_of.count(w.text)) return std::nullopt;
  for (const auto& [fact, lines] : facts.lines_of)
    if (TailOf(w.text, fact) || RoundedOrCut(w.text, fact)) return LiteralMutation{fact, w.text};
  return std::nullopt;
}

// Whether copy is fact with only its first byte changed, and the rest is long enough to name it
// (`amar.haddad@example.com` of `omar.haddad@example.com`); the first letter's case alone (a
// sentence's first word) changes nothing.
bool FirstByteSlip(std::string_view copy, std::string_view fact) {
  return copy.size() == fact.size() && copy.size() > kNearCopyMinBytes && copy.substr(1) == fact.substr(1) &&
         std::tolower(static_cast<unsigned char>(copy[0])) != std::tolower(static_cast<unsigned char>(fact[0]));
}

}  // namespace

std::optional<LiteralMutation> FindNearCopy(std::string_view text, size_t from, const FactTable& facts,
                                            const WordFilter& known) {
  for (const Word& w : SplitWords(text)) {
    // A word that ends where the future leaves the transcript was ended by the future (`43.3` then
    // `,` where the transcript writes `43.33`).
    if (w.offset + w.text.size() < from || !IsFactWord(w.text)) continue;
    if (auto cut = CutShortCopy(text, w, facts)) return cut;
    if (w.text.size() + 1 < kNearCopyMinBytes || (known && known(w.text))) continue;
    for (const auto& [fact, lines] : facts.lines_of) {
      // A copy starts right (its first byte is the fact's, or only that byte is wrong) and is at
      // most one edit per 8 bytes off.
      const size_t limit = fact.size() / kNearCopyBytes;
      const size_t longer = std::max(fact.size(), w.text.size()), shorter = std::min(fact.size(), w.text.size());
      if (fact.size() < kNearCopyMinBytes || longer - shorter > limit) continue;
      if (fact[0] != w.text[0] && !FirstByteSlip(w.text, fact)) continue;
      // The fact intact with text added (`.log.1`, a rotated log), or a part of it, is no copy gone wrong.
      if (w.text.find(fact) != std::string::npos || fact.find(w.text) != std::string::npos) continue;
      if (OnePartDiffers(w.text, fact) && EditDistance(w.text, fact, limit) <= limit)
        return LiteralMutation{fact, w.text};
    }
  }
  return std::nullopt;
}

}  // namespace flipscope
