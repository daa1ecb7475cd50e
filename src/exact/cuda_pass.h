// The CUDA pass's pieces shared by cuda_pass.cpp (the pass, the logits, the device) and
// cuda_layers.cpp (a layer's steps). Not an interface: device.h is.
#pragma once

#include <map>

#include "exact/cuda_ops.h"
#include "exact/device.h"

namespace flipscope::exact {

namespace cu = cuda;

// A widened matrix on the device: [rows][cols], as Matrix.
struct DeviceMatrix {
  cu::Buffer b;
  int64_t rows = 0, cols = 0;
  Status Put(const Matrix& m) {
    rows = m.rows;
    cols = m.cols;
    if (m.w.empty()) return Status::Ok();
    FS_RETURN_IF_ERROR(b.Reserve(int64_t(m.w.size())));
    cu::UploadBeside(b.get(), m.w.data(), int64_t(m.w.size()));
    return Status::Ok();
  }
};

// A vector on the device, or null when the model has none (a bias, a norm it does not use).
struct DeviceVector {
  cu::Buffer b;
  const double* p = nullptr;
  Status Put(const std::vector<double>& v) {
    p = nullptr;
    if (v.empty()) return Status::Ok();
    FS_RETURN_IF_ERROR(b.Reserve(int64_t(v.size())));
    cu::UploadBeside(b.get(), v.data(), int64_t(v.size()));
    p = b.get();
    return Status::Ok();
  }
};

// y[n][W.rows] = x[n][W.cols] . W^T, as MatMulT.
inline void MatMulT(const double* x, int64_t n, const DeviceMatrix& w, double* y) {
  cu::Gemm(true, n, w.rows, w.cols, x, w.cols, w.b.get(), w.cols, y, w.rows);
}

struct DeviceLayer {
  DeviceMatrix wq, wk, wv, wo, gate, up, down, router, ssm_qkv, ssm_z, ssm_beta, ssm_alpha, ssm_out;
  DeviceVector attn_norm, ffn_norm, bq, bk, bv, q_norm, k_norm, post_attn_norm, post_ffn_norm;
  DeviceVector ssm_conv, ssm_dt, ssm_a, ssm_norm;

  // Uploads L's vectors and W's matrices on the copy stream and waits for them.
  Status Put(const Layer& L, const WideLayer& W) {
    for (auto [d, h] : {std::pair{&wq, &W.wq},
                        {&wk, &W.wk},
                        {&wv, &W.wv},
                        {&wo, &W.wo},
                        {&gate, &W.gate},
                        {&up, &W.up},
                        {&down, &W.down},
                        {&router, &W.router},
                        {&ssm_qkv, &W.ssm_qkv},
                        {&ssm_z, &W.ssm_z},
                        {&ssm_beta, &W.ssm_beta},
                        {&ssm_alpha, &W.ssm_alpha},
                        {&ssm_out, &W.ssm_out}})
      FS_RETURN_IF_ERROR(d->Put(*h));
    for (auto [d, h] : {std::pair{&attn_norm, &L.attn_norm},
                        {&ffn_norm, &L.ffn_norm},
                        {&bq, &L.bq},
                        {&bk, &L.bk},
                        {&bv, &L.bv},
                        {&q_norm, &L.q_norm},
                        {&k_norm, &L.k_norm},
                        {&post_attn_norm, &L.post_attn_norm},
                        {&post_ffn_norm, &L.post_ffn_norm},
                        {&ssm_conv, &L.ssm_conv},
                        {&ssm_dt, &L.ssm_dt},
                        {&ssm_a, &L.ssm_a},
                        {&ssm_norm, &L.ssm_norm}})
      FS_RETURN_IF_ERROR(d->Put(*h));
    return cu::SyncCopies();
  }
};

// One angle table on the device.
struct DeviceRope {
  cu::Buffer cos, sin;
  int64_t half = 0;
};

// The buffers of one pass over n tokens, chunk temporaries sized for `chunk` tokens.
struct PassBuffers {
  cu::Buffer h, q, k, v, attn, qgate;                                       // every token
  cu::Buffer x, o, tmp, gate, up;                                           // one chunk
  cu::Buffer scores;                                                        // one query block x the keys it sees
  cu::Buffer mixed, z, beta, g, conv, conv_state, conv_tmp, state, dn_out;  // DeltaNet
  cu::Buffer xs, ed;                                                        // experts
};

class CudaPass final : public DevicePass {
 public:
  explicit CudaPass(cu::DeviceInfo info) : info_(std::move(info)) {}

  ExactDeviceFacts Describe() const override;
  Result<std::vector<double>> HiddenAtProbes(const Model& m, const ExactOptions& o, int threads,
                                             std::span<const int32_t> tokens, std::span<const int32_t> probes,
                                             const std::function<void(int64_t)>& layers_done,
                                             PassTimes* times) override;
  Status Logits(const Model& m, const double* h, int64_t n_rows, double* logits) override;
  double MemoryInUseGiB() const override { return cu::MemoryInUseGiB(); }

 private:
  Status Alloc(const DevicePlan& plan);
  Status Embed(const Model& m, std::span<const int32_t> tokens);
  Status Project(const Hparams& hp, const DeviceRope& rope, int64_t c0, int64_t c1);
  Status Attend(const Hparams& hp, bool swa, int64_t n);
  Status ResidualAndMlp(const Hparams& hp, int64_t c0, int64_t c1);
  Status Moe(const Hparams& hp, const double* x, int64_t len, double* out);
  Status DeltaNet(const Hparams& hp, int64_t c0, int64_t c1);
  Result<const DeviceRope*> Rope(const Hparams& hp, bool swa, int64_t n);

  // The uploaded layer over every token; adds its parts' wall times to spent.
  Status RunLayer(const Hparams& hp, int64_t n, PassTimes& spent, double& t);

  cu::DeviceInfo info_;
  const ExactOptions* o_ = nullptr;
  int64_t chunk_ = 0, query_block_ = 0, n_ = 0;
  PassBuffers b_;
  // Two sets of a layer's weights: the device runs layer l from one while the host widens and
  // uploads layer l + 1 into the other.
  DeviceLayer sets_[2];
  const DeviceLayer* L_ = nullptr;
  const Layer* host_layer_ = nullptr;
  std::map<std::pair<double, double>, DeviceRope> ropes_;
  int64_t rope_n_ = 0;
  cu::FloatBuffer output_;  // the output matrix in float, uploaded at the first Logits
  cu::Buffer wide_out_, logits_, rows_;
  DeviceVector output_bias_;
  bool output_ready_ = false;
};

}  // namespace flipscope::exact
