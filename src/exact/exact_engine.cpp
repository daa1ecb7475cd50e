// The exact engine behind the Engine interface: loads the FP64 model, runs the forward pass and
// hands the probe rows over in groups (the vocabulary projection only at the probes).
#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "exact/device.h"
#include "exact/internal.h"
#include "records/records.h"
#include "util/util.h"

namespace flipscope {

struct ExactEngine::Impl {
  exact::Model model;
  ExactOptions opts;
  int threads = 1;
  double load_s = 0;
  exact::PassTimes times;  // of the last prefill
  nlohmann::json blas;
  std::unique_ptr<exact::DevicePass> device;  // null: the CPU
};

namespace {
// Whether the option names the CPU rather than a device.
bool OnCpu(const std::string& device) { return device.empty() || device == "CPU" || device == "none"; }
}  // namespace

ExactEngine::ExactEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ExactEngine::~ExactEngine() = default;

Result<std::unique_ptr<ExactEngine>> ExactEngine::Create(const std::string& model_path, const ExactOptions& opts) {
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  impl->threads = opts.n_threads > 0 ? opts.n_threads : int(std::max(1u, std::thread::hardware_concurrency()));
  double t0 = NowSeconds();
  FS_ASSIGN_OR_RETURN(impl->model, exact::LoadModel(model_path, impl->threads));
  impl->load_s = NowSeconds() - t0;
  if (!OnCpu(opts.device)) {
    FS_ASSIGN_OR_RETURN(impl->device, exact::OpenDevice(opts.device, impl->model));
    impl->blas = {{"name", "cuBLAS"}, {"on", opts.device}};  // the device block says which
  } else {
    FS_ASSIGN_OR_RETURN(impl->blas, exact::InitBlas(impl->threads));
  }
  return std::unique_ptr<ExactEngine>(new ExactEngine(std::move(impl)));
}

int32_t ExactEngine::n_vocab() const { return int32_t(impl_->model.hp.n_vocab); }

Status ExactEngine::PrefillF64(std::span<const int32_t> tokens, std::span<const int32_t> probes, const RowF64Sink& sink,
                               const ProgressFn& progress) {
  const exact::Model& m = impl_->model;
  const int64_t n = int64_t(tokens.size());
  for (size_t i = 0; i < probes.size(); ++i)
    if (probes[i] < 0 || probes[i] >= n || (i > 0 && probes[i] <= probes[i - 1]))
      return Status::Error(
          fmt::format("probe {} (position {}) is not ascending inside the {} tokens", i, probes[i], n));
  // The layers run over the whole sequence at once, so progress is reported in token-equivalents
  // of the work done: layer l of L done = l/L of the tokens.
  auto layers_done = [&](int64_t l) {
    if (progress) progress(n * l / (m.hp.n_layer + 1));
  };
  impl_->times = {};
  exact::DevicePass* dev = impl_->device.get();
  FS_ASSIGN_OR_RETURN(
      std::vector<double> hidden,
      dev ? dev->HiddenAtProbes(m, impl_->opts, impl_->threads, tokens, probes, layers_done, &impl_->times)
          : exact::HiddenAtProbes(m, impl_->opts, impl_->threads, tokens, probes, layers_done, nullptr, &impl_->times));
  const int64_t group = std::max(1, impl_->opts.probe_group), V = m.hp.n_vocab, E = m.hp.n_embd;
  std::vector<double> logits;
  for (int64_t p0 = 0; p0 < int64_t(probes.size()); p0 += group) {
    const int64_t rows = std::min<int64_t>(group, int64_t(probes.size()) - p0);
    logits.resize(size_t(rows * V));
    double t0 = NowSeconds();
    if (dev)
      FS_RETURN_IF_ERROR(dev->Logits(m, hidden.data() + p0 * E, rows, logits.data()));
    else
      exact::Logits(m, impl_->threads, hidden.data() + p0 * E, rows, logits.data());
    impl_->times.logits += NowSeconds() - t0;
    t0 = NowSeconds();
    for (int64_t r = 0; r < rows; ++r) {
      RowF64 row{p0 + r, probes[size_t(p0 + r)], std::span<const double>(logits.data() + r * V, size_t(V))};
      FS_RETURN_IF_ERROR(sink(row));
    }
    impl_->times.rows += NowSeconds() - t0;
    if (progress)
      progress(n * m.hp.n_layer / (m.hp.n_layer + 1) + n * (p0 + rows) / int64_t(probes.size()) / (m.hp.n_layer + 1));
  }
  return Status::Ok();
}

Status ExactEngine::ForwardPoints(std::span<const int32_t> tokens, std::span<const int32_t> watch,
                                  const PointSink& sink, const ProgressFn& layers_done) {
  for (size_t i = 0; i < watch.size(); ++i)
    if (watch[i] < 0 || watch[i] >= int64_t(tokens.size()) || (i > 0 && watch[i] <= watch[i - 1]))
      return Status::Error(
          fmt::format("watched position {} is not ascending inside the {} tokens", watch[i], tokens.size()));
  if (impl_->device)
    return Status::InvalidArgument("the exact engine's intermediate rows are computed on the CPU only (drop -dev " +
                                   impl_->opts.device + ")");
  auto hidden = exact::HiddenAtProbes(impl_->model, impl_->opts, impl_->threads, tokens, watch, layers_done, &sink);
  return hidden.ok() ? Status::Ok() : hidden.status();
}

Status ExactEngine::Prefill(std::span<const int32_t> tokens, std::span<const int32_t> probes, const RowSink& sink,
                            const ProgressFn& progress) {
  std::vector<float> f;
  return PrefillF64(
      tokens, probes,
      [&](const RowF64& r) {
        f.assign(r.logits.begin(), r.logits.end());
        Row row;
        row.index = r.index;
        row.position = r.position;
        row.logits = f;
        // The greedy token is decided in FP64, not on the F32-rounded row, ties to the lowest id.
        row.argmax = int32_t(std::max_element(r.logits.begin(), r.logits.end()) - r.logits.begin());
        return sink(row);
      },
      progress);
}

EngineDescription ExactEngine::Describe() const {
  const exact::Model& m = impl_->model;
  ExactEngineFacts f{.version = std::string(FlipscopeVersion()),
                     .precision = "fp64",
                     .architecture = m.hp.arch,
                     .blas = OpaqueJson(impl_->blas),
                     .dequant_route = "ggml type traits to_float (ggml " + GgmlVersion() + "), widened to FP64",
                     .dequant_check = "every element compared with an FP64 decode of its block format",
                     .dequant_exact = true,
                     .dequant_types = {},
                     .query_block = impl_->opts.query_block,
                     .softmax = "FP64, max-subtracted",
                     .load_s = impl_->load_s,
                     .device = std::nullopt};
  for (const auto& [type, t] : m.dequant) {
    f.dequant_types[type] = {.elements = t.elements, .inexact = t.inexact, .checked = t.checked};
    f.dequant_exact = f.dequant_exact && t.checked && t.inexact == 0;
  }
  EngineDescription d{
      .flags = "--engine exact", .knobs = {{"threads", int64_t(impl_->threads)}}, .env = {}, .facts = {}};
  if (impl_->device) {  // only then: CPU manifests stay as they were
    f.device = impl_->device->Describe();
    d.flags = "--engine exact -dev " + impl_->opts.device;
    d.knobs["device"] = impl_->opts.device;
  }
  d.facts = std::move(f);
  return d;
}

std::optional<PassPartTimes> ExactEngine::PartTimes() const {
  const exact::PassTimes& t = impl_->times;
  PassPartTimes parts;
  parts.embed_s = t.embed, parts.widen_s = t.widen, parts.project_s = t.project, parts.attention_s = t.attention;
  parts.mlp_s = t.mlp, parts.logits_s = t.logits, parts.rows_s = t.rows;
  if (t.recurrent > 0) parts.recurrent_s = t.recurrent;  // a model with DeltaNet layers (qwen35)
  if (impl_->device) parts.device_memory_gib = impl_->device->MemoryInUseGiB();
  return parts;
}

int64_t ExactEngine::DeviceBytes(int64_t n_tokens, int64_t n_probes) const {
  return exact::PlanDevicePass(impl_->model.hp, impl_->model.layers, n_tokens, n_probes, impl_->opts).Bytes();
}

ExactWork ExactEngine::Work(int64_t n, int64_t n_probes) const {
  const exact::Hparams& hp = impl_->model.hp;
  ExactWork w;
  auto size = [](const exact::Weight& x) { return double(x.rows) * double(x.cols); };
  // Experts: each token runs n_expert_used of the stacked n_expert.
  const double used = hp.n_expert > 0 ? double(hp.n_expert_used) / double(hp.n_expert) : 1.0;
  for (const exact::Layer& L : impl_->model.layers) {
    const double dense = size(L.wq) + size(L.wk) + size(L.wv) + size(L.wo) + size(L.router) + size(L.ssm_qkv) +
                         size(L.ssm_z) + size(L.ssm_beta) + size(L.ssm_alpha) + size(L.ssm_out);
    w.matmul += 2.0 * double(n) * (dense + used * (size(L.gate) + size(L.up) + size(L.down)));
    if (L.recurrent) {  // decay, read, write and output over each value head's S x S state
      w.scan += 7.0 * double(hp.ssm_state * hp.ssm_state) * double(hp.ssm_v_heads) * double(n);
      continue;
    }
    const int64_t window = L.swa ? hp.n_swa : 0;
    double keys = 0;  // keys seen, summed over the queries
    for (int64_t p = 0; p < n; ++p) keys += double(window > 0 ? std::min(p + 1, window) : p + 1);
    w.attention += 2.0 * double(hp.n_head) * double(hp.head_k + hp.head_v) * keys;
  }
  w.logits = 2.0 * double(n_probes) * double(hp.n_vocab) * double(hp.n_embd);
  return w;
}

Result<nlohmann::json> CheckDequantization(const std::string& model_path) {
  FS_ASSIGN_OR_RETURN(exact::Model m, exact::LoadModel(model_path));
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [type, t] : m.dequant)
    out[type] = {{"elements", t.elements}, {"checked", t.checked}, {"inexact", t.inexact}};
  return out;
}

}  // namespace flipscope
