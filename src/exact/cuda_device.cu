// The device side of the exact engine's CUDA pass (cuda_ops.h): opening the device, its streams,
// memory, copies and DGEMM. cuBLAS is loaded at run time (cuda_blas.cpp), so building needs only
// nvcc and the CUDA runtime.
#include <cuda_runtime.h>

#include <atomic>
#include <string>

#include "exact/cuda_blas.h"
#include "exact/cuda_ops.h"
#include "exact/cuda_state.h"

namespace flipscope::exact::cuda {
namespace {

cudaStream_t g_stream = nullptr;
cudaStream_t g_copies = nullptr;  // uploads beside the kernels
std::string g_copy_error;         // the first failed upload there since the last SyncCopies
int g_device = 0;
std::string g_first_error;       // the first failed operation since the last Sync
std::atomic<int64_t> g_held{0};  // bytes held by Buffer and FloatBuffer

void Note(cudaError_t e, const char* what) {
  if (e != cudaSuccess) detail::NoteError(std::string(what) + ": " + cudaGetErrorString(e));
}

}  // namespace

namespace detail {
cudaStream_t Stream() { return g_stream; }
void NoteError(const std::string& what) {
  if (g_first_error.empty()) g_first_error = what;
}
}  // namespace detail

Status Open(int index, DeviceInfo* info) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess)
    return Status::Error(std::string("no usable CUDA device on this machine (") + cudaGetErrorString(e) + ")");
  if (index < 0 || index >= count)
    return Status::InvalidArgument("no CUDA device " + std::to_string(index) + " (this machine has " +
                                   std::to_string(count) + ")");
  if ((e = cudaSetDevice(index)) != cudaSuccess)
    return Status::Error(std::string("cannot use CUDA device: ") + cudaGetErrorString(e));
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, index);
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); };
  g_device = index;
  info->index = index;
  info->name = p.name;
  info->cc_major = p.major;
  info->cc_minor = p.minor;
  info->memory_gib = double(p.totalGlobalMem) / double(1ull << 30);
  info->driver = version(driver);
  info->runtime = version(runtime);
  for (cudaStream_t* s : {&g_stream, &g_copies})
    if (!*s && (e = cudaStreamCreateWithFlags(s, cudaStreamNonBlocking)) != cudaSuccess)
      return Status::Error(std::string("cannot create a CUDA stream: ") + cudaGetErrorString(e));
  FS_ASSIGN_OR_RETURN(info->cublas, blas::Load(g_stream));
  return Status::Ok();
}

Status Sync() {
  Note(cudaStreamSynchronize(g_stream), "a queued CUDA operation");
  Note(cudaGetLastError(), "a CUDA kernel");
  if (g_first_error.empty()) return Status::Ok();
  Status s = Status::Error("CUDA: " + g_first_error);
  g_first_error.clear();
  return s;
}

void BindThread() { cudaSetDevice(g_device); }

double MemoryInUseGiB() {
  size_t free = 0, total = 0;
  cudaMemGetInfo(&free, &total);
  return double(total - free) / double(1ull << 30);
}

int64_t AvailableBytes() {
  size_t free = 0, total = 0;
  cudaMemGetInfo(&free, &total);
  return int64_t(free) + g_held.load();
}

// Grows p to at least n elements of T, counting the bytes this process's buffers hold.
template <class T>
static Status Grow(T*& p, int64_t& have, int64_t n) {
  if (n <= have) return Status::Ok();
  if (p) cudaFree(p);
  g_held -= have * int64_t(sizeof(T));
  p = nullptr;
  have = 0;
  cudaError_t e = cudaMalloc(&p, size_t(n) * sizeof(T));
  if (e != cudaSuccess)
    return Status::Error("CUDA device memory: cannot allocate " + std::to_string(n * int64_t(sizeof(T)) >> 20) +
                         " MiB (" + cudaGetErrorString(e) + ")");
  have = n;
  g_held += n * int64_t(sizeof(T));
  return Status::Ok();
}

Buffer::~Buffer() {
  if (p_) cudaFree(p_);
  g_held -= n_ * int64_t(sizeof(double));
}

Status Buffer::Reserve(int64_t n) { return Grow(p_, n_, n); }

FloatBuffer::~FloatBuffer() {
  if (p_) cudaFree(p_);
  g_held -= n_ * int64_t(sizeof(float));
}

Status FloatBuffer::Reserve(int64_t n) { return Grow(p_, n_, n); }

Result<int64_t*> AllocInts(int64_t n) {
  int64_t* p = nullptr;
  cudaError_t e = cudaMalloc(&p, size_t(n > 0 ? n : 1) * sizeof(int64_t));
  if (e != cudaSuccess) return Status::Error(std::string("CUDA device memory: ") + cudaGetErrorString(e));
  return p;
}
void FreeInts(int64_t* p) { cudaFree(p); }

void Upload(double* d, const double* s, int64_t n) {
  Note(cudaMemcpyAsync(d, s, size_t(n) * 8, cudaMemcpyHostToDevice, g_stream), "upload");
}
void UploadBeside(double* d, const double* s, int64_t n) {
  const cudaError_t e = cudaMemcpyAsync(d, s, size_t(n) * 8, cudaMemcpyHostToDevice, g_copies);
  if (e != cudaSuccess && g_copy_error.empty()) g_copy_error = std::string("upload: ") + cudaGetErrorString(e);
}
Status SyncCopies() {
  const cudaError_t e = cudaStreamSynchronize(g_copies);
  if (e != cudaSuccess && g_copy_error.empty()) g_copy_error = std::string("upload: ") + cudaGetErrorString(e);
  if (g_copy_error.empty()) return Status::Ok();
  Status s = Status::Error("CUDA: " + g_copy_error);
  g_copy_error.clear();
  return s;
}
void UploadFloats(float* d, const float* s, int64_t n) {
  Note(cudaMemcpyAsync(d, s, size_t(n) * 4, cudaMemcpyHostToDevice, g_stream), "upload");
}
void UploadInts(int64_t* d, const int64_t* s, int64_t n) {
  Note(cudaMemcpyAsync(d, s, size_t(n) * 8, cudaMemcpyHostToDevice, g_stream), "upload");
}
void Download(double* d, const double* s, int64_t n) {
  Note(cudaMemcpyAsync(d, s, size_t(n) * 8, cudaMemcpyDeviceToHost, g_stream), "download");
  Note(cudaStreamSynchronize(g_stream), "download");
}
void Copy(double* d, const double* s, int64_t n) {
  Note(cudaMemcpyAsync(d, s, size_t(n) * 8, cudaMemcpyDeviceToDevice, g_stream), "device copy");
}

void Gemm(bool trans_b, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb,
          double* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  // Row-major C = A op(B) is column-major C^T = op(B)^T A^T: B's memory read as the first operand.
  if (const std::string e = blas::Dgemm(trans_b, int(n), int(m), int(k), b, int(ldb), a, int(lda), c, int(ldc));
      !e.empty())
    detail::NoteError(e);
}

}  // namespace flipscope::exact::cuda
