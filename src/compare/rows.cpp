// The full-vocabulary row kernels: one scan (max, top-10, NaN/+inf check), exp and its sum, and
// one pass that accumulates both KLs, JS and the entropy. Three passes over rows that sit in
// the thread's cache. Every kernel is a template over the vector width, instantiated once per
// instruction set at its native width and chosen once at start-up (Dispatch below).
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "compare/compare.h"
#include "compare/simd.h"

namespace flipscope::compare {
namespace {
using namespace simd;
constexpr float kInfF = std::numeric_limits<float>::infinity();

// Runs step(offset) over a row of len values in chunks of W, then once more over the last
// partial chunk copied into padded buffers (steps take pointers, so the main loop has no
// branches). step must be a functor with an always-inline operator(): a lambda would not be
// inlined into the per-instruction-set kernels.
template <typename L, typename Step>
FS_INLINE void ForChunks(size_t len, Step& step) {
  size_t i = 0;
  for (; i + L::kW <= len; i += L::kW) step.Full(i);
  if (i < len) step.Tail(i, int(len - i));
}

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

// A stored value as float: F32 as is, BF16 (raw bits) moved into the high half.
FS_INLINE float WidenOne(float v) { return v; }
FS_INLINE float WidenOne(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }
template <typename L>
FS_INLINE typename L::VF2 WidenVec(const float* p) {
  typename L::VF2 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
template <typename L>
FS_INLINE typename L::VF2 WidenVec(const uint16_t* p) {
  typename L::VH2 h;
  std::memcpy(&h, p, sizeof(h));
  return (typename L::VF2)(__builtin_convertvector(h, typename L::VU2) << 16);
}

// The scan's per-vector work: the block max and the NaN / +inf flag.
template <typename L>
FS_INLINE void ScanVec(typename L::VF2 v, typename L::VF2& bm, typename L::VI2& bad) {
  bad |= ~(v < (typename L::VF2{} + kInfF));  // NaN or +inf
  bm = v > bm ? v : bm;
}

// Scans src (F32 values, or BF16 bits), writing the values as float to out unless out is null
// (then src is the float row itself).
template <typename L, typename Src>
FS_INLINE void ScanT(const Src* src, float* out, size_t len, TopList& top, float& max_out, bool& bad_out) {
  using VF = typename L::VF2;
  using VI = typename L::VI2;
  constexpr int kF = 2 * L::kW;  // floats per vector
  const VF neg_inf = VF{} - kInfF;
  VF vmax = neg_inf;
  VI bad = VI{};
  float pad[kBlock];
  for (size_t b = 0; b < len; b += kBlock) {
    const int n = int(std::min<size_t>(kBlock, len - b));
    VF bm = neg_inf;
    const float* p;  // the block's values as float
    if (n == kBlock) {
      for (int k = 0; k < kBlock; k += kF) {
        const VF v = WidenVec<L>(src + b + size_t(k));
        if (out != nullptr) std::memcpy(out + b + size_t(k), &v, sizeof(v));
        ScanVec<L>(v, bm, bad);
      }
      if constexpr (std::is_same_v<Src, float>)
        p = out != nullptr ? out + b : src + b;
      else
        p = out + b;
    } else {  // the last block, padded with -inf (changes neither max nor top-10)
      std::fill(pad, pad + kBlock, -kInfF);
      for (int k = 0; k < n; ++k) pad[k] = WidenOne(src[b + size_t(k)]);
      if (out != nullptr) std::copy(pad, pad + n, out + b);
      for (int k = 0; k < kBlock; k += kF) ScanVec<L>(WidenVec<L>(pad + k), bm, bad);
      p = pad;
    }
    vmax = bm > vmax ? bm : vmax;
    float block_max = -kInfF;
    for (int k = 0; k < kF; ++k) block_max = std::max(block_max, bm[k]);
    if (top.count == kTopK && !(block_max > top.threshold())) continue;
    for (int k = 0; k < n; ++k) top.Offer(p[k], int32_t(b) + k);
  }
  float m = -kInfF;
  int any_bad = 0;
  for (int k = 0; k < kF; ++k) {
    m = std::max(m, vmax[k]);
    any_bad |= bad[k];
  }
  max_out = m;
  bad_out = any_bad != 0;
}

// Step of ExpShiftSum: e = exp(x - max) stored in out and summed. Z is one term of 1 (the max)
// and up to ~10^5 small ones: added plainly to a running sum near 1, each small term loses up to
// half an ulp of 1, and on a confident row that moved log Z (so every KL) by ~1e-13. So terms go
// into a short partial sum, and every kFold vectors the partial is added to acc with its rounding
// error kept in err (TwoSum): at most kFold - 1 terms per lane round against a large value.
template <typename L>
struct ExpStep {
  using V = typename L::V;
  static constexpr int kFold = 16;
  const float* x;
  double* out;
  V max, part = Splat<V>(0), acc = Splat<V>(0), err = Splat<V>(0);
  int in_part = 0;
  FS_INLINE void At(const float* xp, double* op) {
    const V e = ExpNonPositive<L>(LoadF<L>(xp) - max);
    StoreD<L>(op, e);
    part += e;
    if (++in_part == kFold) Fold();
  }
  FS_INLINE void Fold() {
    const V s = acc + part, back = s - acc;
    err += (acc - (s - back)) + (part - back);
    acc = s;
    part = Splat<V>(0);
    in_part = 0;
  }
  FS_INLINE void Full(size_t i) { At(x + i, out + i); }
  FS_INLINE void Tail(size_t i, int n) {
    float xt[L::kW];
    double ot[L::kW];
    std::fill(xt, xt + L::kW, -kInfF);  // exp(-inf) = 0: padding adds nothing
    std::copy(x + i, x + i + n, xt);
    At(xt, ot);
    std::copy(ot, ot + n, out + i);
  }
};

// sum exp(row - max), each term stored in out.
template <typename L>
FS_INLINE double ExpShiftSumT(const float* row, size_t len, double max, double* out) {
  ExpStep<L> step{row, out, Splat<typename L::V>(max)};
  ForChunks<L>(len, step);
  step.Fold();
  return Sum(step.acc) + Sum(step.err);
}

struct Divergence {
  double kl_bc = 0, kl_cb = 0, js = 0, neg_entropy = 0;
};

// Step of the divergence pass: log p = x - lse, p = e / Z; terms with p = 0 are dropped (their
// log p may be -inf), and JS terms where the mixture is below 1e-300 (each under 1e-297) or where
// p_b = p_c (exactly 0: m = p there, but log m and x - lse differ in their last bits, which made
// bit-identical rows report a JS of +-1e-17).
template <typename L>
struct DivergenceStep {
  using V = typename L::V;
  using VI = typename L::VI;
  const float *xb, *xc;
  const double *eb, *ec;
  V lse_b, lse_c, inv_zb, inv_zc;
  V kl_bc = Splat<V>(0), kl_cb = Splat<V>(0), js = Splat<V>(0), ent = Splat<V>(0);
  FS_INLINE void At(const float* xbp, const float* xcp, const double* ebp, const double* ecp) {
    const V lpb = LoadF<L>(xbp) - lse_b;
    const V lpc = LoadF<L>(xcp) - lse_c;
    const V pb = LoadD<L>(ebp) * inv_zb;
    const V pc = LoadD<L>(ecp) * inv_zc;
    const VI has_b = pb > Splat<V>(0), has_c = pc > Splat<V>(0);
    kl_bc += Where(has_b, pb * (lpb - lpc));
    kl_cb += Where(has_c, pc * (lpc - lpb));
    ent += Where(has_b, pb * lpb);
    // pb = pc gives m = 0, so no JS term (folded into m: a separate mask doubled the AVX-512 pass).
    const V m = pb == pc ? Splat<V>(0) : (pb + pc) * Splat<V>(0.5);
    const VI has_m = m > Splat<V>(1e-300);
    const V lm = LogPositive<L>(has_m ? m : Splat<V>(1.0));
    js += Where(has_m, Where(has_b, pb * (lpb - lm)) + Where(has_c, pc * (lpc - lm)));
  }
  FS_INLINE void Full(size_t i) { At(xb + i, xc + i, eb + i, ec + i); }
  FS_INLINE void Tail(size_t i, int n) {
    float xbt[L::kW], xct[L::kW];
    double ebt[L::kW] = {}, ect[L::kW] = {};  // p = 0: padding adds nothing
    std::fill(xbt, xbt + L::kW, -kInfF);
    std::fill(xct, xct + L::kW, -kInfF);
    std::copy(xb + i, xb + i + n, xbt);
    std::copy(xc + i, xc + i + n, xct);
    std::copy(eb + i, eb + i + n, ebt);
    std::copy(ec + i, ec + i + n, ect);
    At(xbt, xct, ebt, ect);
  }
};

template <typename L>
FS_INLINE Divergence DivergenceT(const float* xb, const float* xc, const double* eb, const double* ec, size_t len,
                                 double lse_b, double lse_c, double inv_zb, double inv_zc) {
  using V = typename L::V;
  DivergenceStep<L> step{xb, xc, eb, ec, Splat<V>(lse_b), Splat<V>(lse_c), Splat<V>(inv_zb), Splat<V>(inv_zc)};
  ForChunks<L>(len, step);
  return {Sum(step.kl_bc), Sum(step.kl_cb), 0.5 * Sum(step.js), Sum(step.ent)};
}

// The kernels of one instruction set.
struct Kernels {
  const char* isa;
  void (*scan)(const float*, float*, size_t, TopList&, float&, bool&);
  void (*scan_bf16)(const uint16_t*, float*, size_t, TopList&, float&, bool&);
  double (*exp_shift_sum)(const float*, size_t, double, double*);
  Divergence (*divergence)(const float*, const float*, const double*, const double*, size_t, double, double, double,
                           double);
};

// Instantiates the three kernels at width W under a target attribute (empty: the baseline).
#define FS_KERNELS(name, isa, attr, W)                                                                                 \
  attr void name##Scan(const float* r, float* o, size_t n, TopList& t, float& m, bool& b) {                            \
    ScanT<Lanes<W>>(r, o, n, t, m, b);                                                                                 \
  }                                                                                                                    \
  attr void name##ScanBf16(const uint16_t* r, float* o, size_t n, TopList& t, float& m, bool& b) {                     \
    ScanT<Lanes<W>>(r, o, n, t, m, b);                                                                                 \
  }                                                                                                                    \
  attr double name##Exp(const float* r, size_t n, double m, double* o) { return ExpShiftSumT<Lanes<W>>(r, n, m, o); }  \
  attr Divergence name##Div(const float* xb, const float* xc, const double* eb, const double* ec, size_t n, double lb, \
                            double lc, double ib, double ic) {                                                         \
    return DivergenceT<Lanes<W>>(xb, xc, eb, ec, n, lb, lc, ib, ic);                                                   \
  }                                                                                                                    \
  constexpr Kernels name{isa, name##Scan, name##ScanBf16, name##Exp, name##Div};

FS_KERNELS(kBaseline, "baseline", , 2)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
FS_KERNELS(kAvx2, "avx2", __attribute__((target("arch=x86-64-v3"))), 4)
FS_KERNELS(kAvx512, "avx512", __attribute__((target("arch=x86-64-v4"))), 8)
#endif
#undef FS_KERNELS

// Every instantiated set, widest first.
std::vector<const Kernels*> AllKernels() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  return {&kAvx512, &kAvx2, &kBaseline};
#else
  return {&kBaseline};
#endif
}

bool Supports(const Kernels& k) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  __builtin_cpu_init();
  if (&k == &kAvx512) return __builtin_cpu_supports("x86-64-v4");
  if (&k == &kAvx2) return __builtin_cpu_supports("x86-64-v3");
#endif
  return &k == &kBaseline;
}

// The kernels in use: the widest this CPU runs, or the ones FLIPSCOPE_COMPARE_ISA / SetKernelIsa
// name (tests run every path; benchmarks compare them).
std::atomic<const Kernels*>& Current() {
  static std::atomic<const Kernels*> k = [] {
    const char* env = std::getenv("FLIPSCOPE_COMPARE_ISA");
    for (const Kernels* c : AllKernels())
      if (Supports(*c) && (env == nullptr || std::string(env) == c->isa)) return c;
    return &kBaseline;
  }();
  return k;
}
const Kernels& Dispatch() { return *Current().load(std::memory_order_relaxed); }

}  // namespace

const char* KernelIsa() { return Dispatch().isa; }

Status SetKernelIsa(const std::string& isa) {
  for (const Kernels* k : AllKernels())
    if (isa == k->isa) {
      if (!Supports(*k)) return Status::Error("this CPU cannot run the " + isa + " kernels");
      Current().store(k);
      return Status::Ok();
    }
  return Status::Error("unknown kernel instruction set '" + isa + "' (avx512, avx2, baseline)");
}

namespace {
RowSummary Summarize(const TopList& top, float max, bool bad) {
  RowSummary s;
  s.max = double(max);
  s.finite = !bad && std::isfinite(max);
  s.count = top.count;
  s.top_ids = top.ids;
  s.top_vals = top.vals;
  return s;
}
}  // namespace

RowSummary ScanRow(std::span<const float> row) {
  TopList top;
  float max = -kInfF;
  bool bad = false;
  Dispatch().scan(row.data(), nullptr, row.size(), top, max, bad);
  return Summarize(top, max, bad);
}

RowSummary ScanStoredRow(std::span<const uint8_t> stored, bool bf16, std::span<float> out) {
  TopList top;
  float max = -kInfF;
  bool bad = false;
  // The mapping holds F32 rows 4-aligned and BF16 rows 2-aligned (the format aligns every tensor
  // to its element size), so the casts are to properly aligned values.
  if (bf16) {
    Dispatch().scan_bf16(reinterpret_cast<const uint16_t*>(stored.data()), out.data(), out.size(), top, max, bad);
  } else {
    Dispatch().scan(reinterpret_cast<const float*>(stored.data()), out.data(), out.size(), top, max, bad);
  }
  return Summarize(top, max, bad);
}

std::pair<double, double> LogSumExpAndEntropy(std::span<const float> row, double max, std::vector<double>& terms) {
  terms.resize(row.size());
  const double z = Dispatch().exp_shift_sum(row.data(), row.size(), max, terms.data());
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
  const Kernels& k = Dispatch();
  const double zb = k.exp_shift_sum(base.data(), n, sb.max, scratch.eb.data());
  const double zc = k.exp_shift_sum(cand.data(), n, sc.max, scratch.ec.data());
  const Divergence d = k.divergence(base.data(), cand.data(), scratch.eb.data(), scratch.ec.data(), n,
                                    sb.max + std::log(zb), sc.max + std::log(zc), 1.0 / zb, 1.0 / zc);
  ProbeMetrics m;
  m.base_token = base_argmax;
  m.cand_token = cand_argmax;
  m.flip = base_argmax != cand_argmax;
  m.kl_base_cand = NonNegative(d.kl_bc);
  m.kl_cand_base = NonNegative(d.kl_cb);
  m.js = NonNegative(d.js);
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
