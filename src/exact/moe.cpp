// qwen3moe's mixture of experts in FP64, following llama.cpp's build_moe_ffn for its settings
// (softmax gating, weights renormalized, no expert groups, no shared expert).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "exact/internal.h"

namespace flipscope::exact {

ExpertRoutes RouteExperts(const Hparams& hp, double* logits, int64_t len) {
  const int64_t X = hp.n_expert, K = hp.n_expert_used;
  // Per expert, the tokens routed to it and their weights; the experts then run once each over
  // their tokens (one product per matrix, as ggml's mul_mat_id groups them).
  ExpertRoutes r;
  r.tokens.resize(static_cast<size_t>(X));
  r.weights.resize(static_cast<size_t>(X));
  std::vector<int64_t> order(static_cast<size_t>(X));
  for (int64_t t = 0; t < len; ++t) {
    double* p = logits + t * X;
    const double mx = *std::max_element(p, p + X);
    double sum = 0;
    for (int64_t e = 0; e < X; ++e) sum += (p[e] = std::exp(p[e] - mx));
    for (int64_t e = 0; e < X; ++e) p[e] /= sum;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    double chosen = 0;
    for (int64_t k = 0; k < K; ++k) chosen += p[order[size_t(k)]];
    chosen = std::max(chosen, 6.103515625e-5);  // llama.cpp's clamp against a zero sum
    const double scale = hp.expert_weights_scale != 0 && hp.expert_weights_scale != 1 ? hp.expert_weights_scale : 1;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t e = order[size_t(k)];
      r.tokens[size_t(e)].push_back(t);
      r.weights[size_t(e)].push_back(p[e] / chosen * scale);
    }
  }
  return r;
}

void MoeMlp(const Hparams& hp, const WideLayer& W, const double* x, int64_t len, double* out) {
  const int64_t E = hp.n_embd, F = hp.n_ff_exp, X = hp.n_expert;
  std::vector<double> logits(size_t(len * X));
  MatMulT(x, len, W.router, logits.data());
  const ExpertRoutes routes = RouteExperts(hp, logits.data(), len);
  const auto& tokens = routes.tokens;
  const auto& weights = routes.weights;
  std::fill(out, out + len * E, 0.0);
  std::vector<double> xs, g, u, d;
  for (int64_t e = 0; e < X; ++e) {
    const int64_t n = int64_t(tokens[size_t(e)].size());
    if (n == 0) continue;
    xs.resize(size_t(n * E));
    for (int64_t i = 0; i < n; ++i) std::copy_n(x + tokens[size_t(e)][size_t(i)] * E, E, xs.data() + i * E);
    g.resize(size_t(n * F));
    u.resize(size_t(n * F));
    d.resize(size_t(n * E));
    Gemm(true, n, F, E, xs.data(), E, W.gate.w.data() + e * F * E, E, g.data(), F);
    Gemm(true, n, F, E, xs.data(), E, W.up.w.data() + e * F * E, E, u.data(), F);
    GatedActivation(false, g.data(), u.data(), n * F);
    Gemm(true, n, E, F, g.data(), F, W.down.w.data() + e * E * F, F, d.data(), E);
    for (int64_t i = 0; i < n; ++i) {
      double* o = out + tokens[size_t(e)][size_t(i)] * E;
      const double w = weights[size_t(e)][size_t(i)];
      for (int64_t j = 0; j < E; ++j) o[j] += w * d[size_t(i * E + j)];
    }
  }
}

}  // namespace flipscope::exact
