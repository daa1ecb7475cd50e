// Causal (and sliding-window, optionally soft-capped) attention in FP64, one block of queries at a time so that the
// score matrix is block x (keys the block can see) rather than n x n.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "exact/internal.h"

namespace flipscope::exact {
namespace {

// Softmax of each row of the scores in place over the keys query p sees, [lo(p), p], each score
// first multiplied by scale (and soft-capped, softcap > 0); the other entries become 0. Row i is
// query b0 + i; column j is key k0 + j.
void MaskedSoftmax(double* s, int64_t rows, int64_t cols, int64_t b0, int64_t k0, int64_t window, double scale,
                   double softcap) {
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t p = b0 + i;
    const int64_t lo = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
    double* row = s + i * cols;
    const int64_t j0 = lo - k0, j1 = p - k0 + 1;  // visible columns [j0, j1)
    double sc = scale;
    if (softcap > 0) {  // gemma2: cap * tanh(s / cap) on the scaled score, as llama.cpp's graph does
      for (int64_t j = j0; j < j1; ++j) row[j] = softcap * std::tanh(row[j] * scale / softcap);
      sc = 1;
    }
    const double mx = ScaledMax(row + j0, j1 - j0, sc);
    for (int64_t j = j0; j < j1; ++j) row[j] = row[j] * sc - mx;
    ExpNonPositive(row + j0, j1 - j0);
    const double inv = 1.0 / LaneSum(row + j0, j1 - j0);
    std::fill(row, row + j0, 0.0);
    for (int64_t j = j0; j < j1; ++j) row[j] *= inv;
    std::fill(row + j1, row + cols, 0.0);
  }
}

}  // namespace

void Attention(const AttentionShape& s, const double* q, const double* k, const double* v, double* out) {
  const int64_t ldq = s.n_head * s.head_k, ldk = s.n_head_kv * s.head_k, ldv = s.n_head_kv * s.head_v;
  const int64_t ldo = s.n_head * s.head_v, group = s.n_head / s.n_head_kv;
  const int64_t n_blocks = (s.n + s.block - 1) / s.block, n_items = n_blocks * s.n_head;
  // Work items (query block, head) are independent and write disjoint outputs; the threads take
  // them in turn, each calling a single-threaded BLAS. Splitting inside each product instead
  // makes the BLAS threads wait for one another at every call, which on a shared machine (a
  // descheduled thread) costs more than the products.
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    std::vector<double> scores;
    for (int64_t item; (item = next.fetch_add(1)) < n_items;) {
      const int64_t b0 = (item / s.n_head) * s.block, h = item % s.n_head, g = h / group;
      const int64_t rows = std::min(s.block, s.n - b0);
      // Keys any query of the block sees: from the first one's window start to the last query.
      const int64_t k0 = s.window > 0 ? std::max<int64_t>(0, b0 - s.window + 1) : 0;
      const int64_t cols = b0 + rows - k0;
      scores.resize(size_t(rows * cols));
      Gemm(true, rows, cols, s.head_k, q + b0 * ldq + h * s.head_k, ldq, k + k0 * ldk + g * s.head_k, ldk,
           scores.data(), cols);
      MaskedSoftmax(scores.data(), rows, cols, b0, k0, s.window, s.kq_scale, s.softcap);
      Gemm(false, rows, s.head_v, cols, scores.data(), cols, v + k0 * ldv + g * s.head_v, ldv,
           out + b0 * ldo + h * s.head_v, ldo);
    }
  };
  SetBlasThreads(1);
  std::vector<std::thread> pool;
  for (int t = 1; t < s.threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  SetBlasThreads(s.threads);
}

}  // namespace flipscope::exact
