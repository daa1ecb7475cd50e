// cuBLAS, loaded at run time: the engine needs five of its functions, and a build needs neither
// its headers nor its 600 MB of libraries (blas.cpp does the same for OpenBLAS on the CPU).
#pragma once

#include <string>

#include "util/status.h"

namespace flipscope::exact::cuda::blas {

// Loads libcublas.so.13 (FLIPSCOPE_CUBLAS, when set, names another file), creates a handle bound
// to `stream` (a cudaStream_t); its version and the file it came from, or an error naming them.
Result<std::string> Load(void* stream);
// Column-major C[m][n] = op(A)[m][k] . B[k][n] with op(A) = A^T when trans_a (cublasDgemm);
// an error message, or "" on success.
std::string Dgemm(bool trans_a, int m, int n, int k, const double* a, int lda, const double* b, int ldb, double* c,
                  int ldc);

}  // namespace flipscope::exact::cuda::blas
