// The graph tensors per architecture, the FP64 row comparison and the birth rule.
#include <algorithm>
#include <cmath>

#include "layers/layers.h"

namespace flipscope {

Result<LayerTaps> TapsFor(const std::string& arch) {
  // Names from llama.cpp's graph builders (src/models/llama.cpp, gemma3.cpp): in llama the MLP's
  // result is "ffn_out-N" and the sum with the residual is renamed "l_out-N"; gemma3 has no name
  // on attention's output projection, so its post-norm (what joins the residual) is used. llama's
  // token embedding is an unnamed node, so layer 0's attention norm of it stands for it.
  if (arch == "llama")
    return LayerTaps{"attn_norm-0", "attn_out-{}", "ffn_inp-{}", "ffn_out-{}", "l_out-{}", "result_norm"};
  if (arch == "gemma3")
    return LayerTaps{"inp_scaled", "attn_post_norm-{}", "sa_out-{}", "ffn_post_norm-{}", "l_out-{}", "result_norm"};
  return Status::InvalidArgument("layers knows the graph tensors of the llama and gemma3 architectures, not '" + arch +
                                 "'");
}

namespace {
template <typename A>
RowDiff Diff(std::span<const A> a, std::span<const float> b) {
  double aa = 0, bb = 0, ab = 0, dd = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double x = a[i], y = b[i];
    aa += x * x;
    bb += y * y;
    ab += x * y;
    dd += (x - y) * (x - y);
  }
  RowDiff d;
  d.rel = dd == 0 ? 0 : aa == 0 ? INFINITY : std::sqrt(dd / aa);
  d.cosine = aa == 0 || bb == 0 ? (aa == bb ? 1 : 0) : ab / std::sqrt(aa * bb);
  return d;
}
}  // namespace

RowDiff DiffRows(std::span<const float> a, std::span<const float> b) { return Diff(a, b); }
RowDiff DiffRows(std::span<const double> a, std::span<const float> b) { return Diff(a, b); }

int BirthIndex(std::span<const double> stream, double jump, double floor) {
  double level = 0;  // the largest difference the earlier points reached
  for (size_t i = 0; i < stream.size(); ++i) {
    if (stream[i] >= floor && stream[i] > jump * level) return int(i);
    level = std::max(level, stream[i]);
  }
  return -1;
}

}  // namespace flipscope
