// The exact engine's CUDA operations, callable from plain C++ (no CUDA type appears here): device
// memory, copies, cuBLAS DGEMM and the FP64 kernels the forward pass needs. Every operation is the
// CPU kernel's formula in double (kernels.cpp, attention.cpp, qwen35.cpp, moe.cpp); only the order
// of a sum's terms may differ (tree reductions), which moves results by FP64 rounding alone.
// Operations are queued on one stream and run in order; Sync waits for them and reports the
// first error. Pointers named d_* are device memory.
#pragma once

#include <cstdint>
#include <string>

#include "util/status.h"

namespace flipscope::exact::cuda {

// What the manifest records of the device and its libraries.
struct DeviceInfo {
  int index = 0;
  std::string name;  // e.g. "NVIDIA H200"
  int cc_major = 0, cc_minor = 0;
  double memory_gib = 0;
  std::string driver;   // the CUDA version the driver supports, e.g. "13.0"
  std::string runtime;  // the CUDA runtime linked, e.g. "13.5"
  std::string cublas;   // cuBLAS's version and the library it was loaded from
};

// Selects device `index`, loads cuBLAS (libcublas.so.13, found by the dynamic loader) and creates
// the stream and handle; an error names what is missing (no driver, no such device, no cuBLAS).
Status Open(int index, DeviceInfo* info);
// Waits for every queued operation; the first error, naming the operation, or Ok.
Status Sync();
// Makes the opened device the calling thread's (a thread starts on device 0).
void BindThread();
// Device memory in use now (all processes), in GiB.
double MemoryInUseGiB();
// Bytes a pass may use: the device's free memory plus what this process's buffers hold (a pass
// reuses them).
int64_t AvailableBytes();

// Device memory of n doubles that grows on demand (its contents are not kept when it grows).
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();
  // At least n doubles; an error when the device is out of memory.
  Status Reserve(int64_t n);
  double* get() const { return p_; }

 private:
  double* p_ = nullptr;
  int64_t n_ = 0;
};

// Device memory of n floats (the output matrix, which the logits widen a chunk at a time).
class FloatBuffer {
 public:
  FloatBuffer() = default;
  FloatBuffer(const FloatBuffer&) = delete;
  FloatBuffer& operator=(const FloatBuffer&) = delete;
  ~FloatBuffer();
  Status Reserve(int64_t n);
  float* get() const { return p_; }

 private:
  float* p_ = nullptr;
  int64_t n_ = 0;
};

// Host-to-device and device-to-host copies of n elements (queued, in order with the kernels).
void Upload(double* d_dst, const double* src, int64_t n);
// The same on the copy stream, which runs beside the kernels (the next layer's weights while the
// device computes this one); SyncCopies waits for it and reports its first error.
void UploadBeside(double* d_dst, const double* src, int64_t n);
Status SyncCopies();
void UploadFloats(float* d_dst, const float* src, int64_t n);
void UploadInts(int64_t* d_dst, const int64_t* src, int64_t n);
void Download(double* dst, const double* d_src, int64_t n);
void Copy(double* d_dst, const double* d_src, int64_t n);
// Device memory of n int64 values, freed by FreeInts.
Result<int64_t*> AllocInts(int64_t n);
void FreeInts(int64_t* p);

// c[m][n] = a[m][k] . (trans_b ? b[n][k]^T : b[k][n]), row-major with leading dimensions, as the
// CPU's Gemm (cuBLAS DGEMM, column-major underneath).
void Gemm(bool trans_b, int64_t m, int64_t n, int64_t k, const double* d_a, int64_t lda, const double* d_b, int64_t ldb,
          double* d_c, int64_t ldc);

// ---- element-wise and row kernels (kernels.cpp's formulas) ----

// Rows of width d: row r starts at (r / group) * group_stride + (r % group) * d (contiguous rows:
// group 1, group_stride d). rms: x / sqrt(mean(x^2) + eps) * weight (d_weight null: none);
// otherwise the L2 norm of qwen35's DeltaNet, x / sqrt(sum(x^2) + eps).
void NormRows(double* d_x, int64_t n_rows, int64_t d, int64_t group, int64_t group_stride, const double* d_weight,
              double eps, bool rms);
// Adds bias (width d) to each of n rows.
void AddBias(double* d_x, int64_t n, int64_t d, const double* d_bias);
// y += x over n values.
void AddTo(double* d_y, const double* d_x, int64_t n);
// x *= s over n values.
void Scale(double* d_x, int64_t n, double s);
// g = silu(g) * u (gelu: gelu_tanh(g) * u) over n values.
void GatedActivation(bool gelu, double* d_g, const double* d_u, int64_t n);
// Rotates rows [row0, row0 + n) of x (row stride ld; rows indexed from the chunk's start) by the
// angle table d_cos/d_sin [position][half] (MakeRopeTable's), heads of width head_dim.
void Rope(double* d_x, int64_t row0, int64_t n, int64_t ld, int64_t n_heads, int64_t head_dim, int64_t n_rot, bool neox,
          const double* d_cos, const double* d_sin, int64_t half);
// qwen35: src[len][n_head][2][head] -> q[len][n_head][head] and gate (same shape).
void SplitGate(const double* d_src, int64_t len, int64_t n_head, int64_t head, double* d_q, double* d_gate);
// attn /= 1 + exp(-gate) over n values (sigmoid gating of each head's output).
void SigmoidGate(double* d_attn, const double* d_gate, int64_t n);
// x = cap * tanh(x / cap) over n values.
void Softcap(double* d_x, int64_t n, double cap);
// Widens n floats to doubles.
void Widen(const float* d_src, int64_t n, double* d_dst);
// out[i] = x[rows[i]] for n rows of width d.
void GatherRows(const double* d_x, const int64_t* d_rows, int64_t n, int64_t d, double* d_out);
// out[rows[i]] += w[i] * x[i] for n rows of width d (rows distinct).
void ScatterAddRows(const double* d_x, const int64_t* d_rows, const double* d_w, int64_t n, int64_t d, double* d_out);

// ---- attention (attention.cpp's MaskedSoftmax) ----

// Each of rows score rows (width cols; row i is query b0 + i, column j key k0 + j): scaled (and
// soft-capped), softmax over the visible keys [lo(p), p], zero elsewhere.
void MaskedSoftmax(double* d_s, int64_t rows, int64_t cols, int64_t b0, int64_t k0, int64_t window, double scale,
                   double softcap);

// ---- qwen35's Gated DeltaNet (qwen35.cpp) ----

// beta = sigmoid(beta); g = softplus(g + dt[h]) * a[h], for len x heads values.
void DeltaGates(double* d_beta, double* d_g, const double* d_dt, const double* d_a, int64_t len, int64_t heads);
// conv[t][c] = silu(sum_k win[t + k][c] * w[c][k]) over win = [state (taps - 1 rows) | mixed], then
// state = the last taps - 1 rows of win; d_tmp holds (taps - 1) x C doubles.
void Convolve(const double* d_mixed, int64_t len, int64_t C, int64_t taps, const double* d_w, double* d_state,
              double* d_tmp, double* d_conv);
// The delta rule over a chunk for every value head, continuing the state [Hv][S][S]; conv rows
// [len][C] hold q (Hk heads), k (Hk heads) and v (Hv heads); out[len][Hv * S].
void DeltaScan(const double* d_conv, const double* d_g, const double* d_beta, int64_t len, int64_t C, int64_t Hk,
               int64_t Hv, int64_t S, double* d_state, double* d_out);
// o *= silu(z) over n values.
void SiluGate(double* d_o, const double* d_z, int64_t n);
// Sets n doubles to zero.
void Zero(double* d_x, int64_t n);

}  // namespace flipscope::exact::cuda
