// cuBLAS through dlopen: the prototypes below are cuBLAS's v2 API (cublas_api.h) with its handle
// as an opaque pointer and its enums as ints (CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, success = 0).
#include "exact/cuda_blas.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace flipscope::exact::cuda::blas {
namespace {

using Handle = void*;
struct Api {
  int (*create)(Handle*) = nullptr;
  int (*set_stream)(Handle, void*) = nullptr;
  int (*get_version)(Handle, int*) = nullptr;
  int (*dgemm)(Handle, int, int, int, int, int, const double*, const double*, int, const double*, int, const double*,
               double*, int) = nullptr;
  Handle handle = nullptr;
  std::string file;
};

Api& Loaded() {
  static Api api;
  return api;
}

template <typename F>
bool Find(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  return fn != nullptr;
}

}  // namespace

Result<std::string> Load(void* stream) {
  Api& a = Loaded();
  if (!a.handle) {
    const char* env = std::getenv("FLIPSCOPE_CUBLAS");
    a.file = env && *env ? env : "libcublas.so.13";
    void* lib = dlopen(a.file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      return Status::Error("cannot load cuBLAS (" + a.file + "): " + dlerror() +
                           "; install CUDA 13's cuBLAS or set FLIPSCOPE_CUBLAS to its file");
    if (!Find(lib, "cublasCreate_v2", a.create) || !Find(lib, "cublasSetStream_v2", a.set_stream) ||
        !Find(lib, "cublasGetVersion_v2", a.get_version) || !Find(lib, "cublasDgemm_v2", a.dgemm))
      return Status::Error(a.file + ": not a cuBLAS library (missing symbols)");
    if (int s = a.create(&a.handle); s != 0)
      return Status::Error("cuBLAS: cannot create a handle (status " + std::to_string(s) + ")");
  }
  if (int s = a.set_stream(a.handle, stream); s != 0)
    return Status::Error("cuBLAS: cannot bind the stream (status " + std::to_string(s) + ")");
  int v = 0;
  a.get_version(a.handle, &v);
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100) + " (" +
         a.file + ")";
}

std::string Dgemm(bool trans_a, int m, int n, int k, const double* a, int lda, const double* b, int ldb, double* c,
                  int ldc) {
  const double one = 1.0, zero = 0.0;
  Api& api = Loaded();
  const int s = api.dgemm(api.handle, trans_a ? 1 : 0, 0, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc);
  return s == 0 ? "" : "cublasDgemm: status " + std::to_string(s);
}

}  // namespace flipscope::exact::cuda::blas
