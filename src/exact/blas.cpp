// OpenBLAS, loaded at run time. OpenBLAS picks its kernels when the library initializes, from the
// CPU model it knows; on a CPU newer than its table (e.g. this Xeon, family 6 model 207, with
// Debian 12's 0.3.21) it falls back to its SSE3 "Prescott" kernels, 5x slower. Loading it here,
// after choosing the kernel family from the CPU's features, keeps the exact engine fast on any x86
// machine; OPENBLAS_CORETYPE, when set, is left as it is. The core in use goes into the manifest.
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "exact/internal.h"

#ifndef FLIPSCOPE_OPENBLAS_PATH
#define FLIPSCOPE_OPENBLAS_PATH "libopenblas.so.0"
#endif

namespace flipscope::exact {
namespace {

// cblas_dgemm's signature with its enums as ints (CblasRowMajor = 101, CblasNoTrans = 111,
// CblasTrans = 112), so that no OpenBLAS header is needed at run time.
using DgemmFn = void (*)(int, int, int, int, int, int, double, const double*, int, const double*, int, double, double*,
                         int);

struct Blas {
  DgemmFn dgemm = nullptr;
  void (*set_threads)(int) = nullptr;
  char* (*config)() = nullptr;
  char* (*corename)() = nullptr;
  std::string core_choice;  // how the core type was chosen
  Status status;
};

Blas& Loaded() {
  static Blas b;
  static std::once_flag once;
  std::call_once(once, [] {
    if (const char* env = std::getenv("OPENBLAS_CORETYPE")) {
      b.core_choice = std::string("OPENBLAS_CORETYPE=") + env + " (set by the user)";
    } else if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
      setenv("OPENBLAS_CORETYPE", "SkylakeX", 0);
      b.core_choice = "SkylakeX (from the CPU's AVX-512 features)";
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      setenv("OPENBLAS_CORETYPE", "Haswell", 0);
      b.core_choice = "Haswell (from the CPU's AVX2 + FMA features)";
    } else {
      b.core_choice = "OpenBLAS's own detection";
    }
    void* h = dlopen(FLIPSCOPE_OPENBLAS_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      b.status = Status::Error(std::string("cannot load OpenBLAS (") + FLIPSCOPE_OPENBLAS_PATH + "): " + dlerror());
      return;
    }
    b.dgemm = reinterpret_cast<DgemmFn>(dlsym(h, "cblas_dgemm"));
    b.set_threads = reinterpret_cast<void (*)(int)>(dlsym(h, "openblas_set_num_threads"));
    b.config = reinterpret_cast<char* (*)()>(dlsym(h, "openblas_get_config"));
    b.corename = reinterpret_cast<char* (*)()>(dlsym(h, "openblas_get_corename"));
    if (!b.dgemm || !b.set_threads || !b.config || !b.corename)
      b.status = Status::Error(std::string(FLIPSCOPE_OPENBLAS_PATH) + ": not an OpenBLAS library (missing symbols)");
  });
  return b;
}

}  // namespace

Result<nlohmann::json> InitBlas(int threads) {
  Blas& b = Loaded();
  if (!b.status.ok()) return b.status;
  b.set_threads(threads);
  return nlohmann::json{{"name", "OpenBLAS"},   {"library", FLIPSCOPE_OPENBLAS_PATH}, {"config", b.config()},
                        {"core", b.corename()}, {"core_choice", b.core_choice},       {"threads", threads}};
}

void SetBlasThreads(int threads) { Loaded().set_threads(threads); }

void Gemm(bool trans_b, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb,
          double* c, int64_t ldc) {
  Loaded().dgemm(101, 111, trans_b ? 112 : 111, int(m), int(n), int(k), 1.0, a, int(lda), b, int(ldb), 0.0, c,
                 int(ldc));
}

}  // namespace flipscope::exact
