// compare (private): FP64 vector arithmetic for the row kernels — GCC vector types of W doubles
// (W = the instruction set's native width: 8 for AVX-512, 4 for AVX2, 2 for SSE2/NEON; wider
// generic vectors spill to the stack and run ~10x slower), and exp / log within ~2 ulp of libm
// over the ranges the kernels use. Included only by rows.cpp, which instantiates the kernels once
// per instruction set with -ffp-contract=fast, so a*b+c becomes one FMA where the CPU has it.
#pragma once

#include <cstdint>
#include <cstring>

// Vectors returned by always-inline helpers never cross an ABI boundary.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace flipscope::compare::simd {

#define FS_INLINE inline __attribute__((always_inline))

// The vector types of one width.
template <int W>
struct Lanes {
  static constexpr int kW = W;
  typedef double V __attribute__((vector_size(8 * W)));
  typedef int64_t VI __attribute__((vector_size(8 * W)));
  typedef float VF __attribute__((vector_size(4 * W)));    // W floats, widened to a V
  typedef float VF2 __attribute__((vector_size(8 * W)));   // 2W floats: one register of floats
  typedef int32_t VI2 __attribute__((vector_size(8 * W)));
};

template <typename V>
FS_INLINE V Splat(double x) {
  return V{} + x;
}

// Loads n <= W floats as doubles; missing lanes hold pad.
template <typename L>
FS_INLINE typename L::V LoadF(const float* p, int n, float pad) {
  typename L::VF f;
  if (n == L::kW) {
    std::memcpy(&f, p, sizeof(f));
  } else {
    for (int i = 0; i < L::kW; ++i) f[i] = i < n ? p[i] : pad;
  }
  return __builtin_convertvector(f, typename L::V);
}
// Loads n <= W doubles; missing lanes hold 0.
template <typename L>
FS_INLINE typename L::V LoadD(const double* p, int n) {
  typename L::V d = Splat<typename L::V>(0);
  if (n == L::kW) {
    std::memcpy(&d, p, sizeof(d));
  } else {
    for (int i = 0; i < n; ++i) d[i] = p[i];
  }
  return d;
}
// Stores the first n <= W lanes.
template <typename L>
FS_INLINE void StoreD(double* p, typename L::V v, int n) {
  if (n == L::kW) {
    std::memcpy(p, &v, sizeof(v));
  } else {
    for (int i = 0; i < n; ++i) p[i] = v[i];
  }
}

// Lane sum in a fixed order (so results never depend on how rows were split among threads).
template <typename V>
FS_INLINE double Sum(V v) {
  double s = 0;
  for (int i = 0; i < int(sizeof(V) / sizeof(double)); ++i) s += v[i];
  return s;
}
// mask ? a : 0 for masks from vector comparisons.
template <typename V, typename VI>
FS_INLINE V Where(VI mask, V a) {
  return mask ? a : Splat<V>(0);
}

// exp(x) for x <= 0 (-inf included). Results below exp(-708) are flushed to 0: they are under
// 1e-307 and change no sum a probability takes part in.
template <typename L>
FS_INLINE typename L::V ExpNonPositive(typename L::V x) {
  using V = typename L::V;
  using VI = typename L::VI;
  const VI under = x < Splat<V>(-708.0);
  x = under ? Splat<V>(-708.0) : x;
  // x = n ln2 + r, |r| <= ln2/2; n by the 1.5*2^52 rounding trick (exact for |n| < 2^51).
  const V shifter = Splat<V>(0x1.8p52);
  const V t = x * Splat<V>(0x1.71547652b82fep0) + shifter;
  const V n = t - shifter;
  V r = x - n * Splat<V>(0x1.62e42fee00000p-1);  // ln2 high part: n * hi is exact
  r = r - n * Splat<V>(0x1.a39ef35793c76p-33);   // ln2 low part
  // Taylor series to r^13: truncation error < 5e-18 relative for |r| <= 0.347.
  V p = Splat<V>(1.0 / 6227020800.0);
  p = p * r + Splat<V>(1.0 / 479001600.0);
  p = p * r + Splat<V>(1.0 / 39916800.0);
  p = p * r + Splat<V>(1.0 / 3628800.0);
  p = p * r + Splat<V>(1.0 / 362880.0);
  p = p * r + Splat<V>(1.0 / 40320.0);
  p = p * r + Splat<V>(1.0 / 5040.0);
  p = p * r + Splat<V>(1.0 / 720.0);
  p = p * r + Splat<V>(1.0 / 120.0);
  p = p * r + Splat<V>(1.0 / 24.0);
  p = p * r + Splat<V>(1.0 / 6.0);
  p = p * r + Splat<V>(0.5);
  p = p * r + Splat<V>(1.0);
  p = p * r + Splat<V>(1.0);
  // 2^n from t's low mantissa bits: bits(t) = bits(1.5*2^52) + n.
  const VI scale_bits = ((VI)t - (VI{} + 0x4338000000000000LL) + (VI{} + 1023)) << 52;
  const V res = p * (V)scale_bits;
  return under ? Splat<V>(0) : res;
}

// log(m) for normal m > 0 (callers mask m < 1e-300). log m = e ln2 + log f, f in [sqrt(1/2),
// sqrt(2)), log f = 2 atanh(s), s = (f-1)/(f+1), |s| <= 0.1716: series to s^21 (< 1e-18).
template <typename L>
FS_INLINE typename L::V LogPositive(typename L::V m) {
  using V = typename L::V;
  using VI = typename L::VI;
  const VI bits = (VI)m;
  const VI mant = (bits & (VI{} + 0x000fffffffffffffLL)) | (VI{} + 0x3ff0000000000000LL);
  V f = (V)mant;
  const VI big = f > Splat<V>(1.4142135623730951);
  f = big ? f * Splat<V>(0.5) : f;
  // The biased exponent as a double via the 2^52 trick; a logical shift (m > 0, so equal to the
  // arithmetic one) because AVX2 has no 64-bit arithmetic shift.
  typedef uint64_t VU __attribute__((vector_size(sizeof(V))));
  const VI exponent = (VI)((VU)bits >> 52);
  const V ebiased = (V)(exponent | (VI{} + 0x4330000000000000LL)) - Splat<V>(0x1p52);
  const V e = ebiased - Splat<V>(1023.0) + (big ? Splat<V>(1.0) : Splat<V>(0.0));
  const V s = (f - Splat<V>(1.0)) / (f + Splat<V>(1.0));
  const V s2 = s * s;
  V q = Splat<V>(1.0 / 21.0);
  q = q * s2 + Splat<V>(1.0 / 19.0);
  q = q * s2 + Splat<V>(1.0 / 17.0);
  q = q * s2 + Splat<V>(1.0 / 15.0);
  q = q * s2 + Splat<V>(1.0 / 13.0);
  q = q * s2 + Splat<V>(1.0 / 11.0);
  q = q * s2 + Splat<V>(1.0 / 9.0);
  q = q * s2 + Splat<V>(1.0 / 7.0);
  q = q * s2 + Splat<V>(1.0 / 5.0);
  q = q * s2 + Splat<V>(1.0 / 3.0);
  q = q * s2 + Splat<V>(1.0);
  const V logf = Splat<V>(2.0) * s * q;
  return e * Splat<V>(0x1.62e42fee00000p-1) + (logf + e * Splat<V>(0x1.a39ef35793c76p-33));
}

}  // namespace flipscope::compare::simd
