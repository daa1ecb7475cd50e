// Causal (and sliding-window) attention in FP64, one block of queries at a time so that the score
// matrix is block x (keys the block can see) rather than n x n.
#include <cblas.h>

#include <algorithm>
#include <vector>

#include "exact/internal.h"

namespace flipscope::exact {
namespace {

// Softmax of each row of the scores in place over the keys query p sees, [lo(p), p]; the other
// entries become 0. Row i is query b0 + i; column j is key k0 + j.
void MaskedSoftmax(double* s, int64_t rows, int64_t cols, int64_t b0, int64_t k0, int64_t window, double scale) {
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t p = b0 + i;
    const int64_t lo = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
    double* row = s + i * cols;
    const int64_t j0 = lo - k0, j1 = p - k0 + 1;  // visible columns [j0, j1)
    double mx = -INFINITY;
    for (int64_t j = j0; j < j1; ++j) mx = std::max(mx, row[j] * scale);
    for (int64_t j = j0; j < j1; ++j) row[j] = row[j] * scale - mx;
    ExpNonPositive(row + j0, j1 - j0);
    double sum = 0;
    for (int64_t j = j0; j < j1; ++j) sum += row[j];
    const double inv = 1.0 / sum;
    std::fill(row, row + j0, 0.0);
    for (int64_t j = j0; j < j1; ++j) row[j] *= inv;
    std::fill(row + j1, row + cols, 0.0);
  }
}

}  // namespace

void Attention(const AttentionShape& s, const double* q, const double* k, const double* v, double* out) {
  const int64_t ldq = s.n_head * s.head_k, ldk = s.n_head_kv * s.head_k, ldv = s.n_head_kv * s.head_v;
  const int64_t ldo = s.n_head * s.head_v, group = s.n_head / s.n_head_kv;
  std::vector<double> scores;
  for (int64_t b0 = 0; b0 < s.n; b0 += s.block) {
    const int64_t rows = std::min(s.block, s.n - b0);
    // Keys any query of the block sees: from the first one's window start to the last query.
    const int64_t k0 = s.window > 0 ? std::max<int64_t>(0, b0 - s.window + 1) : 0;
    const int64_t cols = b0 + rows - k0;
    scores.resize(size_t(rows * cols));
    for (int64_t h = 0; h < s.n_head; ++h) {
      const int64_t g = h / group;
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(rows), int(cols), int(s.head_k), 1.0,
                  q + b0 * ldq + h * s.head_k, int(ldq), k + k0 * ldk + g * s.head_k, int(ldk), 0.0, scores.data(),
                  int(cols));
      MaskedSoftmax(scores.data(), rows, cols, b0, k0, s.window, s.kq_scale);
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(rows), int(s.head_v), int(cols), 1.0, scores.data(),
                  int(cols), v + k0 * ldv + g * s.head_v, int(ldv), 0.0, out + b0 * ldo + h * s.head_v, int(ldo));
    }
  }
}

}  // namespace flipscope::exact
