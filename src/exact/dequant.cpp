// Dequantization: ggml's own to_float, checked element by element against an FP64 decode of the
// block formats written from their definitions. Every block value is d*q (+ m) with fp16 scales
// (multiples of 2^-24 below 2^16) and small integer quants, so the FP64 decode is the format's
// real value exactly (at most ~51 significant bits); where ggml's float equals it, float is exact.
#include <fmt/format.h>

#include <atomic>
#include <cmath>
#include <cstring>

#include "exact/internal.h"

namespace flipscope::exact {
namespace {

// IEEE half -> double, from the bit layout (1 sign, 5 exponent, 10 mantissa bits).
double Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  const int sign = h >> 15, e = (h >> 10) & 31, f = h & 1023;
  double v = e == 0    ? std::ldexp(double(f), -24)
             : e == 31 ? (f ? NAN : INFINITY)
                       : std::ldexp(double(1024 + f), e - 25);
  return sign ? -v : v;
}

// The shared shape of the 32-element legacy formats: scale, optional min, 4 low bits, optional 5th.
struct Legacy {
  size_t bytes;
  bool has_min, has_high;
  int offset;  // subtracted from the quant when there is no min (8 for q4_0, 16 for q5_0)
};

void DecodeLegacy(const Legacy& f, const uint8_t* b, int64_t n, double* out) {
  for (int64_t blk = 0; blk < n / 32; ++blk, b += f.bytes, out += 32) {
    const double d = Half(b), m = f.has_min ? Half(b + 2) : 0;
    const uint8_t* p = b + (f.has_min ? 4 : 2);
    uint32_t qh = 0;
    if (f.has_high) std::memcpy(&qh, p, 4), p += 4;
    for (int j = 0; j < 16; ++j) {
      int lo = (p[j] & 15) | (f.has_high ? ((qh >> j) & 1) << 4 : 0);
      int hi = (p[j] >> 4) | (f.has_high ? ((qh >> (j + 16)) & 1) << 4 : 0);
      out[j] = f.has_min ? d * lo + m : d * (lo - f.offset);
      out[j + 16] = f.has_min ? d * hi + m : d * (hi - f.offset);
    }
  }
}

void DecodeQ8_0(const uint8_t* b, int64_t n, double* out) {
  for (int64_t blk = 0; blk < n / 32; ++blk, b += 34, out += 32) {
    const double d = Half(b);
    for (int j = 0; j < 32; ++j) out[j] = d * double(int8_t(b[2 + j]));
  }
}

// q4_K: 256 values as 8 sub-blocks of 32, each with a 6-bit scale and min packed in 12 bytes.
void DecodeQ4_K(const uint8_t* b, int64_t n, double* out) {
  for (int64_t blk = 0; blk < n / 256; ++blk, b += 144, out += 256) {
    const double d = Half(b), dmin = Half(b + 2);
    const uint8_t* s = b + 4;
    const uint8_t* q = b + 16;
    for (int j = 0; j < 8; ++j) {
      int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
      int mn = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
      const uint8_t* qq = q + 32 * (j / 2);
      for (int l = 0; l < 32; ++l) {
        int v = j % 2 == 0 ? qq[l] & 15 : qq[l] >> 4;
        out[32 * j + l] = d * sc * v - dmin * mn;
      }
    }
  }
}

// q6_K: 256 values, 4 low bits in ql, 2 high bits in qh, 16 signed 8-bit scales, value q - 32.
void DecodeQ6_K(const uint8_t* b, int64_t n, double* out) {
  for (int64_t blk = 0; blk < n / 256; ++blk, b += 210, out += 256) {
    const double d = Half(b + 208);
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = b + 64 * half;
      const uint8_t* qh = b + 128 + 32 * half;
      double* y = out + 128 * half;
      for (int l = 0; l < 32; ++l) {
        const int quarter_q[4] = {(ql[l] & 15) | ((qh[l] & 3) << 4), (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4),
                                  (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4),
                                  (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)};
        for (int k = 0; k < 4; ++k) y[l + 32 * k] = d * sc[8 * half + l / 16 + 2 * k] * (quarter_q[k] - 32);
      }
    }
  }
}

}  // namespace

bool DecodeF64(ggml_type type, const void* data, int64_t n, double* out) {
  const auto* b = static_cast<const uint8_t*>(data);
  switch (type) {
    case GGML_TYPE_F32:
      for (int64_t i = 0; i < n; ++i) {
        float f;
        std::memcpy(&f, b + 4 * i, 4);
        out[i] = f;
      }
      return true;
    case GGML_TYPE_F16:
      for (int64_t i = 0; i < n; ++i) out[i] = Half(b + 2 * i);
      return true;
    case GGML_TYPE_BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint32_t bits = uint32_t(b[2 * i] | (b[2 * i + 1] << 8)) << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        out[i] = f;
      }
      return true;
    case GGML_TYPE_Q4_0:
      DecodeLegacy({18, false, false, 8}, b, n, out);
      return true;
    case GGML_TYPE_Q4_1:
      DecodeLegacy({20, true, false, 0}, b, n, out);
      return true;
    case GGML_TYPE_Q5_0:
      DecodeLegacy({22, false, true, 16}, b, n, out);
      return true;
    case GGML_TYPE_Q5_1:
      DecodeLegacy({24, true, true, 0}, b, n, out);
      return true;
    case GGML_TYPE_Q8_0:
      DecodeQ8_0(b, n, out);
      return true;
    case GGML_TYPE_Q4_K:
      DecodeQ4_K(b, n, out);
      return true;
    case GGML_TYPE_Q6_K:
      DecodeQ6_K(b, n, out);
      return true;
    default:
      return false;
  }
}

Status DequantizeChecked(ggml_type type, const void* data, int64_t n, std::vector<float>& out, DequantTallies& tally,
                         int threads) {
  const ggml_type_traits* tr = ggml_get_type_traits(type);
  if (type != GGML_TYPE_F32 && !tr->to_float)
    return Status::Error(fmt::format("ggml has no float conversion for type {}", tr->type_name));
  out.resize(size_t(n));
  DequantTally& t = tally[tr->type_name];
  t.elements += n;
  // Chunks of whole blocks, so that each thread's FP64 buffer stays small.
  const int64_t chunk = 1 << 20, n_chunks = (n + chunk - 1) / chunk;
  std::atomic<int64_t> inexact{0};
  std::atomic<bool> checked{true};
  ParallelRows(threads, n_chunks, chunk, [&](int64_t c0, int64_t c1) {
    std::vector<double> ref;
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t i0 = c * chunk, len = std::min(chunk, n - i0);
      const auto* src = static_cast<const uint8_t*>(data) + size_t(i0 / tr->blck_size) * tr->type_size;
      if (type == GGML_TYPE_F32)
        std::memcpy(out.data() + i0, src, size_t(len) * 4);  // F32 has no conversion
      else
        tr->to_float(src, out.data() + i0, len);
      ref.resize(size_t(len));
      if (!DecodeF64(type, src, len, ref.data())) {
        checked = false;
        continue;
      }
      int64_t differ = 0;
      for (int64_t i = 0; i < len; ++i) differ += double(out[size_t(i0 + i)]) != ref[size_t(i)];
      inexact += differ;
    }
  });
  t.checked = checked && n > 0;
  t.inexact += inexact;
  return Status::Ok();
}

Matrix Widen(const Weight& w, int threads) {
  Matrix m{w.rows, w.cols, std::vector<double>(size_t(w.rows * w.cols))};
  const ggml_type_traits* tr = ggml_get_type_traits(w.type);
  const size_t row_bytes = ggml_row_size(w.type, w.cols);
  ParallelRows(threads, w.rows, w.cols, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(size_t(w.cols));
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* src = w.data + size_t(r) * row_bytes;
      if (w.type == GGML_TYPE_F32)
        std::memcpy(row.data(), src, row_bytes);
      else
        tr->to_float(src, row.data(), w.cols);  // LoadModel refused types without one
      std::copy(row.begin(), row.end(), m.w.begin() + r * w.cols);
    }
  });
  return m;
}

Weight Rows(const Weight& w, int64_t r0, int64_t n) {
  return Weight{w.type, w.data + size_t(r0) * ggml_row_size(w.type, w.cols), n, w.cols};
}

WideLayer Widen(const Layer& L, int threads) {
  auto w = [&](const Weight& x) { return x.data ? Widen(x, threads) : Matrix{}; };
  return {w(L.wq),     w(L.wk),      w(L.wv),    w(L.wo),       w(L.gate),      w(L.up),     w(L.down),
          w(L.router), w(L.ssm_qkv), w(L.ssm_z), w(L.ssm_beta), w(L.ssm_alpha), w(L.ssm_out)};
}

}  // namespace flipscope::exact
