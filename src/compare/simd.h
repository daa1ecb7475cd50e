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
  typedef float VF __attribute__((vector_size(4 * W)));   // W floats, widened to a V
  typedef float VF2 __attribute__((vector_size(8 * W)));  // 2W floats: one register of floats
  typedef int32_t VI2 __attribute__((vector_size(8 * W)));
  typedef uint32_t VU2 __attribute__((vector_size(8 * W)));
  typedef uint16_t VH2 __attribute__((vector_size(4 * W)));  // 2W BF16 values as raw bits
};

template <typename V>
FS_INLINE V Splat(double x) {
  return V{} + x;
}

// Loads W floats as doubles.
template <typename L>
FS_INLINE typename L::V LoadF(const float* p) {
  typename L::VF f;
  std::memcpy(&f, p, sizeof(f));
  return __builtin_convertvector(f, typename L::V);
}
// Loads / stores W doubles.
template <typename L>
FS_INLINE typename L::V LoadD(const double* p) {
  typename L::V d;
  std::memcpy(&d, p, sizeof(d));
  return d;
}
template <typename L>
FS_INLINE void StoreD(double* p, typename L::V v) {
  std::memcpy(p, &v, sizeof(v));
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

// table[j] for j in [0, 8): an in-register lookup (one permute on AVX-512, two on AVX2).
template <typename L>
FS_INLINE typename L::V Lookup8(const double (&table)[8], typename L::VI j) {
  using V = typename L::V;
#if !defined(__clang__)  // clang has no __builtin_shuffle with run-time indices (its sanitizer build)
  if constexpr (L::kW == 8) {
    V t;
    std::memcpy(&t, table, sizeof(t));
    return __builtin_shuffle(t, j);
  } else if constexpr (L::kW == 4) {
    V lo, hi;
    std::memcpy(&lo, table, sizeof(lo));
    std::memcpy(&hi, table + 4, sizeof(hi));
    return __builtin_shuffle(lo, hi, j);
  }
#endif
  V r;
  for (int i = 0; i < L::kW; ++i) r[i] = table[j[i] & 7];
  return r;
}

// exp(x) for x <= 0 by range reduction to |r| <= ln2/2 and a degree-13 Taylor series (no table:
// for widths whose table lookups cost more than the polynomial terms they save).
template <typename L>
FS_INLINE typename L::V ExpTaylor(typename L::V x) {
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

// exp(x) for x <= 0 with a table: x = (8n + j) ln2/8 + r, |r| <= ln2/16:
// exp(x) = 2^n 2^(j/8) e^r, e^r by a degree-7 polynomial (the Chebyshev interpolant, computed in
// 60-digit arithmetic; max relative error 5e-18 on the interval with these rounded
// coefficients).
template <typename L>
FS_INLINE typename L::V ExpTable(typename L::V x) {
  using V = typename L::V;
  using VI = typename L::VI;
  typedef uint64_t VU __attribute__((vector_size(sizeof(V))));
  const VI under = x < Splat<V>(-708.0);
  x = under ? Splat<V>(-708.0) : x;
  // k = round(8x / ln2) by the 1.5*2^52 rounding trick: bits(t) = bits(1.5*2^52) + k.
  const V shifter = Splat<V>(0x1.8p52);
  const V t = x * Splat<V>(0x1.71547652b82fep3) + shifter;
  const V k = t - shifter;
  V r = x - k * Splat<V>(0x1.62e42fee00000p-4);  // ln2/8 high part: k * hi is exact
  r = r - k * Splat<V>(0x1.a39ef35793c76p-36);   // ln2/8 low part
  V p = Splat<V>(0x1.a01f8f4ae872bp-13);
  p = p * r + Splat<V>(0x1.6c1d00ce6170dp-10);
  p = p * r + Splat<V>(0x1.1111110a65719p-7);
  p = p * r + Splat<V>(0x1.555555465327bp-5);
  p = p * r + Splat<V>(0x1.55555555555f9p-3);
  p = p * r + Splat<V>(0x1.0000000000171p-1);
  p = p * r + Splat<V>(1.0);
  p = p * r + Splat<V>(1.0);
  // k + 16384 > 0 (k >= -8172), so logical shifts give j = k mod 8 and n = floor(k / 8).
  const VI kb = (VI)t - (VI{} + 0x4338000000000000LL) + (VI{} + 16384);
  const VI j = kb & (VI{} + 7);
  const VI n = (VI)((VU)kb >> 3) - (VI{} + 2048);
  const V scale = (V)((n + (VI{} + 1023)) << 52);
  alignas(64) static constexpr double kExp2Eighths[8] = {
      // 2^(j/8)
      0x1.0000000000000p+0, 0x1.172b83c7d517bp+0, 0x1.306fe0a31b715p+0, 0x1.4bfdad5362a27p+0,
      0x1.6a09e667f3bcdp+0, 0x1.8ace5422aa0dbp+0, 0x1.ae89f995ad3adp+0, 0x1.d5818dcfba487p+0};
  const V res = (p * Lookup8<L>(kExp2Eighths, j)) * scale;
  return under ? Splat<V>(0) : res;
}

// log(m) for normal m > 0 without a table: log m = e ln2 + log f, f in [sqrt(1/2), sqrt(2)),
// log f = 2 atanh(s), s = (f-1)/(f+1), |s| <= 0.1716: series to s^21 (< 1e-18).
template <typename L>
FS_INLINE typename L::V LogAtanh(typename L::V m) {
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

// log(m) for normal m > 0 with a table and no division: m = 2^e f, f in [31/32, 31/16), cut into eight
// pieces with centres c = 1 + j/8 (piece 0, [31/32, 17/16), is centred on exactly 1);
// r = (f - c) * RN(1/c), |r| <= 1/16, where f - c is exact and no FMA can change the product, so
// log m = e ln2 + log c + log1p(r), log1p(r) = r g(r), g the degree-10 Chebyshev interpolant of
// log1p(r)/r (worst relative error 5e-18; constants from log_table_constants.py). Near m = 1
// nothing cancels: log(1) is exactly 0 and log is relatively accurate there on every compiler.
template <typename L>
FS_INLINE typename L::V LogTable(typename L::V m) {
  using V = typename L::V;
  using VI = typename L::VI;
  typedef uint64_t VU __attribute__((vector_size(sizeof(V))));
  alignas(64) static constexpr double kInvC[8] = {// 1/c rounded
                                                  0x1.0000000000000p+0, 0x1.c71c71c71c71cp-1, 0x1.999999999999ap-1,
                                                  0x1.745d1745d1746p-1, 0x1.5555555555555p-1, 0x1.3b13b13b13b14p-1,
                                                  0x1.2492492492492p-1, 0x1.1111111111111p-1};
  alignas(64) static constexpr double kLogCHi[8] = {// log(c), high and low parts
                                                    0.0,
                                                    0x1.e27076e2af2e6p-4,
                                                    0x1.c8ff7c79a9a22p-3,
                                                    0x1.4618bc21c5ec2p-2,
                                                    0x1.9f323ecbf984cp-2,
                                                    0x1.f128f5faf06edp-2,
                                                    0x1.1e85f5e7040d0p-1,
                                                    0x1.41d8fe84672aep-1};
  alignas(64) static constexpr double kLogCLo[8] = {0.0,
                                                    -0x1.61578001e0162p-60,
                                                    -0x1.4f689f8434012p-57,
                                                    0x1.f42decdeccf1dp-56,
                                                    -0x1.a92e513217f5cp-59,
                                                    -0x1.328df13bb38c3p-56,
                                                    0x1.ef62cd2f9f1e3p-56,
                                                    0x1.9192f30bd1806p-55};
  // t = bits(m) - bits(31/32) + (1022 << 52): its top 12 bits are e + 1022 (never negative for a
  // normal m), the next three the piece j, and the remaining 52 bits are f's offset from 31/32.
  constexpr uint64_t kLowOff = 0x000f000000000000ULL;  // bits(31/32) - (1022 << 52)
  const VU t = (VU)m - kLowOff;
  const V f = (V)((t & 0x000fffffffffffffULL) + (0x3fe0000000000000ULL + kLowOff));
  const VI j = (VI)((t >> 49) & 7);
  // e as a double via the 2^52 trick (no int64 -> double instruction on AVX2).
  const V e = (V)((t >> 52) | 0x4330000000000000ULL) - Splat<V>(0x1p52 + 1022.0);
  const V c = (V)((t & 0x000e000000000000ULL) | 0x3ff0000000000000ULL);  // 1 + j/8: j's bits in c's mantissa
  const V r = (f - c) * Lookup8<L>(kInvC, j);
  V g = Splat<V>(0x1.6a7c00cb7b345p-4);
  g = g * r + Splat<V>(-0x1.9ca4ebf3de388p-4);
  g = g * r + Splat<V>(0x1.c732f8d7a1c0bp-4);
  g = g * r + Splat<V>(-0x1.fffd73c5e4e70p-4);
  g = g * r + Splat<V>(0x1.2492411be3b8dp-3);
  g = g * r + Splat<V>(-0x1.555555ce2edc9p-3);
  g = g * r + Splat<V>(0x1.9999999bdc65cp-3);
  g = g * r + Splat<V>(-0x1.ffffffffed772p-3);
  g = g * r + Splat<V>(0x1.5555555555398p-2);
  g = g * r + Splat<V>(-0x1.0000000000003p-1);
  g = g * r + Splat<V>(1.0);
  const V hi = e * Splat<V>(0x1.62e42fee00000p-1) + Lookup8<L>(kLogCHi, j);
  const V lo = e * Splat<V>(0x1.a39ef35793c76p-33) + Lookup8<L>(kLogCLo, j);
  return hi + (r * g + lo);
}

// exp(x) for x <= 0 (-inf included), within 2 ulp of libm. Results below exp(-708) are
// flushed to 0: they are under 1e-307 and change no sum a probability takes part in. The table
// form wins on AVX-512 (one permute per lookup); on narrower vectors the lookups cost more
// (measured with bench/compare_bench kernel).
template <typename L>
FS_INLINE typename L::V ExpNonPositive(typename L::V x) {
  if constexpr (L::kW == 8)
    return ExpTable<L>(x);
  else
    return ExpTaylor<L>(x);
}

// log(m) for normal m > 0 (callers mask m < 1e-300): the table form within 2 ulp of libm
// everywhere, the atanh form within 2 ulp or 2^-53 absolute near m = 1 (callers need absolute
// accuracy); log(1) = 0 exactly in both. As for exp, the table form on AVX-512 only: it also
// saves the division, whose 512-bit form is slow.
template <typename L>
FS_INLINE typename L::V LogPositive(typename L::V m) {
  if constexpr (L::kW == 8)
    return LogTable<L>(m);
  else
    return LogAtanh<L>(m);
}

}  // namespace flipscope::compare::simd
