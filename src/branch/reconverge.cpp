// Agreeing again: where two token sequences (two futures, or a future and the transcript) write the
// same text again after a detour of at most K tokens each (docs/branch.md, "Agreeing again").
#include <algorithm>

#include "branch/verdict.h"

namespace flipscope {
namespace {

int PieceAt(const std::vector<std::string>& pieces, size_t offset) {
  size_t at = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    at += pieces[i].size();
    if (offset < at) return int(i);
  }
  return int(pieces.size());
}

bool PiecesEqual(const FutureText& a, int i, const FutureText& b, int j, int n) {
  for (int t = 0; t < n; ++t)
    if (a.pieces[size_t(i + t)] != b.pieces[size_t(j + t)]) return false;
  return true;
}

// Whether a and b agree for a run from i and j: at least k equal pieces in a row holding at least
// 2k bytes. The byte floor keeps a tokenizer that writes one digit per token (Gemma's) from
// calling a shared 8-digit address a shared passage.
bool AgreeingRun(const FutureText& a, int i, const FutureText& b, int j, int k) {
  const size_t na = a.pieces.size(), nb = b.pieces.size();
  size_t t = 0, bytes = 0;
  while (size_t(i) + t < na && size_t(j) + t < nb && a.pieces[size_t(i) + t] == b.pieces[size_t(j) + t]) {
    bytes += a.pieces[size_t(i) + t].size();
    if (++t >= size_t(k) && bytes >= 2 * size_t(k)) return true;
  }
  return false;
}

// A short, printable excerpt for reasons: up to n bytes from offset, newlines shown as \n.

}  // namespace

std::string FutureText::Text() const {
  std::string s;
  for (const auto& p : pieces) s += p;
  return s;
}

size_t CommonPrefix(std::string_view a, std::string_view b) {
  size_t n = std::min(a.size(), b.size()), i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

bool SameText(const FutureText& a, const FutureText& b) {
  std::string ta = a.Text(), tb = b.Text();
  if (ta == tb) return true;
  size_t common = CommonPrefix(ta, tb);
  if (common == ta.size()) return !a.ended;  // a is the shorter: same only if the budget cut it
  if (common == tb.size()) return !b.ended;
  return false;
}

std::optional<Reconvergence> FindReconvergence(const FutureText& a, const FutureText& b, int k) {
  size_t fd = CommonPrefix(a.Text(), b.Text());
  const int ia = PieceAt(a.pieces, fd), ib = PieceAt(b.pieces, fd);
  const int na = int(a.pieces.size()), nb = int(b.pieces.size());
  // Both detours at most k tokens: a text that agrees again only after skipping (or adding) more
  // than k tokens, or whose matching run lies elsewhere in the other text, has not reconverged.
  // The shortest total detour wins, then the shorter one of a.
  for (int total = 0; total <= 2 * k; ++total) {
    for (int da = std::max(0, total - k); da <= std::min(k, total); ++da) {
      const int i = ia + da, j = ib + (total - da);
      if (i > na || j > nb) continue;
      bool run = AgreeingRun(a, i, b, j, k);
      // Both stopped at end of generation with the same last words: agreement to the end.
      bool tails = a.ended && b.ended && i < na && na - i == nb - j && PiecesEqual(a, i, b, j, na - i);
      if (run || tails) return Reconvergence{i, j, da, total - da};
    }
  }
  return std::nullopt;
}

}  // namespace flipscope
