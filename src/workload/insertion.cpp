// Where one rendering of a conversation inserts text into another: the primitives that locate
// messages and tool calls in the rendered text (render.cpp).
#include <algorithm>
#include <string_view>

#include "workload/internal.h"

namespace flipscope::workload {
namespace {

// How much an inserted text [p, p + len) of text looks like one: an opening bracket (or a
// newline) at its start and a closing one at its end count one each.
int Score(const std::string& text, size_t p, size_t len) {
  return int(std::string_view("<[{(\n").find(text[p]) != std::string_view::npos) +
         int(std::string_view(">]})\n").find(text[p + len - 1]) != std::string_view::npos);
}

// The length of the common prefix of a and b.
size_t CommonPrefix(const std::string& a, const std::string& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

// The range [earliest, latest] of points where inserting one string into `before` gives
// `after`, or {npos, npos}. It is a range when the inserted text starts like what follows it
// ("<call>..</call>" before "<|im_end|>" is also "call>..</call><" one byte later).
std::pair<size_t, size_t> InsertionRange(const std::string& before, const std::string& after) {
  size_t latest = std::min(CommonPrefix(before, after), before.size()), suffix = 0;
  while (suffix < before.size() && before[before.size() - 1 - suffix] == after[after.size() - 1 - suffix]) ++suffix;
  const size_t earliest = before.size() - suffix;
  if (earliest > latest || after.size() == before.size()) return {std::string::npos, std::string::npos};
  return {earliest, latest};
}

// One insertion point: the candidate that starts with an opening and ends with a closing
// bracket (or a newline) wins, the latest on ties; npos when `after` is no insertion.
size_t InsertionPoint(const std::string& before, const std::string& after) {
  const size_t len = after.size() - before.size();
  auto [earliest, latest] = InsertionRange(before, after);
  if (earliest == std::string::npos) return earliest;
  size_t best = latest;
  for (size_t p = latest; p + 1 > earliest; --p) {
    if (Score(after, p, len) > Score(after, best, len)) best = p;
    if (p == 0) break;
  }
  return best;
}

// Where the text that `after` inserts into `before` is (in `after`, in `full` at or after
// `from`), or npos. Of the ambiguous insertion points (see InsertionRange) only those whose text is
// found in `full` count, scored as in InsertionPoint (a user message inserted before the
// sentinel user message could also be read as starting with the previous message's end
// marker). The last message is rendered differently as the last one, so for it (!whole) the
// longest prefix of its text is looked for.
std::pair<size_t, size_t> LocateInsertion(const std::string& before, const std::string& after, const std::string& full,
                                          size_t from, bool whole) {
  constexpr size_t npos = std::string::npos;
  const size_t len = after.size() - before.size();
  if (!whole) {
    size_t at = InsertionPoint(before, after), best = npos, best_len = 0;
    for (size_t pos = from; at != npos && pos < full.size() && best_len < len; ++pos) {
      size_t c = 0;
      while (c < len && pos + c < full.size() && full[pos + c] == after[at + c]) ++c;
      if (c > best_len) best = pos, best_len = c;
    }
    return {at, best};
  }
  auto [earliest, latest] = InsertionRange(before, after);
  std::pair<size_t, size_t> best = {npos, npos};
  int best_score = -1;
  // Text between messages is short, except before the first ones (a tool list): bounded search.
  std::string_view region = std::string_view(full).substr(0, std::min(full.size(), from + len + (1 << 16)));
  for (size_t p = latest; earliest != npos && p + 1 > earliest; --p) {
    size_t q = region.find(std::string_view(after).substr(p, len), from);
    if (q != npos && Score(after, p, len) > best_score) best = {p, q}, best_score = Score(after, p, len);
    if (p == 0) break;
  }
  return best;
}

}  // namespace flipscope::workload
