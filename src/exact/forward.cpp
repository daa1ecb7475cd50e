// The forward pass, layer by layer over the whole sequence (each layer's projections are large
// matrix products over token chunks), following llama.cpp's llama, qwen2, qwen3, qwen3moe, qwen35,
// phi3, gemma2 and gemma3 graphs (qwen35's recurrent layers: qwen35.cpp).
#include <algorithm>
#include <cmath>
#include <map>

#include "exact/internal.h"
#include "util/util.h"

namespace flipscope::exact {
namespace {

void Scale(double* x, int64_t n, double s) {
  if (s != 1.0)
    for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void AddTo(double* y, const double* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

// Adds bias (width d; empty: none) to each of n rows of x.
void AddBias(double* x, int64_t n, std::span<const double> bias) {
  const int64_t d = int64_t(bias.size());
  for (int64_t r = 0; r < n && d > 0; ++r) AddTo(x + r * d, bias.data(), d);
}

// The per-layer buffers for all n tokens; projections fill them chunk by chunk.
struct Activations {
  std::vector<double> q, k, v, attn;
  std::vector<double> qgate;           // qwen35: each head's output gate, projected with Q
  std::vector<double> x, o, gate, up;  // one chunk each
};

// Where the pass hands intermediate rows over: the watched positions (ascending) and the sink.
struct Watch {
  std::span<const int32_t> positions;
  const PointSink* sink = nullptr;
  // Hands over point's rows [c0, c1) (rows[i] of width E is position c0 + i) at watched positions.
  void Emit(int point, int64_t c0, int64_t c1, const double* rows, int64_t E) const {
    if (!sink) return;
    for (auto it = std::lower_bound(positions.begin(), positions.end(), int32_t(c0)); it != positions.end() && *it < c1;
         ++it)
      (*sink)(point, *it, std::span<const double>(rows + (*it - c0) * E, size_t(E)));
  }
};

// Each of the n rows of x (width d) RMS-normed, the rows shared among threads.
void RmsNormRows(int threads, double* x, int64_t n, int64_t d, std::span<const double> weight, double eps) {
  ParallelRows(threads, n, d, [&](int64_t r0, int64_t r1) { RmsNorm(x + r0 * d, r1 - r0, d, weight, eps); });
}

// attn_norm -> Q, K, V projections and biases (gemma3, qwen3: per-head Q/K norms) -> RoPE -> Q
// scale, rows [c0, c1).
void Project(const Model& m, const Layer& L, const WideLayer& W, const RopeTable& rope, const double* h, int64_t c0,
             int64_t c1, Activations& a, bool first_layer, const Watch& watch, int threads) {
  const Hparams& hp = m.hp;
  const int64_t len = c1 - c0, qd = hp.n_head * hp.head_k, kd = hp.n_head_kv * hp.head_k, vd = hp.n_head_kv * hp.head_v;
  a.x.assign(h + c0 * hp.n_embd, h + c1 * hp.n_embd);
  if (first_layer && hp.gemma) watch.Emit(0, c0, c1, a.x.data(), hp.n_embd);
  RmsNormRows(threads, a.x.data(), len, hp.n_embd, L.attn_norm, hp.rms_eps);
  if (first_layer && !hp.gemma) watch.Emit(0, c0, c1, a.x.data(), hp.n_embd);
  double* q = a.q.data() + c0 * qd;
  double* k = a.k.data() + c0 * kd;
  if (hp.attn_gate) {  // qwen35: each head's Q then its gate, split apart
    a.o.resize(size_t(len * 2 * qd));
    MatMulT(a.x.data(), len, W.wq, a.o.data());
    for (int64_t r = 0; r < len; ++r)
      for (int64_t hd = 0; hd < hp.n_head; ++hd) {
        const double* src = a.o.data() + r * 2 * qd + hd * 2 * hp.head_k;
        std::copy_n(src, hp.head_k, q + r * qd + hd * hp.head_k);
        std::copy_n(src + hp.head_k, hp.head_k, a.qgate.data() + (c0 + r) * qd + hd * hp.head_k);
      }
  } else {
    MatMulT(a.x.data(), len, W.wq, q);
  }
  MatMulT(a.x.data(), len, W.wk, k);
  double* v = a.v.data() + c0 * vd;
  MatMulT(a.x.data(), len, W.wv, v);
  // Row by row from here on: rows [r0, r1) of the chunk on each thread.
  ParallelRows(threads, len, qd + kd, [&](int64_t r0, int64_t r1) {
    double *qr = q + r0 * qd, *kr = k + r0 * kd;
    const int64_t rows = r1 - r0;
    AddBias(qr, rows, L.bq);
    AddBias(kr, rows, L.bk);
    AddBias(v + r0 * vd, rows, L.bv);
    if (!L.q_norm.empty()) {
      RmsNorm(qr, rows * hp.n_head, hp.head_k, L.q_norm, hp.rms_eps);
      RmsNorm(kr, rows * hp.n_head_kv, hp.head_k, L.k_norm, hp.rms_eps);
    }
    ApplyRope(qr, c0 + r0, rows, qd, hp.n_head, hp.head_k, hp.n_rot, hp.rope_neox, rope);
    ApplyRope(kr, c0 + r0, rows, kd, hp.n_head_kv, hp.head_k, hp.n_rot, hp.rope_neox, rope);
    Scale(qr, rows * qd, hp.q_scale);
  });
}

// The mixer's output a.o (attention's or DeltaNet's, rows [c0, c1)) through the post norm into
// the residual, then the gated MLP and its residual.
void ResidualAndMlp(const Model& m, const Layer& L, const WideLayer& W, double* h, int64_t c0, int64_t c1,
                    Activations& a, int64_t il, const Watch& watch, int threads) {
  const Hparams& hp = m.hp;
  const int64_t len = c1 - c0, E = hp.n_embd;
  const int p0 = 1 + 4 * int(il);
  double* hr = h + c0 * E;
  if (!L.post_attn_norm.empty()) RmsNormRows(threads, a.o.data(), len, E, L.post_attn_norm, hp.rms_eps);
  watch.Emit(p0, c0, c1, a.o.data(), E);
  AddTo(hr, a.o.data(), len * E);
  watch.Emit(p0 + 1, c0, c1, hr, E);
  a.x.assign(hr, hr + len * E);
  RmsNormRows(threads, a.x.data(), len, E, L.ffn_norm, hp.rms_eps);
  if (hp.n_expert > 0) {
    MoeMlp(hp, W, a.x.data(), len, a.o.data());
  } else {
    a.gate.resize(size_t(len * hp.n_ff));
    a.up.resize(size_t(len * hp.n_ff));
    MatMulT(a.x.data(), len, W.gate, a.gate.data());
    MatMulT(a.x.data(), len, W.up, a.up.data());
    const int64_t F = hp.n_ff;
    ParallelRows(threads, len, F, [&](int64_t r0, int64_t r1) {
      GatedActivation(hp.gemma, a.gate.data() + r0 * F, a.up.data() + r0 * F, (r1 - r0) * F);
    });
    MatMulT(a.gate.data(), len, W.down, a.o.data());
  }
  if (!L.post_ffn_norm.empty()) RmsNormRows(threads, a.o.data(), len, E, L.post_ffn_norm, hp.rms_eps);
  watch.Emit(p0 + 2, c0, c1, a.o.data(), E);
  AddTo(hr, a.o.data(), len * E);
  watch.Emit(p0 + 3, c0, c1, hr, E);
}

// Attention's output projection (qwen35: gated by sigmoid of each head's gate first) into a.o,
// then the residual and the MLP, rows [c0, c1).
void AttnOutAndMlp(const Model& m, const Layer& L, const WideLayer& W, double* h, int64_t c0, int64_t c1,
                   Activations& a, int64_t il, const Watch& watch, int threads) {
  const Hparams& hp = m.hp;
  const int64_t len = c1 - c0, width = hp.n_head * hp.head_v;
  double* attn = a.attn.data() + c0 * width;
  if (hp.attn_gate)
    for (int64_t e = 0; e < len * width; ++e) attn[e] /= 1.0 + std::exp(-a.qgate[size_t(c0 * width + e)]);
  a.o.resize(size_t(len * hp.n_embd));
  MatMulT(attn, len, W.wo, a.o.data());
  ResidualAndMlp(m, L, W, h, c0, c1, a, il, watch, threads);
}

// A Gated DeltaNet layer (qwen35) over rows [c0, c1): attn_norm, the mixer continuing st, then
// the residual and the MLP.
// Adds the mixer's wall time to mixer_s.
void DeltaNetLayer(const Model& m, const Layer& L, const WideLayer& W, double* h, int64_t c0, int64_t c1,
                   Activations& a, int64_t il, DeltaNetState& st, const Watch& watch, int threads, double& mixer_s) {
  const Hparams& hp = m.hp;
  const int64_t len = c1 - c0, E = hp.n_embd;
  a.x.assign(h + c0 * E, h + c1 * E);
  RmsNormRows(threads, a.x.data(), len, E, L.attn_norm, hp.rms_eps);
  if (il == 0) watch.Emit(0, c0, c1, a.x.data(), E);
  a.o.resize(size_t(len * E));
  const double t0 = NowSeconds();
  DeltaNetMixer(hp, L, W, a.x.data(), len, st, threads, a.o.data());
  mixer_s += NowSeconds() - t0;
  ResidualAndMlp(m, L, W, h, c0, c1, a, il, watch, threads);
}

}  // namespace

namespace {

// One pass over the sequence, layer after layer: the residual stream h of every token, the
// activations, the angle tables, and where its time goes.
class Pass {
 public:
  Pass(const Model& m, const ExactOptions& o, int threads, int64_t n, const Watch& watch, PassTimes& spent)
      : m_(m),
        hp_(m.hp),
        o_(o),
        threads_(threads),
        n_(n),
        chunk_(std::max(1, o.token_chunk)),
        watch_(watch),
        spent_(spent),
        t_(NowSeconds()) {
    a_.q.resize(size_t(n * hp_.n_head * hp_.head_k));
    a_.k.resize(size_t(n * hp_.n_head_kv * hp_.head_k));
    a_.v.resize(size_t(n * hp_.n_head_kv * hp_.head_v));
    a_.attn.resize(size_t(n * hp_.n_head * hp_.head_v));
    if (hp_.attn_gate) a_.qgate.resize(a_.q.size());
  }

  // h = the tokens' embeddings (scaled where the model says); an error for an id outside the vocabulary.
  Status Embed(std::span<const int32_t> tokens) {
    const int64_t E = hp_.n_embd;
    h_.assign(size_t(n_ * E), 0.0);
    for (int64_t t = 0; t < n_; ++t) {
      if (tokens[size_t(t)] < 0 || tokens[size_t(t)] >= hp_.n_vocab)
        return Status::Error(m_.path + ": token id " + std::to_string(tokens[size_t(t)]) +
                             " is outside the vocabulary");
      const Matrix e = Widen(Rows(m_.embd, tokens[size_t(t)], 1));
      for (int64_t i = 0; i < E; ++i) h_[size_t(t * E + i)] = e.w[size_t(i)] * hp_.embd_scale;
    }
    Lap(spent_.embed);
    return Status::Ok();
  }

  // Layer il over every token, its weights widened for it and freed after.
  void Layer(int64_t il) {
    const exact::Layer& L = m_.layers[size_t(il)];
    const WideLayer W = Widen(L, threads_);
    Lap(spent_.widen);
    if (L.recurrent)
      Recurrent(il, L, W);
    else
      Attending(il, L, W);
  }

  // The final-normed rows at probes (watched as the last point).
  std::vector<double> AtProbes(std::span<const int32_t> probes) const {
    const int64_t E = hp_.n_embd;
    std::vector<double> out(probes.size() * size_t(E));
    for (size_t i = 0; i < probes.size(); ++i)
      std::copy_n(h_.data() + int64_t(probes[i]) * E, E, out.data() + i * size_t(E));
    RmsNorm(out.data(), int64_t(probes.size()), E, m_.output_norm, hp_.rms_eps);
    if (watch_.sink)
      for (size_t i = 0; i < probes.size(); ++i)
        (*watch_.sink)(1 + 4 * int(hp_.n_layer), probes[i],
                       std::span<const double>(out.data() + i * size_t(E), size_t(E)));
    return out;
  }

 private:
  // Adds the time since the last lap to slot.
  void Lap(double& slot) {
    const double now = NowSeconds();
    slot += now - t_;
    t_ = now;
  }

  // Token after token through its state: no attention step.
  void Recurrent(int64_t il, const exact::Layer& L, const WideLayer& W) {
    DeltaNetState st;
    double mixer_s = 0;
    for (int64_t c0 = 0; c0 < n_; c0 += chunk_)
      DeltaNetLayer(m_, L, W, h_.data(), c0, std::min(n_, c0 + chunk_), a_, il, st, watch_, threads_, mixer_s);
    Lap(spent_.mlp);  // the norms and the MLP; the mixer's share moved to its own part
    spent_.mlp -= mixer_s;
    spent_.recurrent += mixer_s;
  }

  // Projections over token chunks, attention over the whole sequence, then output and MLP.
  void Attending(int64_t il, const exact::Layer& L, const WideLayer& W) {
    // One angle table per distinct rope base (gemma's local and global layers differ).
    std::pair<double, double> key =
        L.swa ? std::pair{hp_.rope_base_swa, hp_.rope_scale_swa} : std::pair{hp_.rope_base, hp_.rope_scale};
    auto it = ropes_.find(key);
    if (it == ropes_.end())
      it = ropes_.emplace(key, MakeRopeTable(n_, hp_.n_rot, key.first, key.second, hp_.rope_sections, hp_.rope_imrope))
               .first;
    for (int64_t c0 = 0; c0 < n_; c0 += chunk_)
      Project(m_, L, W, it->second, h_.data(), c0, std::min(n_, c0 + chunk_), a_, il == 0, watch_, threads_);
    Lap(spent_.project);
    AttentionShape s{.n = n_,
                     .n_head = hp_.n_head,
                     .n_head_kv = hp_.n_head_kv,
                     .head_k = hp_.head_k,
                     .head_v = hp_.head_v,
                     .kq_scale = hp_.kq_scale,
                     .softcap = hp_.attn_softcap,
                     .window = L.swa ? hp_.n_swa : 0,
                     .block = std::max(1, o_.query_block),
                     .threads = threads_};
    Attention(s, a_.q.data(), a_.k.data(), a_.v.data(), a_.attn.data());
    Lap(spent_.attention);
    for (int64_t c0 = 0; c0 < n_; c0 += chunk_)
      AttnOutAndMlp(m_, L, W, h_.data(), c0, std::min(n_, c0 + chunk_), a_, il, watch_, threads_);
    Lap(spent_.mlp);
  }

  const Model& m_;
  const Hparams& hp_;
  const ExactOptions& o_;
  const int threads_;
  const int64_t n_, chunk_;
  const Watch& watch_;
  PassTimes& spent_;
  double t_;
  std::vector<double> h_;
  Activations a_;
  std::map<std::pair<double, double>, RopeTable> ropes_;
};

}  // namespace

Result<std::vector<double>> HiddenAtProbes(const Model& m, const ExactOptions& o, int threads,
                                           std::span<const int32_t> tokens, std::span<const int32_t> probes,
                                           const std::function<void(int64_t)>& layers_done, const PointSink* watch_sink,
                                           PassTimes* times) {
  const Watch watch{probes, watch_sink};
  PassTimes unused;
  Pass pass(m, o, threads, int64_t(tokens.size()), watch, times ? *times : unused);
  FS_RETURN_IF_ERROR(pass.Embed(tokens));
  for (int64_t il = 0; il < m.hp.n_layer; ++il) {
    pass.Layer(il);
    if (layers_done) layers_done(il + 1);
  }
  return pass.AtProbes(probes);
}

void Logits(const Model& m, int threads, const double* h, int64_t n_rows, double* logits) {
  const Hparams& hp = m.hp;
  const int64_t chunk = 8192, E = hp.n_embd;
  std::vector<double> wd;
  for (int64_t v0 = 0; v0 < hp.n_vocab; v0 += chunk) {
    const int64_t rows = std::min(chunk, hp.n_vocab - v0);
    wd.resize(size_t(rows * E));
    ParallelRows(threads, rows, E, [&](int64_t r0, int64_t r1) {
      std::copy(m.output.begin() + (v0 + r0) * E, m.output.begin() + (v0 + r1) * E, wd.begin() + r0 * E);
    });
    Gemm(true, n_rows, rows, E, h, E, wd.data(), E, logits + v0, hp.n_vocab);
  }
  for (int64_t r = 0; r < n_rows && !m.output_bias.empty(); ++r)
    AddTo(logits + r * hp.n_vocab, m.output_bias.data(), hp.n_vocab);
  if (hp.logit_softcap > 0)
    ParallelRows(threads, n_rows, hp.n_vocab, [&](int64_t r0, int64_t r1) {
      for (int64_t i = r0 * hp.n_vocab; i < r1 * hp.n_vocab; ++i)
        logits[i] = hp.logit_softcap * std::tanh(logits[i] / hp.logit_softcap);
    });
}

}  // namespace flipscope::exact
