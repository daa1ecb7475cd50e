// The memory plan of a device pass (device.h): host arithmetic, in every build, so that it is
// tested without a GPU. CudaPass allocates exactly these sizes.
#include <fmt/format.h>

#include <algorithm>

#include "exact/device.h"

namespace flipscope::exact {

namespace {

// The matrices a layer widens to FP64 (Widen in dequant.cpp), in doubles.
int64_t WidenedDoubles(const Layer& L) {
  int64_t n = 0;
  for (const Weight* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down, &L.router, &L.ssm_qkv, &L.ssm_z,
                          &L.ssm_beta, &L.ssm_alpha, &L.ssm_out})
    if (w->data) n += w->rows * w->cols;
  return n;
}

constexpr int64_t kOutputSlice = 8192;  // vocabulary rows widened per logits product

}  // namespace

int64_t DevicePlan::Bytes() const {
  const int64_t doubles = h + q + k + v + attn + qgate + x + o + tmp + gate + up + scores + mixed + z + beta + g +
                          conv + conv_state + conv_tmp + state + dn_out + xs + ed + 2 * layer + rows + logits +
                          output_slice;
  return doubles * 8 + output_floats * 4;
}

DevicePlan PlanDevicePass(const Hparams& hp, const std::vector<Layer>& layers, int64_t n_tokens, int64_t n_probes,
                          const ExactOptions& o) {
  DevicePlan p;
  const int64_t n = std::max<int64_t>(n_tokens, 1), E = hp.n_embd;
  p.chunk = std::clamp<int64_t>(o.device_chunk, 1, n);
  p.query_block =
      o.device_query_block > 0 ? o.device_query_block : std::clamp<int64_t>((int64_t(1) << 27) / n, 256, 4096);
  const int64_t C = p.chunk, qd = hp.n_head * hp.head_k, kd = hp.n_head_kv * hp.head_k;
  const int64_t vd = hp.n_head_kv * hp.head_v, wd = hp.n_head * hp.head_v, F = std::max(hp.n_ff, hp.n_ff_exp);
  p.h = n * E, p.q = n * qd, p.k = n * kd, p.v = n * vd, p.attn = n * wd;
  p.qgate = hp.attn_gate ? n * qd : 0;
  p.x = C * E, p.o = C * std::max(E, wd), p.tmp = C * 2 * qd, p.gate = C * F, p.up = C * F;
  p.scores = std::min(p.query_block, n) * n;
  if (hp.ssm_state > 0) {
    const int64_t S = hp.ssm_state, K = hp.ssm_k_heads * S, V = hp.ssm_v_heads * S, Cc = 2 * K + V;
    p.mixed = C * Cc, p.z = C * V, p.beta = C * hp.ssm_v_heads, p.g = C * hp.ssm_v_heads, p.conv = C * Cc;
    p.conv_state = p.conv_tmp = (hp.ssm_conv - 1) * Cc + 1;
    p.state = hp.ssm_v_heads * S * S, p.dn_out = C * V;
  }
  if (hp.n_expert > 0) p.xs = C * E, p.ed = C * std::max(E, hp.n_expert);
  for (const Layer& L : layers) p.layer = std::max(p.layer, WidenedDoubles(L));
  const int64_t group = std::min<int64_t>(std::max(1, o.probe_group), std::max<int64_t>(n_probes, 1));
  p.rows = std::max<int64_t>(n_probes, group) * E + 1;
  p.logits = group * hp.n_vocab + 1;
  p.output_floats = hp.n_vocab * E;
  p.output_slice = std::min(kOutputSlice, hp.n_vocab) * E;
  return p;
}

Status CheckDeviceMemory(const DevicePlan& plan, int64_t n_tokens, int64_t free_bytes, const std::string& device) {
  const int64_t need = plan.Bytes();
  if (need <= free_bytes) return Status::Ok();
  const double gib = double(int64_t(1) << 30);
  const int64_t every_token = (plan.h + plan.q + plan.k + plan.v + plan.attn + plan.qgate) * 8;
  return Status::Error(fmt::format(
      "{} {}: a pass over {} tokens needs {:.1f} GiB ({:.1f} GiB for every token's residual, Q, K, V and "
      "attention output, {:.1f} GiB for two widened layers) but {:.1f} GiB is free; "
      "use fewer tokens (-c) or a device with more memory",
      OptionName("device"), device, n_tokens, double(need) / gib, double(every_token) / gib, double(2 * plan.layer * 8) / gib,
      double(free_bytes) / gib));
}

}  // namespace flipscope::exact
