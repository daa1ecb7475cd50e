// The FP64 kernels of the forward pass: matrix products through BLAS, RMS norm, RoPE, the gated
// activations and a vectorized exp. Each is the plain formula in double; only exp is written out
// (a libm call per attention score would dominate the run time).
#include <algorithm>
#include <bit>
#include <cmath>
#include <thread>

#include "exact/internal.h"

namespace flipscope::exact {

void ParallelRows(int threads, int64_t n, int64_t width, const std::function<void(int64_t, int64_t)>& fn) {
  // Below ~64K elements a range is cheaper done here than a thread is to start (tens of µs).
  constexpr int64_t kMinPerThread = 1 << 16;
  const int64_t parts =
      std::min<int64_t>({int64_t(std::max(1, threads)), n, std::max<int64_t>(1, n * width / kMinPerThread)});
  if (parts <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  std::vector<std::thread> pool;
  for (int64_t p = 1; p < parts; ++p) pool.emplace_back(fn, n * p / parts, n * (p + 1) / parts);
  fn(0, n / parts);
  for (auto& t : pool) t.join();
}

void MatMulT(const double* x, int64_t n, const Matrix& w, double* y) {
  Gemm(true, n, w.rows, w.cols, x, w.cols, w.w.data(), w.cols, y, w.rows);
}

void RmsNorm(double* x, int64_t n, int64_t d, std::span<const double> weight, double eps) {
  for (int64_t r = 0; r < n; ++r) {
    double* row = x + r * d;
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += row[i] * row[i];
    const double s = 1.0 / std::sqrt(ss / double(d) + eps);
    for (int64_t i = 0; i < d; ++i) row[i] *= weight.empty() ? s : s * weight[size_t(i)];
  }
}

// exp(x) = 2^k * e^r with k = round(x / ln 2) and |r| <= ln2 / 2, r taken in two parts (Cody and
// Waite) so that it is exact; e^r by its Taylor series to degree 13 (remainder < 5e-18).
// Compiled per ISA so that the loop runs 8 (AVX-512) or 4 (AVX2) lanes wide on any x86 machine.
__attribute__((target_clones("avx512f", "avx2", "default"))) void ExpNonPositive(double* x, int64_t n) {
  constexpr double kLog2e = 1.4426950408889634074;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;  // upper bits of ln 2: k * kLn2Hi is exact
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  constexpr double kShift = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i] < -700.0 ? -700.0 : x[i];
    const double shifted = v * kLog2e + kShift;
    const double k = shifted - kShift;
    const double r = (v - k * kLn2Hi) - k * kLn2Lo;
    double p = 1.0 / 6227020800.0;  // 1/13!
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    // 2^k from its exponent bits; k >= -1010 here, so the result is a normal number.
    const int64_t ki = std::bit_cast<int64_t>(shifted) - std::bit_cast<int64_t>(kShift);
    const double scale = std::bit_cast<double>((ki + 1023) << 52);
    x[i] = x[i] < -700.0 ? 0.0 : p * scale;
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) double ScaledMax(const double* x, int64_t n,
                                                                              double scale) {
  double m[8];
  std::fill(m, m + 8, -INFINITY);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) m[l] = std::max(m[l], x[i + l] * scale);
  for (; i < n; ++i) m[0] = std::max(m[0], x[i] * scale);
  return std::max({m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7]});
}

__attribute__((target_clones("avx512f", "avx2", "default"))) double LaneSum(const double* x, int64_t n) {
  double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) s[l] += x[i + l];
  for (int l = 0; i < n; ++i, ++l) s[l] += x[i];
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

void GatedActivation(bool gelu, double* g, const double* u, int64_t n) {
  // ggml's GELU is the tanh approximation; its constants, in double.
  constexpr double kSqrt2OverPi = 0.79788456080286535587989211986876;
  constexpr double kCoefA = 0.044715;
  for (int64_t i = 0; i < n; ++i) {
    const double x = g[i];
    const double a =
        gelu ? 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * x * (1.0 + kCoefA * x * x))) : x / (1.0 + std::exp(-x));
    g[i] = a * u[i];
  }
}

namespace {
// Whether pair i lies in the 4th section of a multi-section rope (ggml_mrope_cache_init's
// assignment): for text its position is 0, so it does not rotate.
bool InFourthSection(int64_t i, const std::array<int64_t, 4>& s, bool imrope) {
  const int64_t all = s[0] + s[1] + s[2] + s[3];
  if (all <= 0) return false;
  const int64_t sector = i % all;
  if (imrope)
    return !((sector % 3 == 0 && sector < 3 * s[0]) || (sector % 3 == 1 && sector < 3 * s[1]) ||
             (sector % 3 == 2 && sector < 3 * s[2]));
  return sector >= s[0] + s[1] + s[2];
}
}  // namespace

RopeTable MakeRopeTable(int64_t n, int64_t n_rot, double base, double scale, const std::array<int64_t, 4>& sections,
                        bool imrope) {
  RopeTable t;
  t.half = n_rot / 2;
  t.cos.resize(size_t(n * t.half));
  t.sin.resize(size_t(n * t.half));
  std::vector<double> inv_freq(size_t(t.half));
  for (int64_t i = 0; i < t.half; ++i)
    inv_freq[size_t(i)] = InFourthSection(i, sections, imrope) ? 0.0 : std::pow(base, -2.0 * double(i) / double(n_rot));
  for (int64_t p = 0; p < n; ++p)
    for (int64_t i = 0; i < t.half; ++i) {
      const double theta = double(p) * scale * inv_freq[size_t(i)];
      t.cos[size_t(p * t.half + i)] = std::cos(theta);
      t.sin[size_t(p * t.half + i)] = std::sin(theta);
    }
  return t;
}

void ApplyRope(double* x, int64_t row0, int64_t n, int64_t ld, int64_t n_heads, int64_t head_dim, int64_t n_rot,
               bool neox, const RopeTable& t) {
  // Normal mode rotates neighbours (2i, 2i+1); NeoX mode rotates the halves (i, i + n_rot/2).
  const int64_t stride = neox ? 1 : 2, partner = neox ? n_rot / 2 : 1;
  for (int64_t r = 0; r < n; ++r) {
    const double* c = t.cos.data() + (row0 + r) * t.half;
    const double* s = t.sin.data() + (row0 + r) * t.half;
    for (int64_t h = 0; h < n_heads; ++h) {
      double* v = x + r * ld + h * head_dim;
      for (int64_t i = 0; i < t.half; ++i) {
        const double a = v[i * stride], b = v[i * stride + partner];
        v[i * stride] = a * c[i] - b * s[i];
        v[i * stride + partner] = a * s[i] + b * c[i];
      }
    }
  }
}

}  // namespace flipscope::exact
