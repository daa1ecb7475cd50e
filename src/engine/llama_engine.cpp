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

// Greedy token and its probability from a logits row (softmax in double).
std::pair<int32_t, float> GreedyWithProb(std::span<const float> row) {
  int32_t best = ArgmaxLowest(row);
  double mx = row[size_t(best)], sum = 0;
  for (float v : row) sum += std::exp(double(v) - mx);
  return {best, float(1.0 / sum)};
}

}  // namespace

float ProbOf(std::span<const float> row, int32_t token) {
  double mx = row[size_t(ArgmaxLowest(row))], sum = 0;
  for (float v : row) sum += std::exp(double(v) - mx);
  return float(std::exp(double(row[size_t(token)]) - mx) / sum);
}

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

Result<std::unique_ptr<LlamaEngine>> LlamaEngine::Create(const std::string& path, const Knobs& knobs_in, int n_seq_max,
                                                         const TensorTap* tap) {
  EnsureLlamaInit();
  FS_RETURN_IF_ERROR(knobs_in.Validate());
  auto impl = std::make_unique<Impl>();
  impl->knobs = knobs_in;
  impl->model_path = path;
  // The fillers of a load are sequences 1..N; a fork's sequence comes after them.
  impl->n_seq_max = n_seq_max + knobs_in.load;
  Knobs& k = impl->knobs;

  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = k.n_gpu_layers;
  mp.split_mode = LlamaSplitMode(k.split_mode);
  mp.use_extra_bufts = k.repack == Repack::kOn;  // llama.cpp's --no-repack clears it
  std::vector<float> ts(llama_max_devices(), 0.0f);
  for (size_t i = 0; i < k.tensor_split.size() && i < ts.size(); ++i) ts[i] = k.tensor_split[i];
  if (!k.tensor_split.empty()) mp.tensor_split = ts.data();
  std::vector<ggml_backend_dev_t> devs;
  if (k.devices == "none") {
    // llama.cpp's `-dev none`: no accelerator at all (nor op offload), the CPU backend alone.
    devs.push_back(nullptr);
    mp.devices = devs.data();
  } else if (!k.devices.empty()) {
    size_t start = 0;
    while (start <= k.devices.size()) {
      size_t comma = k.devices.find(',', start);
      std::string name = k.devices.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      ggml_backend_dev_t d = ggml_backend_dev_by_name(name.c_str());
      if (!d) return Status::Error("device: unknown device '" + name + "'");
      devs.push_back(d);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    devs.push_back(nullptr);
    mp.devices = devs.data();
  }
  TakeLlamaLogAll();
  impl->model = llama_model_load_from_file(path.c_str(), mp);
  impl->weight_buffers = WeightBuffers(TakeLlamaLogAll());
  if (!impl->model) {
    std::string why = TakeLlamaLogTail();
    return Status::Error(path + ": llama.cpp could not load the model" + (why.empty() ? "" : " (" + why + ")"));
  }
  impl->vocab = llama_model_get_vocab(impl->model);

  llama_context_params cp = llama_context_default_params();
  if (k.n_ctx == 0) k.n_ctx = int(llama_model_n_ctx_train(impl->model));
  if (k.n_threads == 0) k.n_threads = int(std::max(1u, std::thread::hardware_concurrency()));
  cp.n_ctx = uint32_t(k.n_ctx);
  // Under load a batch holds the measured chunk (-b) and the fillers' tokens: at most one
  // decoding token and one prompt piece (<= 256 tokens, PlanFillerJob) per filler.
  impl->n_batch_ctx = k.n_batch + k.load * 257;
  cp.n_batch = uint32_t(impl->n_batch_ctx);
  cp.n_ubatch = uint32_t(std::min(k.n_ubatch, k.n_batch));
  cp.n_seq_max = uint32_t(impl->n_seq_max);
  cp.n_threads = cp.n_threads_batch = k.n_threads;
  cp.flash_attn_type = k.flash_attn == FlashAttn::kOn    ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                       : k.flash_attn == FlashAttn::kOff ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                                                         : LLAMA_FLASH_ATTN_TYPE_AUTO;
  cp.type_k = KvType(k.cache_type_k);
  cp.type_v = KvType(k.cache_type_v);
  cp.kv_unified = true;  // forks share the prefix cells instead of splitting the context
  cp.swa_full = true;    // keep every SWA cell so a fork can start anywhere; same mask as default
  cp.no_perf = true;
  if (tap) {
    if (tap->ubatch_marker.empty()) return Status::InvalidArgument("a tensor tap needs its ubatch marker");
    if (knobs_in.load > 0)  // a loaded batch interleaves other sequences: the tap's rows would be theirs
      return Status::InvalidArgument(
          fmt::format("a capture made under load (load = {}) cannot be recomputed layer by layer", knobs_in.load));
    impl->tap = *tap;
    cp.cb_eval = TapTrampoline;
    cp.cb_eval_user_data = impl.get();
  }
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
nlohmann::json LlamaEngine::LoadRecord() const { return impl_->load_record; }

Status LlamaEngine::Impl::DecodeChunk(std::span<const int32_t> tokens, int32_t pos0, int seq,
                                      const std::function<bool(int32_t)>& want_output) {
  llama_batch batch = llama_batch_init(int32_t(tokens.size()), 0, 1);
  for (size_t i = 0; i < tokens.size(); ++i) {
    batch.token[i] = tokens[i];
    batch.pos[i] = pos0 + int32_t(i);
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = seq;
    batch.logits[i] = want_output(pos0 + int32_t(i));
  }
  batch.n_tokens = int32_t(tokens.size());
  chunk_pos0 = pos0;
  chunk_end = pos0 + int32_t(tokens.size());
  ubatches_seen = 0;
  int rc = llama_decode(ctx, batch);
  llama_batch_free(batch);
  if (!tap_status.ok()) return std::exchange(tap_status, Status::Ok());
  if (rc != 0) {
    std::string why = TakeLlamaLogTail();
    return Status::Error(fmt::format("llama_decode failed with code {} at positions {}..{}{}", rc, pos0,
                                     pos0 + int32_t(tokens.size()) - 1, why.empty() ? "" : " (" + why + ")"));
  }
  return Status::Ok();
}

Status LlamaEngine::Prefill(std::span<const int32_t> tokens, std::span<const int32_t> probes, const RowSink& sink,
                            const ProgressFn& progress) {
  return PrefillWithForks(tokens, probes, sink, {}, 0, nullptr, progress);
}

Status LlamaEngine::PrefillWithForks(std::span<const int32_t> tokens, std::span<const int32_t> probes,
                                     const RowSink& sink, std::span<const ForkRequest> forks, int max_tokens,
                                     const ForkSink& fork_sink, const ProgressFn& progress, const ExtendFn& extend) {
  for (size_t i = 1; i < forks.size(); ++i)
    if (forks[i].position < forks[i - 1].position) return Status::Error("fork requests must be sorted by position");
  return impl_->Run(
      tokens, probes, sink, forks, nullptr, max_tokens,
      [&](size_t i, const ForkRequest&, const Future& f) { return fork_sink(i, f); }, progress, extend);
}

Status LlamaEngine::PrefillWithPlannedForks(std::span<const int32_t> tokens, std::span<const int32_t> probes,
                                            const RowSink& sink, const ForkPlanner& plan, int max_tokens,
                                            const PlannedForkSink& fork_sink, const ProgressFn& progress,
                                            const ExtendFn& extend) {
  return impl_->Run(
      tokens, probes, sink, {}, plan, max_tokens,
      [&](size_t, const ForkRequest& r, const Future& f) { return fork_sink(r, f); }, progress, extend);
}

Status LlamaEngine::Impl::Run(std::span<const int32_t> tokens, std::span<const int32_t> probes, const RowSink& sink,
                              std::span<const ForkRequest> forks, const ForkPlanner& plan, int max_tokens,
                              const AnyForkSink& fork_sink, const ProgressFn& progress, const ExtendFn& extend) {
  if (int64_t(tokens.size()) > knobs.n_ctx)
    return Status::Error(
        fmt::format("the workload has {} tokens, more than the context of {} (ctx_size, -c)", tokens.size(), knobs.n_ctx));
  if ((!forks.empty() || plan) && n_seq_max < ForkSeq() + 1) return Status::Error("forking needs n_seq_max >= 2");
  llama_memory_t mem = llama_get_memory(ctx);
  llama_memory_clear(mem, true);
  const int32_t n = int32_t(tokens.size());
  const int32_t nv = llama_vocab_n_tokens(vocab);
  std::vector<uint8_t> out_flag(size_t(n), 0);
  for (int32_t p : probes) {
    if (p < 0 || p >= n) return Status::Error(fmt::format("probe position {} outside 0..{}", p, n - 1));
    out_flag[size_t(p)] = 1;
  }
  for (auto& f : forks) {
    if (f.position < 0 || f.position >= n)
      return Status::Error(fmt::format("fork position {} outside 0..{}", f.position, n - 1));
    out_flag[size_t(f.position)] = 1;
  }
  std::optional<FillerLoad> load;
  load_record = nullptr;
  if (knobs.load > 0) {
    // Forks decode in their own cells beside the fillers': room for a long future.
    FS_ASSIGN_OR_RETURN(int cells, FillerCells(knobs.load, knobs.n_ctx, n, forks.empty() && !plan ? 0 : 1024));
    std::vector<FillerSource> pool = load_pool;
    if (pool.empty()) pool.push_back({"workload", std::vector<int32_t>(tokens.begin(), tokens.end())});
    load.emplace(*this, std::move(pool), cells);
    FS_RETURN_IF_ERROR(load->Start());
  }
  FS_ASSIGN_OR_RETURN(const std::vector<ReplayChunk> chunks, Chunks(n));
  served_record = nullptr;
  double decode_s = 0;  // served: the decode steps, each from its llama_decode to its row handed over
  size_t next_probe = 0, next_fork = 0, n_planned = 0;
  int64_t probe_index = 0;
  for (const ReplayChunk& c : chunks) {
    const int32_t begin = c.begin, end = c.end;
    const double t_chunk = c.single ? NowSeconds() : 0;
    auto want = [&](int32_t p) { return out_flag[size_t(p)] != 0; };
    auto chunk = tokens.subspan(size_t(begin), size_t(end - begin));
    int32_t at = 0;  // batch index of the chunk's first token (after the decoding fillers')
    FS_RETURN_IF_ERROR(load ? load->Decode(chunk, begin, want, &at) : DecodeChunk(chunk, begin, 0, want));
    // Hand over every row of the chunk first: a fork's decode replaces the context's outputs.
    struct Pending {
      size_t index;
      ForkRequest req;
      ForkStart start;  // from the row at the point, which a fork's decode replaces
    };
    std::vector<Pending> chunk_forks;
    for (int32_t p = begin; p < end; ++p) {
      if (!out_flag[size_t(p)]) continue;
      const float* lg = llama_get_logits_ith(ctx, at + p - begin);
      if (!lg) return Status::Error(fmt::format("no logits for position {}", p));
      std::span<const float> row(lg, size_t(nv));
      if (next_probe < probes.size() && probes[next_probe] == p) {
        Row r;
        r.index = probe_index++;
        r.position = p;
        r.logits = row;
        // Only a fork planner reads the greedy token here; the capture's row workers take it
        // from the logits in their own scan, off this thread.
        r.argmax = plan ? ArgmaxLowest(row) : -1;
        FS_RETURN_IF_ERROR(sink(r));
        ++next_probe;
        if (int32_t first = plan ? plan(r) : -1; first >= 0) {
          if (first >= nv) return Status::Error(fmt::format("fork at {}: token {} outside the vocabulary", p, first));
          FS_ASSIGN_OR_RETURN(ForkStart start, StartFork(tokens, p, row, first));
          chunk_forks.push_back({n_planned++, {p, first}, std::move(start)});
        }
      }
      for (; next_fork < forks.size() && forks[next_fork].position == p; ++next_fork) {
        FS_ASSIGN_OR_RETURN(ForkStart start, StartFork(tokens, p, row, forks[next_fork].first));
        chunk_forks.push_back({next_fork, forks[next_fork], std::move(start)});
      }
    }
    if (c.single) decode_s += NowSeconds() - t_chunk;
    // The same chunks as a plain prefill, so the teacher-forced rows keep their numerics; each
    // fork copies the cache cells of [0, p] to sequence 1, decodes there and drops them.
    for (const Pending& f : chunk_forks) {
      int32_t p = f.req.position;
      llama_memory_seq_cp(mem, 0, ForkSeq(), 0, p + 1);
      auto fut = Greedy(ForkSeq(), p + 1, f.start, max_tokens, extend);
      llama_memory_seq_rm(mem, ForkSeq(), -1, -1);
      if (!fut.ok()) return fut.status();
      FS_RETURN_IF_ERROR(fork_sink(f.index, f.req, *fut));
    }
    if (progress) progress(end);
  }
  if (load) load_record = load->Finish();
  if (knobs.replay == Replay::kServed) {
    served_record = ServedPlanJson(chunks, n, written);
    const int64_t steps = served_record["fed_singly"];
    served_record["decode_s"] = decode_s;
    served_record["decode_tokens_per_s"] = decode_s > 0 ? double(steps) / decode_s : 0.0;
  }
  return Status::Ok();
}

Result<Future> LlamaEngine::Impl::Greedy(int seq, int32_t pos, const ForkStart& start, int max_tokens,
                                         const ExtendFn& extend) {
  Future f;
  const double t0 = NowSeconds();
  int32_t tok = start.first;
  float prob = start.prob;
  GrammarState* g = start.grammar.get();
  f.decoding = g ? "grammar" : "free";
  f.first_masked = start.first_masked;
  for (int i = 0; max_tokens > 0; ++i) {
    f.tokens.push_back(tok);
    f.probs.push_back(prob);
    if (const bool eog = llama_vocab_is_eog(vocab, tok); eog || pos + i + 1 >= knobs.n_ctx) {
      f.stop = eog ? FutureStop::kEnd : FutureStop::kContext;
      break;
    }
    if (i + 1 >= max_tokens && !(extend && extend(pos - 1, f.tokens))) break;  // kBudget
    int32_t one[1] = {tok};
    FS_RETURN_IF_ERROR(DecodeChunk(one, pos + i, seq, [](int32_t) { return true; }));
    const std::span<const float> row(llama_get_logits_ith(ctx, 0), size_t(llama_vocab_n_tokens(vocab)));
    if (g) {
      tok = g->Best(row);
      if (tok < 0) return Status::Error(fmt::format("future at {}: the grammar allows no token", pos - 1));
      g->Accept(tok);
      prob = ProbOf(row, tok);
    } else {
      std::tie(tok, prob) = GreedyWithProb(row);
    }
  }
  f.seconds = NowSeconds() - t0;
  return f;
}

Result<Future> LlamaEngine::DecodeFresh(std::span<const int32_t> prefix, int32_t first, int max_tokens,
                                        const ExtendFn& extend) {
  llama_memory_t mem = llama_get_memory(impl_->ctx);
  llama_memory_clear(mem, true);
  const int32_t n = int32_t(prefix.size());
  FS_ASSIGN_OR_RETURN(const std::vector<ReplayChunk> chunks, impl_->Chunks(n));  // the capture's own calls
  for (const ReplayChunk& c : chunks)
    FS_RETURN_IF_ERROR(impl_->DecodeChunk(prefix.subspan(size_t(c.begin), size_t(c.end - c.begin)), c.begin, 0,
                                          [&](int32_t p) { return p == n - 1; }));
  const float* lg = llama_get_logits_ith(impl_->ctx, -1);
  FS_ASSIGN_OR_RETURN(ForkStart start, impl_->StartFork(prefix, n - 1, std::span<const float>(lg, size_t(n_vocab())), first));
  return impl_->Greedy(0, n, start, max_tokens, extend);
}

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

nlohmann::json LlamaEngine::Describe() const {
  char desc[256];
  llama_model_desc(impl_->model, desc, sizeof(desc));
  return {{"engine", "llama"},
          {"llama_cpp", LlamaVersion()},
          {"llama_source", LlamaSource()},
          {"ggml", GgmlVersion()},
          {"backends", Backends()},
          {"devices", Devices()},
          {"system_info", llama_print_system_info()},
          {"model_desc", desc},
          {"knobs", impl_->knobs.ToJson()},
          {"resolved", ResolutionsToJson(impl_->resolutions)},
          {"kernel_path", KernelPath(impl_->weight_buffers)},
          {"flags", impl_->knobs.ToFlags()},
          {"kv_unified", true},
          {"swa_full", true}};
}

}  // namespace flipscope
