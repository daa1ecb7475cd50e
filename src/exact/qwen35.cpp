// qwen35 (Qwen 3.5 / 3.6): its hyperparameters and tensors as llama.cpp's src/models/qwen35.cpp
// loads them, and its Gated DeltaNet mixer in FP64 as that graph computes it (delta-net-base.cpp,
// ggml's ssm_conv and gated_delta_net). The full-attention layers run through forward.cpp with a
// gated Q; this file holds what the recurrent layers add.
#include <fmt/format.h>

#include <cmath>

#include "exact/internal.h"
#include "exact/reader.h"

namespace flipscope::exact {

Status ReadQwen35Hparams(const Reader& r, Hparams& hp) {
  FS_ASSIGN_OR_RETURN(hp.ssm_conv, r.Int("ssm.conv_kernel"));
  FS_ASSIGN_OR_RETURN(int64_t inner, r.Int("ssm.inner_size"));
  FS_ASSIGN_OR_RETURN(hp.ssm_state, r.Int("ssm.state_size"));
  FS_ASSIGN_OR_RETURN(hp.ssm_v_heads, r.Int("ssm.time_step_rank"));
  FS_ASSIGN_OR_RETURN(hp.ssm_k_heads, r.Int("ssm.group_count"));
  // llama.cpp's graph takes the value head width as inner / value heads and the state as square
  // (key width = value width = state_size); it asserts what is checked here.
  if (hp.ssm_conv < 1 || hp.ssm_state < 1 || hp.ssm_k_heads < 1 || hp.ssm_v_heads % hp.ssm_k_heads != 0 ||
      inner != hp.ssm_state * hp.ssm_v_heads)
    return Status::Error(
        fmt::format("{}: unsupported Gated DeltaNet shape (conv {}, state {}, {} key heads, {} value heads, inner {})",
                    r.path, hp.ssm_conv, hp.ssm_state, hp.ssm_k_heads, hp.ssm_v_heads, inner));
  if (hp.head_v != hp.head_k)
    return Status::Error(
        fmt::format("{}: qwen35 needs equal key and value widths ({} and {})", r.path, hp.head_k, hp.head_v));
  FS_ASSIGN_OR_RETURN(std::vector<int64_t> sections, r.Ints("rope.dimension_sections"));
  if (sections.empty() || sections.size() > 4)
    return Status::Error(fmt::format("{}: qwen35 needs {}.rope.dimension_sections (up to 4 values)", r.path, r.arch));
  std::copy(sections.begin(), sections.end(), hp.rope_sections.begin());
  hp.rope_imrope = true;  // llama.cpp's rope type for qwen35: interleaved multi-section, NeoX pairs
  hp.rope_neox = true;
  hp.attn_gate = true;
  hp.kq_scale = 1.0 / std::sqrt(double(hp.head_k));  // its loader never reads attention.scale
  hp.logit_softcap = 0;
  // Multi-token-prediction blocks follow the trunk in the file; the main pass does not run them.
  FS_ASSIGN_OR_RETURN(hp.n_layer_skipped, r.Int("nextn_predict_layers", 0));
  if (hp.n_layer_skipped >= hp.n_layer)
    return Status::Error(fmt::format("{}: {} prediction layers of {}", r.path, hp.n_layer_skipped, hp.n_layer));
  hp.n_layer -= hp.n_layer_skipped;
  return Status::Ok();
}

Result<std::vector<bool>> Qwen35RecurrentLayers(const Reader& r, const Hparams& hp) {
  std::vector<bool> recurrent(size_t(hp.n_layer));
  FS_ASSIGN_OR_RETURN(std::vector<int64_t> given, r.Ints("attention.recurrent_layers"));
  if (!given.empty()) {
    if (int64_t(given.size()) < hp.n_layer)
      return Status::Error(fmt::format("{}: {}.attention.recurrent_layers has {} values for {} layers", r.path, r.arch,
                                       given.size(), hp.n_layer));
    for (int64_t il = 0; il < hp.n_layer; ++il) recurrent[size_t(il)] = given[size_t(il)] != 0;
    return recurrent;
  }
  FS_ASSIGN_OR_RETURN(int64_t interval, r.Int("full_attention_interval", 4));
  if (interval < 1) return Status::Error(fmt::format("{}: full_attention_interval {}", r.path, interval));
  for (int64_t il = 0; il < hp.n_layer; ++il) recurrent[size_t(il)] = (il + 1) % interval != 0;
  return recurrent;
}

Status ReadQwen35Layer(Reader& r, const Hparams& hp, int64_t il, bool recurrent, Layer& L) {
  auto n = [&](const char* what) { return fmt::format("blk.{}.{}.weight", il, what); };
  const int64_t E = hp.n_embd, S = hp.ssm_state;
  L.recurrent = recurrent;
  FS_ASSIGN_OR_RETURN(L.attn_norm, r.Vec(n("attn_norm"), E));
  if (!recurrent) {  // Q with each head's gate after it, K, V, per-head Q/K norms
    const int64_t q = hp.n_head * hp.head_k, kv = hp.n_head_kv * hp.head_k;
    FS_ASSIGN_OR_RETURN(L.wq, r.Mat(n("attn_q"), E, 2 * q));
    FS_ASSIGN_OR_RETURN(L.wk, r.Mat(n("attn_k"), E, kv));
    FS_ASSIGN_OR_RETURN(L.wv, r.Mat(n("attn_v"), E, hp.n_head_kv * hp.head_v));
    FS_ASSIGN_OR_RETURN(L.wo, r.Mat(n("attn_output"), hp.n_head * hp.head_v, E));
    FS_ASSIGN_OR_RETURN(L.q_norm, r.Vec(n("attn_q_norm"), hp.head_k));
    FS_ASSIGN_OR_RETURN(L.k_norm, r.Vec(n("attn_k_norm"), hp.head_k));
  } else {
    const int64_t K = hp.ssm_k_heads * S, V = hp.ssm_v_heads * S, C = 2 * K + V;
    FS_ASSIGN_OR_RETURN(L.ssm_qkv, r.Mat(n("attn_qkv"), E, C));
    FS_ASSIGN_OR_RETURN(L.ssm_z, r.Mat(n("attn_gate"), E, V));
    FS_ASSIGN_OR_RETURN(std::vector<float> conv, r.Floats(n("ssm_conv1d"), hp.ssm_conv, C));
    L.ssm_conv.assign(conv.begin(), conv.end());  // ne0 = taps fastest: [channel][tap]
    FS_ASSIGN_OR_RETURN(L.ssm_dt, r.Vec(fmt::format("blk.{}.ssm_dt.bias", il), hp.ssm_v_heads));
    FS_ASSIGN_OR_RETURN(L.ssm_a, r.Vec(fmt::format("blk.{}.ssm_a", il), hp.ssm_v_heads));
    FS_ASSIGN_OR_RETURN(L.ssm_beta, r.Mat(n("ssm_beta"), E, hp.ssm_v_heads));
    FS_ASSIGN_OR_RETURN(L.ssm_alpha, r.Mat(n("ssm_alpha"), E, hp.ssm_v_heads));
    FS_ASSIGN_OR_RETURN(L.ssm_norm, r.Vec(n("ssm_norm"), S));
    FS_ASSIGN_OR_RETURN(L.ssm_out, r.Mat(n("ssm_out"), V, E));
  }
  // llama.cpp names the MLP's input norm attn_post_norm ("post_attention_norm"); it is the only one.
  FS_ASSIGN_OR_RETURN(L.ffn_norm, r.Vec(n("post_attention_norm"), E));
  return Status::Ok();
}

namespace {

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double Silu(double x) { return x / (1.0 + std::exp(-x)); }
double Softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

// y[j] += a * x[j], j < n.
void Axpy(int64_t n, double a, const double* x, double* y) {
  for (int64_t j = 0; j < n; ++j) y[j] += a * x[j];
}

// Each of n vectors of width d divided by sqrt(sum of squares + eps) (build_gdn_l2_norm).
void L2Norm(double* x, int64_t n, int64_t d, double eps) {
  for (int64_t r = 0; r < n; ++r, x += d) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += x[i] * x[i];
    const double s = 1.0 / std::sqrt(ss + eps);
    for (int64_t i = 0; i < d; ++i) x[i] *= s;
  }
}

// The causal depthwise convolution over [st.conv | mixed] then SiLU, into conv[len][C]; st.conv
// becomes the last ssm_conv - 1 inputs.
void Convolve(const Hparams& hp, const Layer& L, const double* mixed, int64_t len, int64_t C, DeltaNetState& st,
              double* conv) {
  const int64_t D = hp.ssm_conv, keep = D - 1;
  std::vector<double> win(size_t((keep + len) * C));
  std::copy(st.conv.begin(), st.conv.end(), win.begin());
  std::copy(mixed, mixed + len * C, win.begin() + keep * C);
  for (int64_t t = 0; t < len; ++t)
    for (int64_t c = 0; c < C; ++c) {
      double s = 0;
      for (int64_t k = 0; k < D; ++k) s += win[size_t((t + k) * C + c)] * L.ssm_conv[size_t(c * D + k)];
      conv[t * C + c] = Silu(s);
    }
  std::copy(win.end() - keep * C, win.end(), st.conv.begin());
}

}  // namespace

void DeltaNetMixer(const Hparams& hp, const Layer& L, const WideLayer& W, const double* x, int64_t len,
                   DeltaNetState& st, int threads, double* out) {
  const int64_t S = hp.ssm_state, Hk = hp.ssm_k_heads, Hv = hp.ssm_v_heads, K = Hk * S, V = Hv * S, C = 2 * K + V;
  if (st.conv.empty()) st.conv.assign(size_t((hp.ssm_conv - 1) * C), 0.0);
  if (st.state.empty()) st.state.assign(size_t(Hv * S * S), 0.0);
  std::vector<double> mixed(size_t(len * C)), z(size_t(len * V)), beta(size_t(len * Hv)), g(size_t(len * Hv));
  MatMulT(x, len, W.ssm_qkv, mixed.data());
  MatMulT(x, len, W.ssm_z, z.data());
  MatMulT(x, len, W.ssm_beta, beta.data());
  MatMulT(x, len, W.ssm_alpha, g.data());
  for (int64_t t = 0; t < len; ++t)
    for (int64_t h = 0; h < Hv; ++h) {
      double& b = beta[size_t(t * Hv + h)];
      b = Sigmoid(b);
      double& a = g[size_t(t * Hv + h)];
      a = Softplus(a + L.ssm_dt[size_t(h)]) * L.ssm_a[size_t(h)];  // log of the decay, <= 0
    }
  std::vector<double> conv(size_t(len * C));
  Convolve(hp, L, mixed.data(), len, C, st, conv.data());
  for (int64_t t = 0; t < len; ++t) L2Norm(conv.data() + t * C, 2 * Hk, S, hp.rms_eps);  // q and k heads
  // The delta rule per value head, token after token: the state decays, the write corrects what
  // the state recalls for k towards v by beta, and q reads it. Value head h reads key head h % Hk
  // (ggml repeats the key heads as a tile). M[i][j] is the state's S[i][j]; every sum over i runs
  // in ascending i, as row-by-row updates (axpy) that vectorize over j.
  std::vector<double> o(size_t(len * V));
  const double scale = 1.0 / std::sqrt(double(S));
  ParallelRows(threads, Hv, len * S * S, [&](int64_t h0, int64_t h1) {
    std::vector<double> delta(static_cast<size_t>(S)), read(static_cast<size_t>(S));
    for (int64_t h = h0; h < h1; ++h) {
      double* M = st.state.data() + h * S * S;
      for (int64_t t = 0; t < len; ++t) {
        const double* q = conv.data() + t * C + (h % Hk) * S;
        const double* k = q + K;
        const double* v = conv.data() + t * C + 2 * K + h * S;
        const double decay = std::exp(g[size_t(t * Hv + h)]), b = beta[size_t(t * Hv + h)];
        for (int64_t e = 0; e < S * S; ++e) M[e] *= decay;
        std::fill(read.begin(), read.end(), 0.0);
        for (int64_t i = 0; i < S; ++i) Axpy(S, k[i], M + i * S, read.data());
        for (int64_t j = 0; j < S; ++j) delta[size_t(j)] = (v[j] - read[size_t(j)]) * b;
        for (int64_t i = 0; i < S; ++i) Axpy(S, k[i], delta.data(), M + i * S);
        std::fill(read.begin(), read.end(), 0.0);
        for (int64_t i = 0; i < S; ++i) Axpy(S, q[i], M + i * S, read.data());
        double* oj = o.data() + t * V + h * S;
        for (int64_t j = 0; j < S; ++j) oj[j] = read[size_t(j)] * scale;
      }
    }
  });
  // Each value head's output RMS-normed (ssm_norm) and gated by silu(z), then projected.
  RmsNorm(o.data(), len * Hv, S, L.ssm_norm, hp.rms_eps);
  for (int64_t e = 0; e < len * V; ++e) o[size_t(e)] *= Silu(z[size_t(e)]);
  MatMulT(o.data(), len, W.ssm_out, out);
}

}  // namespace flipscope::exact
