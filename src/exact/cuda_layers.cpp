// A layer's steps on the device (cuda_pass.h): forward.cpp's Project, attention, the residual and
// MLP, qwen3moe's experts (moe.cpp) and qwen35's DeltaNet mixer (qwen35.cpp).
#include <algorithm>
#include <memory>

#include "exact/cuda_pass.h"

namespace flipscope::exact {

// attn_norm -> Q, K, V and biases (per-head norms) -> RoPE -> Q scale, rows [c0, c1), as Project
// in forward.cpp.
Status CudaPass::Project(const Hparams& hp, const DeviceRope& rope, int64_t c0, int64_t c1) {
  const int64_t len = c1 - c0, E = hp.n_embd, qd = hp.n_head * hp.head_k, kd = hp.n_head_kv * hp.head_k;
  const int64_t vd = hp.n_head_kv * hp.head_v;
  double* x = b_.x.get();
  cu::Copy(x, b_.h.get() + c0 * E, len * E);
  cu::NormRows(x, len, E, 1, E, L_->attn_norm.p, hp.rms_eps, true);
  double *q = b_.q.get() + c0 * qd, *k = b_.k.get() + c0 * kd, *v = b_.v.get() + c0 * vd;
  if (hp.attn_gate) {
    MatMulT(x, len, L_->wq, b_.tmp.get());
    cu::SplitGate(b_.tmp.get(), len, hp.n_head, hp.head_k, q, b_.qgate.get() + c0 * qd);
  } else {
    MatMulT(x, len, L_->wq, q);
  }
  MatMulT(x, len, L_->wk, k);
  MatMulT(x, len, L_->wv, v);
  const bool bias = o_->device_mutation != "drop-bias";
  if (L_->bq.p && bias) cu::AddBias(q, len, qd, L_->bq.p);
  if (L_->bk.p && bias) cu::AddBias(k, len, kd, L_->bk.p);
  if (L_->bv.p && bias) cu::AddBias(v, len, vd, L_->bv.p);
  if (L_->q_norm.p) {
    cu::NormRows(q, len * hp.n_head, hp.head_k, 1, hp.head_k, L_->q_norm.p, hp.rms_eps, true);
    cu::NormRows(k, len * hp.n_head_kv, hp.head_k, 1, hp.head_k, L_->k_norm.p, hp.rms_eps, true);
  }
  const bool neox = o_->device_mutation == "rope-mode" ? !hp.rope_neox : hp.rope_neox;
  cu::Rope(q, c0, len, qd, hp.n_head, hp.head_k, hp.n_rot, neox, rope.cos.get(), rope.sin.get(), rope.half);
  cu::Rope(k, c0, len, kd, hp.n_head_kv, hp.head_k, hp.n_rot, neox, rope.cos.get(), rope.sin.get(), rope.half);
  cu::Scale(q, len * qd, hp.q_scale);
  return Status::Ok();
}

// Attention over query blocks: per block and head, scores = Q K^T over the keys the block sees,
// the masked softmax, then the values; the block bounds the scores to about 1 GiB.
Status CudaPass::Attend(const Hparams& hp, bool swa, int64_t n) {
  const int64_t ldq = hp.n_head * hp.head_k, ldk = hp.n_head_kv * hp.head_k, ldv = hp.n_head_kv * hp.head_v;
  const int64_t ldo = hp.n_head * hp.head_v, group = hp.n_head / hp.n_head_kv, window = swa ? hp.n_swa : 0;
  const int64_t block = query_block_;  // the plan's: b_.scores holds block x n
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    const int64_t rows = std::min(block, n - b0);
    const int64_t k0 = window > 0 ? std::max<int64_t>(0, b0 - window + 1) : 0, cols = b0 + rows - k0;
    for (int64_t h = 0; h < hp.n_head; ++h) {
      const int64_t g = h / group;
      cu::Gemm(true, rows, cols, hp.head_k, b_.q.get() + b0 * ldq + h * hp.head_k, ldq,
               b_.k.get() + k0 * ldk + g * hp.head_k, ldk, b_.scores.get(), cols);
      cu::MaskedSoftmax(b_.scores.get(), rows, cols, b0, k0, window, hp.kq_scale, hp.attn_softcap);
      cu::Gemm(false, rows, hp.head_v, cols, b_.scores.get(), cols, b_.v.get() + k0 * ldv + g * hp.head_v, ldv,
               b_.attn.get() + b0 * ldo + h * hp.head_v, ldo);
    }
  }
  return Status::Ok();
}

// The mixer's output in b_.o (rows [c0, c1)) through the post norm into the residual, then the
// MLP and its residual, as ResidualAndMlp in forward.cpp.
Status CudaPass::ResidualAndMlp(const Hparams& hp, int64_t c0, int64_t c1) {
  const int64_t len = c1 - c0, E = hp.n_embd, F = hp.n_ff;
  double *hr = b_.h.get() + c0 * E, *o = b_.o.get(), *x = b_.x.get();
  if (L_->post_attn_norm.p) cu::NormRows(o, len, E, 1, E, L_->post_attn_norm.p, hp.rms_eps, true);
  cu::AddTo(hr, o, len * E);
  cu::Copy(x, hr, len * E);
  cu::NormRows(x, len, E, 1, E, L_->ffn_norm.p, hp.rms_eps, true);
  if (hp.n_expert > 0) {
    FS_RETURN_IF_ERROR(Moe(hp, x, len, o));
  } else {
    MatMulT(x, len, L_->gate, b_.gate.get());
    MatMulT(x, len, L_->up, b_.up.get());
    cu::GatedActivation(hp.gemma, b_.gate.get(), b_.up.get(), len * F);
    MatMulT(b_.gate.get(), len, L_->down, o);
  }
  if (L_->post_ffn_norm.p) cu::NormRows(o, len, E, 1, E, L_->post_ffn_norm.p, hp.rms_eps, true);
  cu::AddTo(hr, o, len * E);
  return Status::Ok();
}

// qwen3moe's MLP of x[len][E] into out: the router's logits come to the host, which routes as the
// CPU does (RouteExperts); each chosen expert then runs on the device over its tokens, and adds its
// weighted output to theirs in the CPU's order (expert after expert).
Status CudaPass::Moe(const Hparams& hp, const double* x, int64_t len, double* out) {
  const int64_t E = hp.n_embd, F = hp.n_ff_exp, X = hp.n_expert;
  MatMulT(x, len, L_->router, b_.ed.get());
  std::vector<double> logits(size_t(len * X));
  cu::Download(logits.data(), b_.ed.get(), len * X);
  FS_RETURN_IF_ERROR(cu::Sync());
  const ExpertRoutes r = RouteExperts(hp, logits.data(), len);
  // Every expert's token ids and weights in one upload, at offsets.
  std::vector<int64_t> ids;
  std::vector<double> weights;
  for (int64_t e = 0; e < X; ++e) {
    ids.insert(ids.end(), r.tokens[size_t(e)].begin(), r.tokens[size_t(e)].end());
    weights.insert(weights.end(), r.weights[size_t(e)].begin(), r.weights[size_t(e)].end());
  }
  FS_ASSIGN_OR_RETURN(int64_t * d_ids, cu::AllocInts(int64_t(ids.size())));
  std::unique_ptr<int64_t, void (*)(int64_t*)> free_ids(d_ids, cu::FreeInts);
  cu::Buffer d_w;
  FS_RETURN_IF_ERROR(d_w.Reserve(int64_t(weights.size()) + 1));
  cu::UploadInts(d_ids, ids.data(), int64_t(ids.size()));
  cu::Upload(d_w.get(), weights.data(), int64_t(weights.size()));
  cu::Zero(out, len * E);
  int64_t at = 0;
  for (int64_t e = 0; e < X; ++e) {
    const int64_t n = int64_t(r.tokens[size_t(e)].size());
    if (n == 0) continue;
    cu::GatherRows(x, d_ids + at, n, E, b_.xs.get());
    cu::Gemm(true, n, F, E, b_.xs.get(), E, L_->gate.b.get() + e * F * E, E, b_.gate.get(), F);
    cu::Gemm(true, n, F, E, b_.xs.get(), E, L_->up.b.get() + e * F * E, E, b_.up.get(), F);
    cu::GatedActivation(false, b_.gate.get(), b_.up.get(), n * F);
    cu::Gemm(true, n, E, F, b_.gate.get(), F, L_->down.b.get() + e * E * F, F, b_.ed.get(), E);
    cu::ScatterAddRows(b_.ed.get(), d_ids + at, d_w.get() + at, n, E, out);
    at += n;
  }
  return cu::Sync();  // the ids are freed on return
}

// qwen35's Gated DeltaNet layer over rows [c0, c1): attn_norm, the projections, the gates, the
// convolution and the delta rule continuing the state, the gated norm, the output projection,
// then the residual and the MLP (qwen35.cpp's DeltaNetMixer).
Status CudaPass::DeltaNet(const Hparams& hp, int64_t c0, int64_t c1) {
  const int64_t len = c1 - c0, E = hp.n_embd, S = hp.ssm_state, Hk = hp.ssm_k_heads, Hv = hp.ssm_v_heads;
  const int64_t K = Hk * S, V = Hv * S, C = 2 * K + V;
  double* x = b_.x.get();
  cu::Copy(x, b_.h.get() + c0 * E, len * E);
  cu::NormRows(x, len, E, 1, E, L_->attn_norm.p, hp.rms_eps, true);
  MatMulT(x, len, L_->ssm_qkv, b_.mixed.get());
  MatMulT(x, len, L_->ssm_z, b_.z.get());
  MatMulT(x, len, L_->ssm_beta, b_.beta.get());
  MatMulT(x, len, L_->ssm_alpha, b_.g.get());
  cu::DeltaGates(b_.beta.get(), b_.g.get(), L_->ssm_dt.p, L_->ssm_a.p, len, Hv);
  cu::Convolve(b_.mixed.get(), len, C, hp.ssm_conv, L_->ssm_conv.p, b_.conv_state.get(), b_.conv_tmp.get(),
               b_.conv.get());
  cu::NormRows(b_.conv.get(), len * 2 * Hk, S, 2 * Hk, C, nullptr, hp.rms_eps, false);  // q and k heads
  cu::DeltaScan(b_.conv.get(), b_.g.get(), b_.beta.get(), len, C, Hk, Hv, S, b_.state.get(), b_.dn_out.get());
  cu::NormRows(b_.dn_out.get(), len * Hv, S, 1, S, L_->ssm_norm.p, hp.rms_eps, true);
  cu::SiluGate(b_.dn_out.get(), b_.z.get(), len * V);
  MatMulT(b_.dn_out.get(), len, L_->ssm_out, b_.o.get());
  return ResidualAndMlp(hp, c0, c1);
}

}  // namespace flipscope::exact
