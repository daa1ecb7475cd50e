// compare (private): FP64 vector arithmetic for the row kernels — GCC vector types of 8 doubles,
// and exp / log that stay within ~2 ulp of libm over the ranges the kernels use. Included only
// by the kernel sources, which are compiled once per instruction set (target_clones) with
// -ffp-contract=fast, so a*b+c becomes one FMA where the CPU has it.
#pragma once

#include <cstdint>
#include <cstring>

// 64-byte vectors returned by always-inline helpers never cross an ABI boundary.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace flipscope::compare::simd {

constexpr int kLanes = 8;
using V = double __attribute__((vector_size(8 * kLanes)));
using VI = int64_t __attribute__((vector_size(8 * kLanes)));
using VF = float __attribute__((vector_size(4 * kLanes)));

#define FS_INLINE inline __attribute__((always_inline))

FS_INLINE V Splat(double x) { return V{} + x; }
FS_INLINE VI SplatI(int64_t x) { return VI{} + x; }

// Loads n <= kLanes floats as doubles; missing lanes hold pad.
FS_INLINE V LoadF(const float* p, int n, float pad) {
  VF f;
  if (n == kLanes) {
    std::memcpy(&f, p, sizeof(f));
  } else {
    for (int i = 0; i < kLanes; ++i) f[i] = i < n ? p[i] : pad;
  }
  return __builtin_convertvector(f, V);
}
// Loads n <= kLanes doubles; missing lanes hold 0.
FS_INLINE V LoadD(const double* p, int n) {
  V d = Splat(0);
  if (n == kLanes) {
    std::memcpy(&d, p, sizeof(d));
  } else {
    for (int i = 0; i < n; ++i) d[i] = p[i];
  }
  return d;
}
// Stores the first n <= kLanes lanes.
FS_INLINE void StoreD(double* p, V v, int n) {
  if (n == kLanes) {
    std::memcpy(p, &v, sizeof(v));
  } else {
    for (int i = 0; i < n; ++i) p[i] = v[i];
  }
}

// Lane sum in a fixed order (so results never depend on how a row was split among threads).
FS_INLINE double Sum(V v) {
  double s = 0;
  for (int i = 0; i < kLanes; ++i) s += v[i];
  return s;
}
// where(mask) ? a : 0 for masks from vector comparisons.
FS_INLINE V Where(VI mask, V a) { return mask ? a : Splat(0); }

// exp(x) for x <= 0 (-inf included). Results below exp(-708) are flushed to 0: they are under
// 1e-307 and change no sum a probability takes part in.
FS_INLINE V ExpNonPositive(V x) {
  const VI under = x < Splat(-708.0);
  x = under ? Splat(-708.0) : x;
  // x = n ln2 + r, |r| <= ln2/2; n by the 1.5*2^52 rounding trick (exact for |n| < 2^51).
  const V shifter = Splat(0x1.8p52);
  const V t = x * Splat(0x1.71547652b82fep0) + shifter;
  const V n = t - shifter;
  V r = x - n * Splat(0x1.62e42fee00000p-1);  // ln2 high part: n * hi is exact
  r = r - n * Splat(0x1.a39ef35793c76p-33);   // ln2 low part
  // Taylor series to r^13: truncation error < 5e-18 relative for |r| <= 0.347.
  V p = Splat(1.0 / 6227020800.0);
  p = p * r + Splat(1.0 / 479001600.0);
  p = p * r + Splat(1.0 / 39916800.0);
  p = p * r + Splat(1.0 / 3628800.0);
  p = p * r + Splat(1.0 / 362880.0);
  p = p * r + Splat(1.0 / 40320.0);
  p = p * r + Splat(1.0 / 5040.0);
  p = p * r + Splat(1.0 / 720.0);
  p = p * r + Splat(1.0 / 120.0);
  p = p * r + Splat(1.0 / 24.0);
  p = p * r + Splat(1.0 / 6.0);
  p = p * r + Splat(0.5);
  p = p * r + Splat(1.0);
  p = p * r + Splat(1.0);
  // 2^n from t's low mantissa bits: bits(t) = bits(1.5*2^52) + n.
  const VI scale_bits = ((VI)t - SplatI(0x4338000000000000LL) + SplatI(1023)) << 52;
  const V res = p * (V)scale_bits;
  return under ? Splat(0) : res;
}

// log(m) for normal m > 0 (callers mask m < 1e-300). log m = e ln2 + log f, f in [sqrt(1/2),
// sqrt(2)), log f = 2 atanh(s), s = (f-1)/(f+1), |s| <= 0.1716: series to s^23 (< 1e-18).
FS_INLINE V LogPositive(V m) {
  const VI bits = (VI)m;
  const VI mant = (bits & SplatI(0x000fffffffffffffLL)) | SplatI(0x3ff0000000000000LL);
  V f = (V)mant;
  const VI big = f > Splat(1.4142135623730951);
  f = big ? f * Splat(0.5) : f;
  // The biased exponent as a double via the 2^52 trick (no int64 -> double instruction on AVX2).
  const V ebiased = (V)((bits >> 52) | SplatI(0x4330000000000000LL)) - Splat(0x1p52);
  const V e = ebiased - Splat(1023.0) + (big ? Splat(1.0) : Splat(0.0));
  const V s = (f - Splat(1.0)) / (f + Splat(1.0));
  const V s2 = s * s;
  V q = Splat(1.0 / 23.0);
  q = q * s2 + Splat(1.0 / 21.0);
  q = q * s2 + Splat(1.0 / 19.0);
  q = q * s2 + Splat(1.0 / 17.0);
  q = q * s2 + Splat(1.0 / 15.0);
  q = q * s2 + Splat(1.0 / 13.0);
  q = q * s2 + Splat(1.0 / 11.0);
  q = q * s2 + Splat(1.0 / 9.0);
  q = q * s2 + Splat(1.0 / 7.0);
  q = q * s2 + Splat(1.0 / 5.0);
  q = q * s2 + Splat(1.0 / 3.0);
  q = q * s2 + Splat(1.0);
  const V logf = Splat(2.0) * s * q;
  return e * Splat(0x1.62e42fee00000p-1) + (logf + e * Splat(0x1.a39ef35793c76p-33));
}

}  // namespace flipscope::compare::simd
