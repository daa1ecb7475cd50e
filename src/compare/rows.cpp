// The full-vocabulary row kernels: one scan (max, top-10, NaN/+inf check), exp and its sum, and
// one pass that accumulates both KLs, JS and the entropy. Three passes over rows that sit in
// the thread's cache; every vector loop is compiled per instruction set and chosen at load time.
#include <algorithm>
#include <cmath>
#include <limits>

#include "compare/compare.h"
#include "compare/simd.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FS_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FS_CLONES
#endif

namespace flipscope::compare {
namespace {
using namespace simd;
constexpr float kInfF = std::numeric_limits<float>::infinity();

// Lanes in the chunk of a row of length len starting at i (kLanes except at the end). The
// kernels loop with it directly: a lambda body would not be inlined into the target clones.
FS_INLINE int ChunkLanes(size_t i, size_t len) { return len - i >= size_t(kLanes) ? kLanes : int(len - i); }

// Top-10 insertion, ties to the lowest id: rows are scanned in id order, so a later equal value
// never displaces an earlier one.
struct TopList {
  int count = 0;
  std::array<int32_t, kTopK> ids{};
  std::array<float, kTopK> vals{};
  float threshold() const { return count < kTopK ? -kInfF : vals[kTopK - 1]; }
  void Offer(float v, int32_t id) {
    if (count == kTopK && !(v > vals[kTopK - 1])) return;
    int j = count < kTopK ? count++ : kTopK - 1;
    while (j > 0 && vals[size_t(j - 1)] < v) {
      vals[size_t(j)] = vals[size_t(j - 1)];
      ids[size_t(j)] = ids[size_t(j - 1)];
      --j;
    }
    vals[size_t(j)] = v;
    ids[size_t(j)] = id;
  }
};

// Blocks of 64 values: a vector max per block; the scalar top-10 insertion only runs for blocks
// whose max beats the current 10th value (a handful of blocks per row).
constexpr int kBlock = 64;
using VF16 = float __attribute__((vector_size(64)));
using VI16 = int32_t __attribute__((vector_size(64)));

FS_CLONES void ScanKernel(const float* row, size_t len, TopList& top, float& max_out, bool& bad_out) {
  VF16 vmax = VF16{} - kInfF;
  VI16 bad = VI16{};
  float pad[kBlock];
  for (size_t b = 0; b < len; b += kBlock) {
    const int n = int(std::min<size_t>(kBlock, len - b));
    const float* p = row + b;
    if (n < kBlock) {  // the last block, padded with -inf (changes neither max nor top-10)
      std::fill(pad, pad + kBlock, -kInfF);
      std::copy(p, p + n, pad);
      p = pad;
    }
    VF16 bm = VF16{} - kInfF;
    for (int k = 0; k < kBlock; k += 16) {
      VF16 v;
      std::memcpy(&v, p + k, sizeof(v));
      bad |= ~(v < kInfF);  // NaN or +inf
      bm = v > bm ? v : bm;
    }
    vmax = bm > vmax ? bm : vmax;
    float block_max = -kInfF;
    for (int k = 0; k < 16; ++k) block_max = std::max(block_max, bm[k]);
    if (top.count == kTopK && !(block_max > top.threshold())) continue;
    for (int k = 0; k < n; ++k) top.Offer(p[k], int32_t(b) + k);
  }
  float m = -kInfF;
  int any_bad = 0;
  for (int k = 0; k < 16; ++k) {
    m = std::max(m, vmax[k]);
    any_bad |= bad[k];
  }
  max_out = m;
  bad_out = any_bad != 0;
}

// sum exp(row - max), storing each term in out when out is not null.
FS_CLONES double ExpShiftSum(const float* row, size_t len, double max, double* out) {
  V acc = Splat(0);
  const V vmax = Splat(max);
  for (size_t i = 0; i < len; i += kLanes) {
    const int n = ChunkLanes(i, len);
    V e = ExpNonPositive(LoadF(row + i, n, -kInfF) - vmax);
    if (out != nullptr) StoreD(out + i, e, n);
    acc += e;
  }
  return Sum(acc);
}

struct Divergence {
  double kl_bc = 0, kl_cb = 0, js = 0, neg_entropy = 0;
};

// One pass over both rows: log p = x - lse, p = e / Z; terms with p = 0 are dropped (their log p
// may be -inf), and JS terms where the mixture is below 1e-300 (each under 1e-297).
FS_CLONES Divergence DivergenceKernel(const float* xb, const float* xc, const double* eb, const double* ec,
                                      size_t len, double lse_b, double lse_c, double inv_zb, double inv_zc) {
  V kl_bc = Splat(0), kl_cb = Splat(0), js = Splat(0), ent = Splat(0);
  for (size_t i = 0; i < len; i += kLanes) {
    const int n = ChunkLanes(i, len);
    const V lpb = LoadF(xb + i, n, -kInfF) - Splat(lse_b);
    const V lpc = LoadF(xc + i, n, -kInfF) - Splat(lse_c);
    const V pb = LoadD(eb + i, n) * Splat(inv_zb);
    const V pc = LoadD(ec + i, n) * Splat(inv_zc);
    const VI has_b = pb > Splat(0), has_c = pc > Splat(0);
    kl_bc += Where(has_b, pb * (lpb - lpc));
    kl_cb += Where(has_c, pc * (lpc - lpb));
    ent += Where(has_b, pb * lpb);
    const V m = (pb + pc) * Splat(0.5);
    const VI has_m = m > Splat(1e-300);
    const V lm = LogPositive(has_m ? m : Splat(1.0));
    js += Where(has_m, Where(has_b, pb * (lpb - lm)) + Where(has_c, pc * (lpc - lm)));
  }
  return {Sum(kl_bc), Sum(kl_cb), 0.5 * Sum(js), Sum(ent)};
}

}  // namespace

RowSummary ScanRow(std::span<const float> row) {
  TopList top;
  float max = -kInfF;
  bool bad = false;
  ScanKernel(row.data(), row.size(), top, max, bad);
  RowSummary s;
  s.max = double(max);
  s.finite = !bad && std::isfinite(max);
  s.count = top.count;
  s.top_ids = top.ids;
  s.top_vals = top.vals;
  return s;
}

std::pair<double, double> LogSumExpAndEntropy(std::span<const float> row, double max, std::vector<double>& terms) {
  terms.resize(row.size());
  const double z = ExpShiftSum(row.data(), row.size(), max, terms.data());
  // H = log Z - sum p (x - max): only the mixed full/truncated path needs it, so plain code.
  double s = 0;
  for (size_t i = 0; i < row.size(); ++i)
    if (terms[i] > 0) s += terms[i] * (double(row[i]) - max);
  return {max + std::log(z), std::log(z) - s / z};
}

double TopOverlap(std::span<const int32_t> a, std::span<const int32_t> b, size_t k) {
  if (a.size() < k || b.size() < k) return kNaN;
  auto b_end = b.begin() + std::ptrdiff_t(k);
  size_t common = 0;
  for (size_t i = 0; i < k; ++i) common += std::find(b.begin(), b_end, a[i]) != b_end;
  return double(common) / double(k);
}

double FullMargin(std::span<const float> row, const RowSummary& s, int32_t argmax) {
  for (int i = 0; i < s.count; ++i)
    if (s.top_ids[size_t(i)] != argmax) return double(row[size_t(argmax)]) - double(s.top_vals[size_t(i)]);
  return kNaN;
}

ProbeMetrics CompareFullRows(std::span<const float> base, std::span<const float> cand, const RowSummary& sb,
                             const RowSummary& sc, int32_t base_argmax, int32_t cand_argmax, RowScratch& scratch) {
  const size_t n = base.size();
  scratch.eb.resize(n);
  scratch.ec.resize(n);
  const double zb = ExpShiftSum(base.data(), n, sb.max, scratch.eb.data());
  const double zc = ExpShiftSum(cand.data(), n, sc.max, scratch.ec.data());
  const Divergence d = DivergenceKernel(base.data(), cand.data(), scratch.eb.data(), scratch.ec.data(), n,
                                        sb.max + std::log(zb), sc.max + std::log(zc), 1.0 / zb, 1.0 / zc);
  ProbeMetrics m;
  m.base_token = base_argmax;
  m.cand_token = cand_argmax;
  m.flip = base_argmax != cand_argmax;
  m.kl_base_cand = d.kl_bc;
  m.kl_cand_base = d.kl_cb;
  m.js = d.js;
  m.base_entropy = -d.neg_entropy;
  m.top5 = TopOverlap(sb.ids(), sc.ids(), 5);
  m.top10 = TopOverlap(sb.ids(), sc.ids(), 10);
  m.base_prob = scratch.eb[size_t(base_argmax)] / zb;
  m.cand_prob = scratch.ec[size_t(cand_argmax)] / zc;
  m.cand_prob_of_base = scratch.ec[size_t(base_argmax)] / zc;
  m.base_margin = FullMargin(base, sb, base_argmax);
  return m;
}

}  // namespace flipscope::compare
