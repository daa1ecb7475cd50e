// The FP64 kernels of the exact engine's CUDA pass (cuda_ops.h), queued on the stream
// cuda_device.cu keeps.
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "exact/cuda_ops.h"
#include "exact/cuda_state.h"

namespace flipscope::exact::cuda {
namespace {

using detail::NoteError;
using detail::Stream;

// Blocks for n items of `per_block` threads, capped (the kernels loop over the rest).
unsigned Blocks(int64_t n, int per_block = 256) {
  const int64_t b = (n + per_block - 1) / per_block;
  return unsigned(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}

#define FS_FOR(i, n) \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

// The sum of v over the block's threads (blockDim.x a multiple of 32, at most 1024), to every thread.
__device__ double BlockSum(double v) {
  __shared__ double part[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // part[] may still be read by a previous call
  if (lane == 0) part[warp] = v;
  __syncthreads();
  double s = lane < warps ? part[lane] : 0.0;
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  return s;
}

__device__ double BlockMax(double v) {
  __shared__ double part[32];
  for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  double s = lane < warps ? part[lane] : -INFINITY;
  for (int o = 16; o > 0; o >>= 1) s = fmax(s, __shfl_xor_sync(0xffffffffu, s, o));
  return s;
}

__device__ double Silu(double x) { return x / (1.0 + exp(-x)); }

__global__ void NormRowsK(double* x, int64_t d, int64_t group, int64_t group_stride, const double* w, double eps,
                          bool rms) {
  double* row = x + (int64_t(blockIdx.x) / group) * group_stride + (int64_t(blockIdx.x) % group) * d;
  double ss = 0;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) ss += row[i] * row[i];
  ss = BlockSum(ss);
  const double s = rms ? 1.0 / sqrt(ss / double(d) + eps) : 1.0 / sqrt(ss + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) row[i] *= w ? s * w[i] : s;
}

__global__ void AddBiasK(double* x, int64_t n, int64_t d, const double* b) { FS_FOR(i, n * d) x[i] += b[i % d]; }
__global__ void AddToK(double* y, const double* x, int64_t n) { FS_FOR(i, n) y[i] += x[i]; }
__global__ void ScaleK(double* x, int64_t n, double s) { FS_FOR(i, n) x[i] *= s; }
__global__ void SoftcapK(double* x, int64_t n, double cap) { FS_FOR(i, n) x[i] = cap * tanh(x[i] / cap); }
__global__ void WidenK(const float* s, int64_t n, double* d) { FS_FOR(i, n) d[i] = double(s[i]); }
__global__ void ZeroK(double* x, int64_t n) { FS_FOR(i, n) x[i] = 0.0; }
__global__ void SiluGateK(double* o, const double* z, int64_t n) { FS_FOR(i, n) o[i] *= Silu(z[i]); }
__global__ void SigmoidGateK(double* a, const double* g, int64_t n) { FS_FOR(i, n) a[i] /= 1.0 + exp(-g[i]); }

__global__ void GatedK(bool gelu, double* g, const double* u, int64_t n) {
  constexpr double kSqrt2OverPi = 0.79788456080286535587989211986876;
  constexpr double kCoefA = 0.044715;
  FS_FOR(i, n) {
    const double x = g[i];
    const double a = gelu ? 0.5 * x * (1.0 + tanh(kSqrt2OverPi * x * (1.0 + kCoefA * x * x))) : x / (1.0 + exp(-x));
    g[i] = a * u[i];
  }
}

// One thread per (row, head, pair).
__global__ void RopeK(double* x, int64_t row0, int64_t n, int64_t ld, int64_t n_heads, int64_t head_dim, bool neox,
                      const double* cs, const double* sn, int64_t half) {
  const int64_t stride = neox ? 1 : 2, partner = neox ? half : 1;
  FS_FOR(e, n * n_heads * half) {
    const int64_t i = e % half, h = (e / half) % n_heads, r = e / (half * n_heads);
    double* v = x + r * ld + h * head_dim;
    const double c = cs[(row0 + r) * half + i], s = sn[(row0 + r) * half + i];
    const double a = v[i * stride], b = v[i * stride + partner];
    v[i * stride] = a * c - b * s;
    v[i * stride + partner] = a * s + b * c;
  }
}

__global__ void SplitGateK(const double* src, int64_t len, int64_t n_head, int64_t head, double* q, double* gate) {
  FS_FOR(e, len * n_head * head) {
    const int64_t i = e % head, h = (e / head) % n_head, r = e / (head * n_head);
    const double* s = src + r * 2 * n_head * head + h * 2 * head;
    q[e] = s[i];
    gate[e] = s[head + i];
  }
}

__global__ void GatherK(const double* x, const int64_t* rows, int64_t n, int64_t d, double* out) {
  FS_FOR(e, n * d) out[e] = x[rows[e / d] * d + e % d];
}

__global__ void ScatterAddK(const double* x, const int64_t* rows, const double* w, int64_t n, int64_t d, double* out) {
  FS_FOR(e, n * d) out[rows[e / d] * d + e % d] += w[e / d] * x[e];
}

// One block per score row; the same steps as MaskedSoftmax in attention.cpp.
__global__ void MaskedSoftmaxK(double* s, int64_t cols, int64_t b0, int64_t k0, int64_t window, double scale,
                               double softcap) {
  const int64_t p = b0 + blockIdx.x;
  const int64_t lo = window > 0 ? (p - window + 1 > 0 ? p - window + 1 : 0) : 0;
  double* row = s + int64_t(blockIdx.x) * cols;
  const int64_t j0 = lo - k0, j1 = p - k0 + 1;
  double sc = scale;
  if (softcap > 0) {
    for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) row[j] = softcap * tanh(row[j] * scale / softcap);
    sc = 1;
  }
  double mx = -INFINITY;
  for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) mx = fmax(mx, row[j] * sc);
  mx = BlockMax(mx);
  double sum = 0;
  for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
    const double e = exp(row[j] * sc - mx);
    row[j] = e;
    sum += e;
  }
  const double inv = 1.0 / BlockSum(sum);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) row[j] = (j >= j0 && j < j1) ? row[j] * inv : 0.0;
}

__global__ void DeltaGatesK(double* beta, double* g, const double* dt, const double* a, int64_t len, int64_t heads) {
  FS_FOR(e, len * heads) {
    const int64_t h = e % heads;
    beta[e] = 1.0 / (1.0 + exp(-beta[e]));
    const double x = g[e] + dt[h];
    g[e] = (x > 0 ? x + log1p(exp(-x)) : log1p(exp(x))) * a[h];
  }
}

__global__ void ConvolveK(const double* mixed, int64_t len, int64_t C, int64_t taps, const double* w,
                          const double* state, double* conv) {
  const int64_t keep = taps - 1;
  FS_FOR(e, len * C) {
    const int64_t c = e % C, t = e / C;
    double s = 0;
    for (int64_t k = 0; k < taps; ++k) {
      const int64_t r = t + k;  // row of [state | mixed]
      s += (r < keep ? state[r * C + c] : mixed[(r - keep) * C + c]) * w[c * taps + k];
    }
    conv[e] = Silu(s);
  }
}

// The new state: the last keep rows of [state | mixed].
__global__ void ConvStateK(const double* mixed, int64_t len, int64_t C, int64_t keep, const double* state,
                           double* next) {
  FS_FOR(e, keep * C) {
    const int64_t c = e % C, r = len + e / C;  // row of [state | mixed]
    next[e] = r < keep ? state[r * C + c] : mixed[(r - keep) * C + c];
  }
}

constexpr int kMaxRowsPerLane = 8;  // S up to 256

// One warp per (value head h, state column j): the column M[:, j] lives in the warp's registers,
// rows i = lane + 32 r. Columns are independent in the delta rule, so no warp waits for another.
__global__ void DeltaScanK(const double* conv, const double* g, const double* beta, int64_t len, int64_t C, int64_t Hk,
                           int64_t Hv, int64_t S, double* state, double* out) {
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= Hv * S) return;
  const int64_t h = warp / S, j = warp % S, K = Hk * S, V = Hv * S;
  const int rows = int((S + 31) / 32);
  double m[kMaxRowsPerLane];
  double* M = state + h * S * S;
  for (int r = 0; r < rows; ++r) {
    const int64_t i = lane + 32 * r;
    m[r] = i < S ? M[i * S + j] : 0.0;
  }
  const double scale = 1.0 / sqrt(double(S));
  for (int64_t t = 0; t < len; ++t) {
    const double* q = conv + t * C + (h % Hk) * S;
    const double* k = q + K;
    const double v = conv[t * C + 2 * K + h * S + j];
    const double decay = exp(g[t * Hv + h]), b = beta[t * Hv + h];
    double read = 0;
    for (int r = 0; r < rows; ++r) {
      const int64_t i = lane + 32 * r;
      if (i < S) {
        m[r] *= decay;
        read += k[i] * m[r];
      }
    }
    for (int o = 16; o > 0; o >>= 1) read += __shfl_xor_sync(0xffffffffu, read, o);
    const double delta = (v - read) * b;
    double o2 = 0;
    for (int r = 0; r < rows; ++r) {
      const int64_t i = lane + 32 * r;
      if (i < S) {
        m[r] += k[i] * delta;
        o2 += q[i] * m[r];
      }
    }
    for (int o = 16; o > 0; o >>= 1) o2 += __shfl_xor_sync(0xffffffffu, o2, o);
    if (lane == 0) out[t * V + h * S + j] = o2 * scale;
  }
  for (int r = 0; r < rows; ++r) {
    const int64_t i = lane + 32 * r;
    if (i < S) M[i * S + j] = m[r];
  }
}

}  // namespace

void NormRows(double* x, int64_t n_rows, int64_t d, int64_t group, int64_t group_stride, const double* w, double eps,
              bool rms) {
  // One block per row; callers' row counts (tokens x heads) stay far below grid.x's 2^31 - 1.
  if (n_rows > 0) NormRowsK<<<unsigned(n_rows), 128, 0, Stream()>>>(x, d, group, group_stride, w, eps, rms);
}
void AddBias(double* x, int64_t n, int64_t d, const double* b) {
  if (n * d > 0) AddBiasK<<<Blocks(n * d), 256, 0, Stream()>>>(x, n, d, b);
}
void AddTo(double* y, const double* x, int64_t n) {
  if (n > 0) AddToK<<<Blocks(n), 256, 0, Stream()>>>(y, x, n);
}
void Scale(double* x, int64_t n, double s) {
  if (n > 0 && s != 1.0) ScaleK<<<Blocks(n), 256, 0, Stream()>>>(x, n, s);
}
void GatedActivation(bool gelu, double* g, const double* u, int64_t n) {
  if (n > 0) GatedK<<<Blocks(n), 256, 0, Stream()>>>(gelu, g, u, n);
}
void Rope(double* x, int64_t row0, int64_t n, int64_t ld, int64_t n_heads, int64_t head_dim, int64_t n_rot, bool neox,
          const double* cs, const double* sn, int64_t half) {
  (void)n_rot;  // half = n_rot / 2
  if (n * n_heads * half > 0)
    RopeK<<<Blocks(n * n_heads * half), 256, 0, Stream()>>>(x, row0, n, ld, n_heads, head_dim, neox, cs, sn, half);
}
void SplitGate(const double* src, int64_t len, int64_t n_head, int64_t head, double* q, double* gate) {
  if (len > 0) SplitGateK<<<Blocks(len * n_head * head), 256, 0, Stream()>>>(src, len, n_head, head, q, gate);
}
void SigmoidGate(double* a, const double* g, int64_t n) {
  if (n > 0) SigmoidGateK<<<Blocks(n), 256, 0, Stream()>>>(a, g, n);
}
void Softcap(double* x, int64_t n, double cap) {
  if (n > 0) SoftcapK<<<Blocks(n), 256, 0, Stream()>>>(x, n, cap);
}
void Widen(const float* s, int64_t n, double* d) {
  if (n > 0) WidenK<<<Blocks(n), 256, 0, Stream()>>>(s, n, d);
}
void GatherRows(const double* x, const int64_t* rows, int64_t n, int64_t d, double* out) {
  if (n > 0) GatherK<<<Blocks(n * d), 256, 0, Stream()>>>(x, rows, n, d, out);
}
void ScatterAddRows(const double* x, const int64_t* rows, const double* w, int64_t n, int64_t d, double* out) {
  if (n > 0) ScatterAddK<<<Blocks(n * d), 256, 0, Stream()>>>(x, rows, w, n, d, out);
}
void MaskedSoftmax(double* s, int64_t rows, int64_t cols, int64_t b0, int64_t k0, int64_t window, double scale,
                   double softcap) {
  if (rows > 0) MaskedSoftmaxK<<<unsigned(rows), 256, 0, Stream()>>>(s, cols, b0, k0, window, scale, softcap);
}
void DeltaGates(double* beta, double* g, const double* dt, const double* a, int64_t len, int64_t heads) {
  if (len > 0) DeltaGatesK<<<Blocks(len * heads), 256, 0, Stream()>>>(beta, g, dt, a, len, heads);
}
void Convolve(const double* mixed, int64_t len, int64_t C, int64_t taps, const double* w, double* state, double* tmp,
              double* conv) {
  if (len <= 0) return;
  ConvolveK<<<Blocks(len * C), 256, 0, Stream()>>>(mixed, len, C, taps, w, state, conv);
  if (taps > 1) {
    ConvStateK<<<Blocks((taps - 1) * C), 256, 0, Stream()>>>(mixed, len, C, taps - 1, state, tmp);
    Copy(state, tmp, (taps - 1) * C);
  }
}
void DeltaScan(const double* conv, const double* g, const double* beta, int64_t len, int64_t C, int64_t Hk, int64_t Hv,
               int64_t S, double* state, double* out) {
  if (len <= 0) return;
  if (S > 32 * kMaxRowsPerLane) {
    NoteError("DeltaNet state width " + std::to_string(S) + " is over the kernel's 256");
    return;
  }
  const int64_t threads = Hv * S * 32;
  DeltaScanK<<<unsigned((threads + 255) / 256), 256, 0, Stream()>>>(conv, g, beta, len, C, Hk, Hv, S, state, out);
}
void SiluGate(double* o, const double* z, int64_t n) {
  if (n > 0) SiluGateK<<<Blocks(n), 256, 0, Stream()>>>(o, z, n);
}
void Zero(double* x, int64_t n) {
  if (n > 0) ZeroK<<<Blocks(n), 256, 0, Stream()>>>(x, n);
}

}  // namespace flipscope::exact::cuda
