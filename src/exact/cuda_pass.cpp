// The forward pass on a CUDA device (device.h): forward.cpp's steps, each on the device through
// cuda_ops.h. The residual stream and the layer's Q, K, V live on the device for the whole pass;
// the host widens each layer's weights through ggml's float conversion (the route checked exact
// at load) while the device runs the layer before, then uploads them.
#include "exact/cuda_pass.h"

#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <memory>

#include "util/util.h"

namespace flipscope::exact {

// Reserves the plan's buffers (a buffer a model does not use has size 0 and stays unallocated).
Status CudaPass::Alloc(const DevicePlan& p) {
  for (auto [buf, size] : {std::pair{&b_.h, p.h},
                           {&b_.q, p.q},
                           {&b_.k, p.k},
                           {&b_.v, p.v},
                           {&b_.attn, p.attn},
                           {&b_.qgate, p.qgate},
                           {&b_.x, p.x},
                           {&b_.o, p.o},
                           {&b_.tmp, p.tmp},
                           {&b_.gate, p.gate},
                           {&b_.up, p.up},
                           {&b_.scores, p.scores},
                           {&b_.mixed, p.mixed},
                           {&b_.z, p.z},
                           {&b_.beta, p.beta},
                           {&b_.g, p.g},
                           {&b_.conv, p.conv},
                           {&b_.conv_state, p.conv_state},
                           {&b_.conv_tmp, p.conv_tmp},
                           {&b_.state, p.state},
                           {&b_.dn_out, p.dn_out},
                           {&b_.xs, p.xs},
                           {&b_.ed, p.ed}})
    if (size > 0) FS_RETURN_IF_ERROR(buf->Reserve(size));
  return Status::Ok();
}

Status CudaPass::Embed(const Model& m, std::span<const int32_t> tokens) {
  const Hparams& hp = m.hp;
  const int64_t E = hp.n_embd;
  std::vector<double> h(tokens.size() * size_t(E));
  for (size_t t = 0; t < tokens.size(); ++t) {
    if (tokens[t] < 0 || tokens[t] >= hp.n_vocab)
      return Status::Error(m.path + ": token id " + std::to_string(tokens[t]) + " is outside the vocabulary");
    const Matrix e = exact::Widen(Rows(m.embd, tokens[t], 1));
    for (int64_t i = 0; i < E; ++i) h[t * size_t(E) + size_t(i)] = e.w[size_t(i)] * hp.embd_scale;
  }
  cu::Upload(b_.h.get(), h.data(), int64_t(h.size()));
  return cu::Sync();
}

Result<const DeviceRope*> CudaPass::Rope(const Hparams& hp, bool swa, int64_t n) {
  if (rope_n_ != n) ropes_.clear();  // tables are per sequence length
  rope_n_ = n;
  const std::pair<double, double> key =
      swa ? std::pair{hp.rope_base_swa, hp.rope_scale_swa} : std::pair{hp.rope_base, hp.rope_scale};
  auto it = ropes_.find(key);
  if (it != ropes_.end()) return &it->second;
  const RopeTable t = MakeRopeTable(n, hp.n_rot, key.first, key.second, hp.rope_sections, hp.rope_imrope);
  DeviceRope& d = ropes_[key];
  d.half = t.half;
  FS_RETURN_IF_ERROR(d.cos.Reserve(int64_t(t.cos.size()) + 1));
  FS_RETURN_IF_ERROR(d.sin.Reserve(int64_t(t.sin.size()) + 1));
  cu::Upload(d.cos.get(), t.cos.data(), int64_t(t.cos.size()));
  cu::Upload(d.sin.get(), t.sin.data(), int64_t(t.sin.size()));
  FS_RETURN_IF_ERROR(cu::Sync());  // the host table is freed on return
  return &d;
}

ExactDeviceFacts CudaPass::Describe() const {
  return {.kind = "CUDA",
          .name = fmt::format("CUDA{}", info_.index),
          .description = info_.name,
          .compute_capability = fmt::format("{}.{}", info_.cc_major, info_.cc_minor),
          .memory_gib = info_.memory_gib,
          .driver_cuda = info_.driver,
          .runtime_cuda = info_.runtime,
          .cublas = info_.cublas,
          .route =
              "layer-major FP64 on the device: each layer widened on the host by ggml's to_float (checked exact) "
              "while the device runs the layer before, then uploaded; cuBLAS DGEMM for every product; attention "
              "over query blocks (scores, FP64 softmax, values); the DeltaNet scan one warp per state column; "
              "experts routed on the host"};
}

Status CudaPass::RunLayer(const Hparams& hp, int64_t n, PassTimes& spent, double& t) {
  const exact::Layer& L = *host_layer_;
  auto lap = [&](double& slot) {
    Status s = cu::Sync();
    const double now = NowSeconds();
    slot += now - t;
    t = now;
    return s;
  };
  if (L.recurrent) {  // token after token through the state, chunk after chunk
    const int64_t C = 2 * hp.ssm_k_heads * hp.ssm_state + hp.ssm_v_heads * hp.ssm_state;
    cu::Zero(b_.conv_state.get(), (hp.ssm_conv - 1) * C);
    cu::Zero(b_.state.get(), hp.ssm_v_heads * hp.ssm_state * hp.ssm_state);
    for (int64_t c0 = 0; c0 < n; c0 += chunk_) FS_RETURN_IF_ERROR(DeltaNet(hp, c0, std::min(n, c0 + chunk_)));
    return lap(spent.recurrent);  // the mixer and the layer's MLP together
  }
  FS_ASSIGN_OR_RETURN(const DeviceRope* rope, Rope(hp, L.swa, n));
  for (int64_t c0 = 0; c0 < n; c0 += chunk_) FS_RETURN_IF_ERROR(Project(hp, *rope, c0, std::min(n, c0 + chunk_)));
  FS_RETURN_IF_ERROR(lap(spent.project));
  FS_RETURN_IF_ERROR(Attend(hp, L.swa, n));
  FS_RETURN_IF_ERROR(lap(spent.attention));
  const int64_t width = hp.n_head * hp.head_v;
  for (int64_t c0 = 0; c0 < n; c0 += chunk_) {
    const int64_t c1 = std::min(n, c0 + chunk_), len = c1 - c0;
    double* attn = b_.attn.get() + c0 * width;
    if (hp.attn_gate) cu::SigmoidGate(attn, b_.qgate.get() + c0 * width, len * width);
    MatMulT(attn, len, L_->wo, b_.o.get());
    FS_RETURN_IF_ERROR(ResidualAndMlp(hp, c0, c1));
  }
  return lap(spent.mlp);
}

Result<std::vector<double>> CudaPass::HiddenAtProbes(const Model& m, const ExactOptions& o, int threads,
                                                     std::span<const int32_t> tokens, std::span<const int32_t> probes,
                                                     const std::function<void(int64_t)>& layers_done,
                                                     PassTimes* times) {
  const Hparams& hp = m.hp;
  const int64_t n = int64_t(tokens.size()), E = hp.n_embd;
  o_ = &o;
  n_ = n;
  // The memory is checked before any work, so that a pass that cannot fit says so at once.
  const DevicePlan plan = PlanDevicePass(hp, m.layers, n, int64_t(probes.size()), o);
  FS_RETURN_IF_ERROR(CheckDeviceMemory(plan, n, cu::AvailableBytes(), fmt::format("CUDA{}", info_.index)));
  chunk_ = plan.chunk;
  query_block_ = plan.query_block;
  PassTimes unused;
  PassTimes& spent = times ? *times : unused;
  double t = NowSeconds();
  FS_RETURN_IF_ERROR(Alloc(plan));
  FS_RETURN_IF_ERROR(Embed(m, tokens));
  spent.embed += NowSeconds() - t;
  t = NowSeconds();
  // The host widens layer l + 1 and uploads it into the other set while the device runs layer l
  // (that set's last reader, layer l - 1, finished: RunLayer waits for its kernels).
  auto prepare = [&](int64_t il) {
    return std::async(std::launch::async, [this, &m, il, threads] {
      cu::BindThread();
      const WideLayer W = exact::Widen(m.layers[size_t(il)], threads);
      return sets_[il % 2].Put(m.layers[size_t(il)], W);
    });
  };
  std::future<Status> next = prepare(0);
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    FS_RETURN_IF_ERROR(next.get());
    L_ = &sets_[il % 2];
    host_layer_ = &m.layers[size_t(il)];
    if (il + 1 < hp.n_layer) next = prepare(il + 1);
    const double now = NowSeconds();
    spent.widen += now - t;
    t = now;
    FS_RETURN_IF_ERROR(RunLayer(hp, n, spent, t));
    if (layers_done) layers_done(il + 1);
  }
  // The rows at the probes come back and are final-normed here, as on the CPU.
  const std::vector<int64_t> at(probes.begin(), probes.end());
  FS_ASSIGN_OR_RETURN(int64_t * d_at, cu::AllocInts(int64_t(at.size())));
  std::unique_ptr<int64_t, void (*)(int64_t*)> free_at(d_at, cu::FreeInts);
  FS_RETURN_IF_ERROR(rows_.Reserve(int64_t(at.size()) * E + 1));
  cu::UploadInts(d_at, at.data(), int64_t(at.size()));
  cu::GatherRows(b_.h.get(), d_at, int64_t(at.size()), E, rows_.get());
  std::vector<double> out(at.size() * size_t(E));
  cu::Download(out.data(), rows_.get(), int64_t(out.size()));
  FS_RETURN_IF_ERROR(cu::Sync());
  RmsNorm(out.data(), int64_t(at.size()), E, m.output_norm, hp.rms_eps);
  return out;
}

Status CudaPass::Logits(const Model& m, const double* h, int64_t n_rows, double* logits) {
  const Hparams& hp = m.hp;
  const int64_t V = hp.n_vocab, E = hp.n_embd, chunk = 8192;
  if (!output_ready_) {  // kept in float, widened a chunk at a time, as on the CPU
    FS_RETURN_IF_ERROR(output_.Reserve(V * E));
    cu::UploadFloats(output_.get(), m.output.data(), V * E);
    FS_RETURN_IF_ERROR(output_bias_.Put(m.output_bias));  // on the copy stream
    FS_RETURN_IF_ERROR(cu::SyncCopies());
    FS_RETURN_IF_ERROR(cu::Sync());
    output_ready_ = true;
  }
  FS_RETURN_IF_ERROR(rows_.Reserve(n_rows * E + 1));
  FS_RETURN_IF_ERROR(logits_.Reserve(n_rows * V + 1));
  FS_RETURN_IF_ERROR(wide_out_.Reserve(std::min(chunk, V) * E));
  cu::Upload(rows_.get(), h, n_rows * E);
  for (int64_t v0 = 0; v0 < V; v0 += chunk) {
    const int64_t rows = std::min(chunk, V - v0);
    cu::Widen(output_.get() + v0 * E, rows * E, wide_out_.get());
    cu::Gemm(true, n_rows, rows, E, rows_.get(), E, wide_out_.get(), E, logits_.get() + v0, V);
  }
  if (output_bias_.p) cu::AddBias(logits_.get(), n_rows, V, output_bias_.p);
  if (hp.logit_softcap > 0) cu::Softcap(logits_.get(), n_rows * V, hp.logit_softcap);
  cu::Download(logits, logits_.get(), n_rows * V);
  return cu::Sync();
}

bool BuiltWithCuda() { return true; }

Result<std::unique_ptr<DevicePass>> OpenDevice(const std::string& name, const Model& m) {
  (void)m;
  int index = -1;
  if (name.starts_with("CUDA") && name.size() > 4 &&
      std::all_of(name.begin() + 4, name.end(), [](char c) { return c >= '0' && c <= '9'; }) && name.size() < 9)
    index = std::stoi(name.substr(4));
  if (index < 0)
    return Status::InvalidArgument(OptionName("device") + " " + name +
                                   ": the exact engine runs on the CPU or on CUDA0, CUDA1, ...");
  cu::DeviceInfo info;
  FS_RETURN_IF_ERROR(cu::Open(index, &info).Prefixed(OptionName("device") + " " + name));
  return std::unique_ptr<DevicePass>(new CudaPass(std::move(info)));
}

}  // namespace flipscope::exact
