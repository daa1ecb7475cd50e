// Runaway loops: a future that, when the budget cut it, was writing one unit again and again (a
// phrase, a line, an argument, a token such as "0") or a list whose every item grows the last.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <span>

#include "branch/chars.h"
#include "branch/verdict.h"

namespace flipscope {
namespace {

using branch_chars::IsDigit;

// Text with every digit as '0': a loop that counts (.198, .199, .200) repeats the same shape.
std::string DigitsAsZero(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (IsDigit(c)) c = '0';
  return out;
}

// The longest tail of s that repeats with period p (s[i] == s[i - p] throughout), in bytes.
size_t PeriodicTail(std::string_view s, size_t p) {
  size_t n = 0;
  while (n + p < s.size() && s[s.size() - 1 - n] == s[s.size() - 1 - n - p]) ++n;
  return n + p;  // the first unit of the run counts too
}

// How many of a future's pieces (tokens) write its last `bytes` bytes, a piece cut by the run's
// start included; 0 when the pieces are not known.
size_t PiecesInTail(std::span<const std::string> pieces, size_t bytes) {
  size_t n = 0, seen = 0;
  for (auto it = pieces.rbegin(); it != pieces.rend() && seen < bytes; ++it) seen += it->size(), ++n;
  return n;
}

// Whether the transcript writes `run` itself: its continuation, or, for a run inside one word (a
// string of zeros), the text before the point (a WAL segment's name copied up to the budget).
bool TranscriptHolds(std::string_view run, bool in_word, const RunawayText& f) {
  return f.reference.find(run) != std::string_view::npos || (in_word && f.prefix.find(run) != std::string_view::npos);
}

// Items of a list: maximal runs of bytes other than spaces, commas, semicolons and line breaks.
std::vector<std::string_view> ListItems(std::string_view text) {
  std::vector<std::string_view> out;
  auto sep = [](char c) { return c == ',' || c == ';' || std::isspace(static_cast<unsigned char>(c)); };
  for (size_t i = 0; i < text.size();) {
    while (i < text.size() && sep(text[i])) ++i;
    size_t j = i;
    while (j < text.size() && !sep(text[j])) ++j;
    if (j > i) out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

// A list whose items each extend the one before by the same text (client_addr, client_addr_state,
// client_addr_state_state, ...), kRunawayRepeats times at least (the list's items on the
// transcript's line before the point count), the item being written where the budget cut (if any)
// still on the way to the next; no unit repeats with one period there.
std::optional<std::string> GrowingLoop(const RunawayText& f) {
  const size_t line = f.prefix.find_last_of('\n');
  const std::string joined =
      std::string(f.prefix.substr(line == std::string_view::npos ? 0 : line + 1)) + std::string(f.text);
  const std::string_view all = joined;
  std::vector<std::string_view> items = ListItems(all);
  if (items.size() < kRunawayRepeats) return std::nullopt;
  // The last item, unless a separator follows it, is being written: it must start the next one.
  const char* end = all.data() + all.size();
  const bool open = items.back().data() + items.back().size() == end;
  std::string_view last = open ? items.back() : std::string_view();
  if (open) items.pop_back();
  if (items.size() < kRunawayRepeats) return std::nullopt;
  const std::string_view a = items[items.size() - 2], b = items.back();
  if (b.size() <= a.size() || b.substr(0, a.size()) != a) return std::nullopt;
  const std::string_view grow = b.substr(a.size());
  size_t n = 2;  // items of the run, the last complete one included
  while (n < items.size()) {
    const std::string_view x = items[items.size() - 1 - n], y = items[items.size() - n];
    if (y.size() != x.size() + grow.size() || y.substr(0, x.size()) != x || y.substr(x.size()) != grow) break;
    ++n;
  }
  if (n <= kRunawayRepeats) return std::nullopt;  // n items grow n - 1 times
  const std::string next = std::string(b) + std::string(grow);
  if (!last.empty() && next.compare(0, last.size(), last) != 0) return std::nullopt;
  // The bytes of the run the future wrote.
  const size_t run = std::min(f.text.size(), size_t(end - items[items.size() - n].data()));
  if (run < kRunawayBytes || 4 * run < f.text.size()) return std::nullopt;
  if (f.reference.find(f.text.substr(f.text.size() - run)) != std::string_view::npos) return std::nullopt;
  return fmt::format("grows \"{}\" by \"{}\" {} times without ending", items[items.size() - n].substr(0, 40),
                     grow.substr(0, 20), n - 1);
}

}  // namespace

std::optional<std::string> FindRunaway(const RunawayText& f) {
  if (f.ended) return std::nullopt;
  const std::string_view text = f.text;
  const std::string shape = DigitsAsZero(text);
  // A tail of `run` bytes repeating with period p, `repeats` copies at least, is long enough: over
  // kRunawayBytes and a quarter of the future's bytes, or, where the pieces are known, written by
  // kRunawayPieces pieces and a quarter of them (a digit at a time: nine zeros are nine tokens).
  // The pieces count only for a run inside a word that began before it (1000000000, 0xDF4000000):
  // a word that is all zeros so far may still be a padded name being copied (a WAL segment's).
  auto enough = [&](size_t run, size_t p, size_t repeats) {
    if (run < repeats * p) return false;
    if (run >= kRunawayBytes && 4 * run >= shape.size()) return true;
    const size_t at = text.size() - run;
    const std::string_view tail = text.substr(at);
    if (at == 0 || !IsWordChar(text[at - 1]) || !std::all_of(tail.begin(), tail.end(), IsWordChar)) return false;
    const size_t pieces = PiecesInTail(f.pieces, run);
    return pieces >= kRunawayPieces && 4 * pieces >= f.pieces.size();
  };
  for (size_t p = 2; p <= shape.size() / kRunawayRepeats; ++p) {
    // Copies alike only in shape (.198, .199, .200) are a list that counts until they run on:
    // three items of an enumeration are output, not yet a loop. Identical copies loop sooner.
    size_t run = PeriodicTail(text, p);
    if (!enough(run, p, kRunawayRepeats)) {
      run = PeriodicTail(shape, p);
      if (!enough(run, p, kRunawayCountingRepeats)) continue;
    }
    const std::string_view unit = text.substr(text.size() - run, p);
    if (std::all_of(unit.begin(), unit.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); }))
      continue;  // whitespace alone
    // The transcript's own text repeating (a table, a list of hosts) is no loop of the future's.
    // A unit inside one word (a run of zeros) must repeat in the transcript as often as the
    // future repeats it: six zeros inside a WAL segment's name do not excuse thirty.
    const bool in_word = std::all_of(unit.begin(), unit.end(), IsWordChar);
    const size_t excused = in_word ? run : std::min(run, kRunawayRepeats * p);
    if (TranscriptHolds(text.substr(text.size() - run, excused), in_word, f)) return std::nullopt;
    std::string shown(unit.substr(0, 40));
    std::replace(shown.begin(), shown.end(), '\n', ' ');
    return fmt::format("loops on \"{}\" {} times without ending", shown, run / p);
  }
  return GrowingLoop(f);
}

std::optional<std::string> FindRunaway(std::string_view text, bool ended, std::string_view reference) {
  return FindRunaway(RunawayText{.text = text, .ended = ended, .reference = reference});
}

}  // namespace flipscope
