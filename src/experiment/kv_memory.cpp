// The KV cache llama.cpp allocates for a context: the rule of its llama-context.cpp (the context is
// padded to 256 cells) and llama-kv-cache-iswa.cpp (sliding-window layers keep only their window
// plus one micro-batch, padded to 256, unless --swa-full keeps every cell).
#include <algorithm>

#include "experiment/steps.h"

namespace flipscope {
namespace {

int64_t Pad256(int64_t n) { return (n + 255) / 256 * 256; }

}  // namespace

KvMemory KvCacheMemory(const ModelInfo& m, const Knobs& k, int64_t n_ctx, bool swa_full) {
  KvMemory out;
  if (n_ctx <= 0) return out;
  // One sequence (llama-server -np 1, as captured): the whole context is its own.
  out.cells = Pad256(n_ctx);
  const int64_t n_ubatch = std::min(k.n_ubatch, k.n_batch);
  out.cells_swa = m.n_layer_swa == 0 ? 0 : swa_full ? out.cells : Pad256(std::min(out.cells, m.n_swa + n_ubatch));
  // Bytes of one cell of one layer: K and V rows of n_head_kv heads.
  const double per_cell_layer = double(m.n_head_kv) * (m.head_dim_k * KvTypeBytesPerElement(k.cache_type_k) +
                                                       m.head_dim_v * KvTypeBytesPerElement(k.cache_type_v));
  out.bytes = per_cell_layer *
              (double(m.n_layer - m.n_layer_swa) * double(out.cells) + double(m.n_layer_swa) * double(out.cells_swa));
  return out;
}

int64_t ContextFitting(const ModelInfo& m, const Knobs& k, double bytes, bool swa_full, int64_t cap) {
  if (cap <= 0) cap = m.n_ctx_train;
  if (cap <= 0 || KvCacheMemory(m, k, 1, swa_full).bytes > bytes) return 0;
  // The memory grows with the context (in steps of 256 cells): the largest that fits, by bisection.
  int64_t lo = 1, hi = cap;
  if (KvCacheMemory(m, k, hi, swa_full).bytes <= bytes) return hi;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (KvCacheMemory(m, k, mid, swa_full).bytes <= bytes ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace flipscope
