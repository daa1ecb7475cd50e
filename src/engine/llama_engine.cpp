// LlamaEngine: llama.cpp linked as a library.
#include <fmt/format.h>
#include <ggml-backend.h>
#include <llama.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "engine/engine.h"
#include "engine/llama_internal.h"
#include "runtime/runtime.h"
#include "util/util.h"

namespace flipscope {
namespace {

// llama.cpp's -ctk/-ctv names are ggml's type names (every KvCacheType's name is one).
ggml_type KvType(KvCacheType type) {
  for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
    const char* n = ggml_type_name(ggml_type(t));
    if (n && NameOf(type) == n) return ggml_type(t);
  }
  return GGML_TYPE_COUNT;
}

llama_split_mode LlamaSplitMode(SplitMode m) {
  switch (m) {
    case SplitMode::kNone:
      return LLAMA_SPLIT_MODE_NONE;
    case SplitMode::kRow:
      return LLAMA_SPLIT_MODE_ROW;
    case SplitMode::kTensor:
      return LLAMA_SPLIT_MODE_TENSOR;
    case SplitMode::kLayer:
      break;
  }
  return LLAMA_SPLIT_MODE_LAYER;
}

}  // namespace

static bool TapTrampoline(ggml_tensor* t, bool ask, void* user) {
  return static_cast<LlamaEngine::Impl*>(user)->OnTensor(t, ask);
}

bool LlamaEngine::Impl::OnTensor(ggml_tensor* t, bool ask) {
  std::string_view name = ggml_get_name(t);
  if (ask) {
    if (name == tap.ubatch_marker) ++ubatches_seen;
    return tap_status.ok() && tap.want(name);
  }
  TappedTensor v{name, chunk_pos0 + std::max(0, ubatches_seen - 1) * knobs.n_ubatch, 0, t->ne[0], t->ne[1], {}};
  v.n_tokens = std::min(knobs.n_ubatch, chunk_end - v.pos0);
  v.read = [t, name](int64_t row, std::span<float> out) -> Status {
    if (t->type != GGML_TYPE_F32 || t->nb[0] != sizeof(float) || t->ne[2] * t->ne[3] != 1)
      return Status::Error(fmt::format("graph tensor {} is not an F32 matrix ({})", name, ggml_type_name(t->type)));
    if (row < 0 || row >= t->ne[1] || int64_t(out.size()) != t->ne[0])
      return Status::Error(
          fmt::format("graph tensor {}: row {} of {} (width {}) asked for", name, row, t->ne[1], t->ne[0]));
    ggml_backend_tensor_get(t, out.data(), size_t(row) * t->nb[1], out.size_bytes());
    return Status::Ok();
  };
  tap_status = tap.take(v);
  return tap_status.ok();  // false stops the graph: the prefill then fails with the tap's error
}

LlamaEngine::LlamaEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LlamaEngine::~LlamaEngine() = default;

namespace {

// The device list of llama.cpp's model parameters (null-terminated) for the devices knob: "none"
// the CPU backend alone (llama.cpp's `-dev none`, no op offload either), else the named devices;
// empty for llama.cpp's default. An error names an unknown device.
Result<std::vector<ggml_backend_dev_t>> DeviceList(const std::string& devices) {
  std::vector<ggml_backend_dev_t> devs;
  if (devices.empty()) return devs;
  if (devices != "none") {
    size_t start = 0;
    while (start <= devices.size()) {
      size_t comma = devices.find(',', start);
      std::string name = devices.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      ggml_backend_dev_t d = ggml_backend_dev_by_name(name.c_str());
      if (!d) return Status::Error(OptionName("device") + ": unknown device '" + name + "'");
      devs.push_back(d);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  devs.push_back(nullptr);
  return devs;
}

// Loads impl.model (and its vocabulary) from impl.model_path under impl.knobs, recording where
// the weights went; errors name the file and carry llama.cpp's reason.
Status LoadModel(LlamaEngine::Impl& impl) {
  const Knobs& k = impl.knobs;
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = k.n_gpu_layers;
  mp.split_mode = LlamaSplitMode(k.split_mode);
  mp.use_extra_bufts = k.repack == Repack::kOn;  // llama.cpp's --no-repack clears it
  std::vector<float> ts(llama_max_devices(), 0.0f);
  for (size_t i = 0; i < k.tensor_split.size() && i < ts.size(); ++i) ts[i] = k.tensor_split[i];
  if (!k.tensor_split.empty()) mp.tensor_split = ts.data();
  FS_ASSIGN_OR_RETURN(std::vector<ggml_backend_dev_t> devs, DeviceList(k.devices));
  if (!devs.empty()) mp.devices = devs.data();
  TakeLlamaLogAll();
  impl.model = llama_model_load_from_file(impl.model_path.c_str(), mp);
  impl.weight_buffers = WeightBuffers(TakeLlamaLogAll());
  if (!impl.model) {
    std::string why = TakeLlamaLogTail();
    return Status::Error(impl.model_path + ": llama.cpp could not load the model" +
                         (why.empty() ? "" : " (" + why + ")"));
  }
  impl.vocab = llama_model_get_vocab(impl.model);
  return Status::Ok();
}

// The context parameters for the (resolved) knobs k, a logical batch of n_batch_ctx and
// n_seq_max sequences.
llama_context_params ContextParams(const Knobs& k, int n_batch_ctx, int n_seq_max) {
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = uint32_t(k.n_ctx);
  cp.n_batch = uint32_t(n_batch_ctx);
  cp.n_ubatch = uint32_t(std::min(k.n_ubatch, k.n_batch));
  cp.n_seq_max = uint32_t(n_seq_max);
  cp.n_threads = cp.n_threads_batch = k.n_threads;
  cp.flash_attn_type = k.flash_attn == FlashAttn::kOn    ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                       : k.flash_attn == FlashAttn::kOff ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                                                         : LLAMA_FLASH_ATTN_TYPE_AUTO;
  cp.type_k = KvType(k.cache_type_k);
  cp.type_v = KvType(k.cache_type_v);
  cp.kv_unified = true;  // forks share the prefix cells instead of splitting the context
  cp.swa_full = true;    // keep every SWA cell so a fork can start anywhere; same mask as default
  cp.no_perf = true;
  return cp;
}

// Routes llama.cpp's graph callback to tap (none: nothing); refused without its ubatch marker or
// under load (a loaded batch interleaves other sequences: the tap's rows would be theirs).
Status SetTap(const TensorTap* tap, LlamaEngine::Impl& impl, llama_context_params* cp) {
  if (!tap) return Status::Ok();
  if (tap->ubatch_marker.empty()) return Status::InvalidArgument("a tensor tap needs its ubatch marker");
  if (impl.knobs.load > 0)
    return Status::InvalidArgument(
        fmt::format("a capture made under load (load = {}) cannot be recomputed layer by layer", impl.knobs.load));
  impl.tap = *tap;
  cp->cb_eval = TapTrampoline;
  cp->cb_eval_user_data = &impl;
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<LlamaEngine>> LlamaEngine::Create(const std::string& path, const Knobs& knobs_in, int n_seq_max,
                                                         const TensorTap* tap) {
  EnsureLlamaInit();
  FS_RETURN_IF_ERROR(knobs_in.Validate());
  auto impl = std::make_unique<Impl>();
  impl->knobs = knobs_in;
  impl->model_path = path;
  // The fillers of a load are sequences 1..N; a fork's sequence comes after them.
  impl->n_seq_max = n_seq_max + knobs_in.load;
  FS_RETURN_IF_ERROR(LoadModel(*impl));
  Knobs& k = impl->knobs;
  if (k.n_ctx == 0) k.n_ctx = int(llama_model_n_ctx_train(impl->model));
  if (k.n_threads == 0) k.n_threads = int(std::max(1u, std::thread::hardware_concurrency()));
  // Under load a batch holds the measured chunk (-b) and the fillers' tokens: at most one
  // decoding token and one prompt piece (<= 256 tokens, PlanFillerJob) per filler.
  impl->n_batch_ctx = k.n_batch + k.load * 257;
  llama_context_params cp = ContextParams(k, impl->n_batch_ctx, impl->n_seq_max);
  FS_RETURN_IF_ERROR(SetTap(tap, *impl, &cp));
  TakeLlamaLogAll();
  impl->ctx = llama_init_from_model(impl->model, cp);
  std::string log = TakeLlamaLogAll();
  if (!impl->ctx) {
    std::string why = TakeLlamaLogTail();
    return Status::Refused(path + ": llama.cpp refused the configuration " + k.ToFlags() +
                           (why.empty() ? "" : " (" + why + ")"));
  }
  FS_RETURN_IF_ERROR(ResolveKnobs(*impl, knobs_in, cp, log));
  TakeLlamaLogTail();
  return std::unique_ptr<LlamaEngine>(new LlamaEngine(std::move(impl)));
}

int32_t LlamaEngine::n_vocab() const { return llama_vocab_n_tokens(impl_->vocab); }
int LlamaEngine::n_ctx() const { return impl_->knobs.n_ctx; }
bool LlamaEngine::CanFork() const {
  return !llama_model_is_recurrent(impl_->model) && !llama_model_is_hybrid(impl_->model);
}

std::string LlamaEngine::TokenText(int32_t token) const { return TokenPiece(impl_->vocab, token); }
void LlamaEngine::SetLoadPool(std::vector<FillerSource> pool) { impl_->load_pool = std::move(pool); }
std::optional<EngineLoadRecord> LlamaEngine::LoadRecord() const { return impl_->load_record; }

Result<std::function<std::string(int32_t)>> LoadDetokenizer(const std::string& model_path) {
  EnsureLlamaInit();
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  std::shared_ptr<llama_model> model(llama_model_load_from_file(model_path.c_str(), mp), llama_model_free);
  if (!model) return Status::Error(model_path + ": llama.cpp could not read the vocabulary");
  return std::function<std::string(int32_t)>([model](int32_t token) -> std::string {
    const llama_vocab* v = llama_model_get_vocab(model.get());
    if (token < 0 || token >= llama_vocab_n_tokens(v)) return "";
    return TokenPiece(v, token);
  });
}

EngineDescription LlamaEngine::Describe() const {
  char desc[256];
  llama_model_desc(impl_->model, desc, sizeof(desc));
  return {.flags = impl_->knobs.ToFlags(),
          .knobs = impl_->knobs.Values(),
          .env = NumericsEnvironment(),
          .facts = LlamaEngineFacts{.llama_cpp = LlamaVersion(),
                                    .ggml = GgmlVersion(),
                                    .system_info = llama_print_system_info(),
                                    .model_desc = desc,
                                    .source = LlamaSource(),
                                    .backends = Backends(),
                                    .devices = Devices(),
                                    .resolved = impl_->resolutions,
                                    .kernel_path = KernelPath(impl_->weight_buffers),
                                    .kv_unified = true,
                                    .swa_full = true}};
}

}  // namespace flipscope
