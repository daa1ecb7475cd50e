// Unit tests of the statistics and row helpers: Wilson intervals (closed forms), percentiles
// (against numpy), window edges, the top-10 scan (against a sort), rates, classes and spans.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "capture/manifest.h"
#include "compare/compare.h"
#include "testing/tiny_model.h"

using namespace flipscope;
using namespace flipscope::compare;

namespace {
// stdout of a shell command (the test fails when it exits non-zero).
std::string Shell(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << cmd;
  return out;
}
}  // namespace

TEST(Wilson, ClosedFormsAtTheEdges) {
  const double z = 1.959963984540054, z2 = z * z;
  for (int n : {1, 10, 250, 3512}) {
    // k = 0: [0, z²/(n+z²)]; k = n: [n/(n+z²), 1] (the score interval solved by hand).
    auto [lo0, hi0] = WilsonInterval(0, n);
    EXPECT_DOUBLE_EQ(lo0, 0.0);
    EXPECT_NEAR(hi0, z2 / (n + z2), 1e-15);
    auto [lon, hin] = WilsonInterval(n, n);
    EXPECT_NEAR(lon, n / (n + z2), 1e-15);
    EXPECT_DOUBLE_EQ(hin, 1.0);
  }
  // Mirror symmetry, and the interval holds the point estimate.
  for (int k : {1, 13, 100}) {
    auto [lo, hi] = WilsonInterval(k, 3512);
    auto [mlo, mhi] = WilsonInterval(3512 - k, 3512);
    EXPECT_NEAR(lo, 1 - mhi, 1e-14);
    EXPECT_NEAR(hi, 1 - mlo, 1e-14);
    EXPECT_LT(lo, k / 3512.0);
    EXPECT_GT(hi, k / 3512.0);
  }
  // The score interval's bounds solve |p - p̂| = z sqrt(p(1-p)/n).
  auto [lo, hi] = WilsonInterval(13, 3512);
  for (double p : {lo, hi}) EXPECT_NEAR(std::fabs(p - 13 / 3512.0), z * std::sqrt(p * (1 - p) / 3512), 1e-15);
  auto empty = WilsonInterval(0, 0);
  EXPECT_EQ(empty, std::make_pair(0.0, 1.0));
}

// The score formula's k = 0 lower bound is center - half of two equal terms: rounding left
// 4.3e-19 at n = 495 or 596 (and 1 - 2e-16 above at k = n, n = 250). Both bounds are exact at
// every n, and a window without flips prints its lower bound as 0.
TEST(Wilson, NoFlipsIsExactlyZeroAndAllFlipsExactlyOne) {
  for (int64_t n = 1; n <= 5000; ++n) {
    EXPECT_EQ(WilsonInterval(0, n).first, 0.0) << n;
    EXPECT_EQ(WilsonInterval(n, n).second, 1.0) << n;
    EXPECT_GT(WilsonInterval(0, n).second, 0.0) << n;
    EXPECT_LT(WilsonInterval(n, n).first, 1.0) << n;
  }
  std::vector<ProbeMetrics> probes(596);
  for (size_t i = 0; i < probes.size(); ++i) probes[i].position = int32_t(i);
  Comparison c;
  c.windows = ComputeWindows(probes, 8192, 0);
  ASSERT_EQ(c.windows.size(), 1u);
  c.overall = ComputeOverall(probes, CompareOptions{});
  const std::string hi = fmt::format("{:.17g}", WilsonInterval(0, 596).second);
  const std::string csv = RenderCompareCsv({c});
  EXPECT_NE(csv.find(",596,0,0,0," + hi + ","), std::string::npos) << csv;
  const std::string table = RenderCompareTable({c});
  EXPECT_NE(table.find(fmt::format("[0.000%, {:.3f}%]", 100 * WilsonInterval(0, 596).second)), std::string::npos)
      << table;
  EXPECT_EQ(table.find("e-1"), std::string::npos) << table;  // no 4.337e-19
}

TEST(Percentile, MatchesNumpyLinear) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> d(-8, 3);
  for (size_t n : {1, 2, 7, 1000}) {
    std::vector<double> v(n);
    for (auto& x : v) x = d(rng);
    std::string path = fixtures::TempPath("percentile-" + std::to_string(n) + ".txt");
    {
      std::ofstream f(path);
      f.precision(17);
      for (double x : v) f << x << "\n";
    }
    std::vector<double> qs = {0, 0.1, 1, 5, 10, 25, 50, 90, 95, 99, 99.9, 100};
    std::string script = "import numpy as np, json; v = np.loadtxt('" + path +
                         "', ndmin=1); print(json.dumps([float(np.percentile(v, q)) for q in " +
                         nlohmann::json(qs).dump() + "]))";
    auto ref = nlohmann::json::parse(Shell(std::string(FLIPSCOPE_PYTHON) + " -c \"" + script + "\""));
    std::sort(v.begin(), v.end());
    for (size_t i = 0; i < qs.size(); ++i)
      EXPECT_NEAR(Percentile(v, qs[i]), ref[i].get<double>(), 1e-15 * v.back()) << qs[i];
  }
  EXPECT_TRUE(std::isnan(Percentile({}, 50)));
}

TEST(Windows, EdgesAndClamping) {
  // Window i covers [i*W, (i+1)*W): positions W-1 and W fall in different windows.
  const int64_t w = 100;
  std::vector<ProbeMetrics> probes;
  for (int32_t p : {0, 99, 100, 199, 350, 399, 400}) {
    ProbeMetrics m;
    m.position = p;
    m.flip = p == 99 || p == 100 || p == 400;
    m.kl_base_cand = p / 1000.0;
    probes.push_back(m);
  }
  auto ws = ComputeWindows(probes, w, 401);
  ASSERT_EQ(ws.size(), 4u);  // window 2 holds no probe and is left out
  EXPECT_EQ(ws[0].index, 0);
  EXPECT_EQ(ws[0].probes, 2);
  EXPECT_EQ(ws[0].flips, 1);
  EXPECT_EQ(ws[1].index, 1);
  EXPECT_EQ(ws[1].begin, 100);
  EXPECT_EQ(ws[1].end, 200);
  EXPECT_EQ(ws[1].probes, 2);
  EXPECT_EQ(ws[2].index, 3);
  EXPECT_EQ(ws[2].probes, 2);
  EXPECT_EQ(ws[2].flips, 0);
  EXPECT_EQ(ws[3].index, 4);
  EXPECT_EQ(ws[3].begin, 400);
  EXPECT_EQ(ws[3].end, 401);  // clamped to the workload's length
  EXPECT_DOUBLE_EQ(ws[3].flip_rate, 1.0);
  EXPECT_DOUBLE_EQ(ws[2].kl_mean, (0.350 + 0.399) / 2);
  EXPECT_DOUBLE_EQ(ws[2].kl_max, 0.399);
}

TEST(ScanRow, TopTenWithTiesMatchesASort) {
  std::mt19937_64 rng(3);
  for (size_t n : {10, 11, 63, 64, 65, 1000, 151936}) {
    std::vector<float> row(n);
    // Few distinct values, so the top ten is full of ties (as in BF16 rows).
    std::uniform_int_distribution<int> d(0, 40);
    for (auto& x : row) x = float(d(rng)) * 0.25f;
    row[n / 2] = -INFINITY;
    RowSummary s = ScanRow(row);
    std::vector<int32_t> ids(n);
    std::iota(ids.begin(), ids.end(), 0);
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return row[size_t(a)] > row[size_t(b)]; });
    ASSERT_EQ(s.count, 10);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(s.top_ids[size_t(i)], ids[size_t(i)]) << n << " rank " << i;
    EXPECT_EQ(s.max, double(*std::max_element(row.begin(), row.end())));
    EXPECT_TRUE(s.finite);
  }
  std::vector<float> bad(100, 1.0f);
  bad[77] = NAN;
  EXPECT_FALSE(ScanRow(bad).finite);
  bad[77] = INFINITY;
  EXPECT_FALSE(ScanRow(bad).finite);
  std::vector<float> none(5, -INFINITY);
  EXPECT_FALSE(ScanRow(none).finite);
}

TEST(ScanRow, StoredRowsWidenLikeTheReader) {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> d(0, 3);
  for (size_t n : {10, 63, 64, 65, 1003, 151936}) {
    std::vector<float> f32(n), widened(n), out(n, 7.0f);
    std::vector<uint16_t> bf16(n);
    for (size_t i = 0; i < n; ++i) {
      f32[i] = d(rng);
      bf16[i] = uint16_t(std::bit_cast<uint32_t>(f32[i]) >> 16);
      widened[i] = std::bit_cast<float>(uint32_t(bf16[i]) << 16);  // BF16 -> F32 is exact
    }
    auto same = [](const RowSummary& a, const RowSummary& b) {
      return a.max == b.max && a.finite == b.finite && a.count == b.count && a.top_ids == b.top_ids;
    };
    RowSummary s = ScanStoredRow(std::span(reinterpret_cast<const uint8_t*>(f32.data()), n * 4), false, out);
    EXPECT_EQ(out, f32) << n;
    EXPECT_TRUE(same(s, ScanRow(f32))) << n;
    s = ScanStoredRow(std::span(reinterpret_cast<const uint8_t*>(bf16.data()), n * 2), true, out);
    EXPECT_EQ(out, widened) << n;
    EXPECT_TRUE(same(s, ScanRow(widened))) << n;
  }
}

// A confident row over a large vocabulary: one logit at the max and 150,000 at max - 30, so
// Z = 1 + 150000 e^-30 with every small term far below an ulp of the running sum. Summed plainly
// they rounded against 1 one by one and log Z drifted by ~1e-12 on the 2-wide kernels; every
// kernel must give log Z (and so the entropy) within a few ulp of 1.
TEST(LogSumExp, ConfidentWideRowOnEveryKernel) {
  const size_t n = 150001;
  std::vector<float> row(n, -30.0f);
  row[n / 3] = 0.0f;  // max 0, so log-sum-exp = log Z with no rounding to a larger max
  const double small = std::exp(-30.0), mass = double(n - 1) * small;
  const double want_log_z = std::log1p(mass);                           // exact to ~1 ulp of ~1.4e-8
  const double want_entropy = want_log_z + 30.0 * mass / (1.0 + mass);  // log Z - E[x - max]
  const std::string initial = KernelIsa();
  std::vector<double> terms;
  int ran = 0;
  for (const char* isa : {"avx512", "avx2", "baseline"}) {
    if (!SetKernelIsa(isa).ok()) continue;  // not on this CPU
    auto [lse, entropy] = LogSumExpAndEntropy(row, 0.0, terms);
    EXPECT_NEAR(lse, want_log_z, 2e-15) << isa;  // Z near 1 is held to ~9 ulp (kFold - 1 absorbed terms per lane)
    EXPECT_NEAR(entropy, want_entropy, 2e-15) << isa;
    ++ran;
  }
  EXPECT_GE(ran, 1);
  ASSERT_TRUE(SetKernelIsa(initial).ok());
}

TEST(Rates, ParseAndGate) {
  EXPECT_DOUBLE_EQ(*ParseRate("0.005"), 0.005);
  EXPECT_DOUBLE_EQ(*ParseRate("0.5%"), 0.005);
  EXPECT_DOUBLE_EQ(*ParseRate("100%"), 1.0);
  for (const char* bad : {"", "%", "abc", "0.5%%", "1.5", "-0.1", "2%x", "nan"})
    EXPECT_FALSE(ParseRate(bad).ok()) << bad;
  Comparison c;
  c.cand_path = "cand.safetensors";
  c.overall.probes = 1000;
  c.overall.flips = 6;
  c.overall.flip_rate = 0.006;
  c.overall.kl_base_cand.mean = 2e-3;
  EXPECT_TRUE(GateViolations(c, {}).empty());
  EXPECT_TRUE(GateViolations(c, {0.006, 2e-3}).empty());  // equal is not above
  auto v = GateViolations(c, {0.005, 1e-3});
  ASSERT_EQ(v.size(), 2u);
  EXPECT_NE(v[0].find("cand.safetensors: flip rate 0.600%"), std::string::npos) << v[0];
  EXPECT_NE(v[1].find("mean KL(base||cand)"), std::string::npos) << v[1];
}

TEST(Flips, ClassesAndSpans) {
  CompareOptions o;
  EXPECT_EQ(FlipClass(0.9, o), "confident");
  EXPECT_EQ(FlipClass(0.89, o), "moderate");
  EXPECT_EQ(FlipClass(0.5, o), "moderate");
  EXPECT_EQ(FlipClass(0.49, o), "uncertain");
  o.confident = 0.4;  // confident wins when the thresholds overlap
  EXPECT_EQ(FlipClass(0.45, o), "confident");

  nlohmann::json m = {
      {"workload",
       {{"spans",
         {{{"kind", "message"}, {"begin", 0}, {"end", 100}, {"index", 2}, {"label", "message #2 assistant"}},
          {{"kind", "tool_call"}, {"begin", 10}, {"end", 40}, {"index", 3}, {"label", "tool call #3"}},
          {{"kind", "literal"}, {"begin", 20}, {"end", 22}, {"index", 1}, {"subkind", "port"}, {"label", "5432"}},
          {{"kind", "message"}, {"begin", 20}, {"end", 22}, {"index", 9}},
          {{"kind", "tool_result"}, {"begin", 60}, {"end", 70}, {"index", 4}}}}}}};
  // The spans as the capture reader parses them (CaptureManifest).
  auto ManifestSpans = [](const nlohmann::json& j) { return CaptureManifest::FromJson(j).workload.spans; };
  auto spans = ManifestSpans(m);
  ASSERT_EQ(spans.size(), 5u);
  EXPECT_EQ(SpanAt(spans, 5).first, "message #2 assistant");
  EXPECT_EQ(SpanAt(spans, 10), std::make_pair(std::string("tool call #3"), std::string("tool_call")));
  EXPECT_EQ(SpanAt(spans, 21).first, "literal port 5432");  // innermost; on equal length literals win
  EXPECT_EQ(SpanAt(spans, 22).first, "tool call #3");
  EXPECT_EQ(SpanAt(spans, 65), std::make_pair(std::string("tool_result #4"), std::string("tool_result")));  // no label
  EXPECT_EQ(SpanAt(spans, 100).first, "");
  // A missing or malformed spans key is tolerated: no spans.
  EXPECT_TRUE(ManifestSpans(nlohmann::json::object()).empty());
  EXPECT_TRUE(ManifestSpans({{"workload", {{"path", "x"}}}}).empty());
  EXPECT_TRUE(
      ManifestSpans({{"workload", {{"spans", {{{"kind", "message"}, {"begin", 0}, {"end", 9}, {"index", "x"}}}}}}})
          .empty());
  EXPECT_TRUE(ManifestSpans({{"workload", {{"spans", 7}}}}).empty());
}

// The vector exp / log (both forms, at every width) against libm, in ulps, over the ranges the
// kernels feed them. The table log (the AVX-512 kernels') is held to 2 ulp of its own value even
// next to m = 1, and the atanh log to 2 ulp or an absolute 2^-53 there (the kernels need only
// that). Each width is checked as this file compiles it and, where the CPU runs them, as rows.cpp
// compiles it for AVX2 and AVX-512 (FMA contracted), since contraction changes the rounding.
#include "compare/simd.h"

// exp (Taylor, table) of x and log (atanh, table) of m, W lanes each, into out[0 .. 4W).
template <int W>
FS_INLINE void EvalForms(const double* x, const double* m, double* out) {
  using L = simd::Lanes<W>;
  const auto xv = simd::LoadD<L>(x), mv = simd::LoadD<L>(m);
  simd::StoreD<L>(out, simd::ExpTaylor<L>(xv));
  simd::StoreD<L>(out + W, simd::ExpTable<L>(xv));
  simd::StoreD<L>(out + 2 * W, simd::LogAtanh<L>(mv));
  simd::StoreD<L>(out + 3 * W, simd::LogTable<L>(mv));
}
using EvalFn = void (*)(const double*, const double*, double*);
template <int W>
void EvalPlain(const double* x, const double* m, double* out) {
  EvalForms<W>(x, m, out);
}
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target("arch=x86-64-v3"))) void EvalAvx2(const double* x, const double* m, double* out) {
  EvalForms<4>(x, m, out);
}
__attribute__((target("arch=x86-64-v4"))) void EvalAvx512(const double* x, const double* m, double* out) {
  EvalForms<8>(x, m, out);
}
#endif

void CheckExpLog(EvalFn eval, int W, const std::string& name) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> ux(-707.9, 0.0), um(-300, 0);
  auto ulp = [](double v) { return std::nextafter(std::fabs(v), INFINITY) - std::fabs(v); };
  double worst_exp[2] = {0, 0}, worst_log[2] = {0, 0};
  std::vector<double> x(W), m(W), out(4 * W);
  for (int i = 0; i < 50000; ++i) {
    for (int k = 0; k < W; ++k) {
      x[k] = i < 1000 ? -double(i * W + k) * 1e-4 : ux(rng);  // dense near 0, then the whole range
      // Dense just below 1 (down to 1 - 2^-52), then the whole range.
      m[k] = i < 1000 ? 1.0 - std::ldexp(double(i * W + k + 1), -52 + (i % 40)) : std::pow(10.0, um(rng));
    }
    eval(x.data(), m.data(), out.data());
    for (int k = 0; k < W; ++k) {
      const double ew = std::exp(x[k]), lw = std::log(m[k]);
      for (int f = 0; f < 2; ++f) worst_exp[f] = std::max(worst_exp[f], std::fabs(out[f * W + k] - ew) / ulp(ew));
      worst_log[0] = std::max(worst_log[0], std::fabs(out[2 * W + k] - lw) / (ulp(lw) + 0x1p-53));
      worst_log[1] = std::max(worst_log[1], std::fabs(out[3 * W + k] - lw) / ulp(lw));
    }
  }
  for (int f = 0; f < 2; ++f) {
    EXPECT_LE(worst_exp[f], 2.0) << name << (f ? " exp table" : " exp taylor");
    EXPECT_LE(worst_log[f], 2.0) << name << (f ? " log table" : " log atanh");
  }
  // Edges: exp flushes below exp(-708) to 0; exp(0) and log(1) are exact.
  for (double edge : {-708.5, -1e300, -double(INFINITY), 0.0}) {
    std::fill(x.begin(), x.end(), edge);
    std::fill(m.begin(), m.end(), 1.0);
    eval(x.data(), m.data(), out.data());
    for (int f = 0; f < 2; ++f) EXPECT_EQ(out[f * W], edge == 0.0 ? 1.0 : 0.0) << name << " exp(" << edge << ")";
    for (int f = 2; f < 4; ++f) EXPECT_EQ(out[f * W], 0.0) << name << " log(1), form " << f - 2;
  }
}

TEST(Simd, ExpAndLogWithinTwoUlpsOfLibm) {
  CheckExpLog(EvalPlain<2>, 2, "width 2");
  CheckExpLog(EvalPlain<4>, 4, "width 4");
  CheckExpLog(EvalPlain<8>, 8, "width 8");
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v3")) CheckExpLog(EvalAvx2, 4, "AVX2 width 4");
  if (__builtin_cpu_supports("x86-64-v4")) CheckExpLog(EvalAvx512, 8, "AVX-512 width 8");
#endif
}
