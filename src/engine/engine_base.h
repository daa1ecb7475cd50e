// engine/engine_base.h: the Engine interface (rows at probe positions, futures, the manifest's
// engine block) and the build's facts every engine records. Part of the engine stage
// (engine/engine.h is its interface).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/load.h"
#include "records/engine_records.h"
#include "util/names.h"
#include "util/status.h"

namespace flipscope {

// One output row: full-vocabulary logits (llama) or top-k logprobs (truncated sources).
struct Row {
  int64_t index = 0;                  // probe index
  int32_t position = 0;               // token position p; predicts token p+1
  std::span<const float> logits;      // empty when truncated
  std::span<const int32_t> topk_ids;  // truncated sources only
  std::span<const float> topk_logprobs;
  int32_t argmax = -1;  // native-precision greedy token (computed from logits if -1)
};
using RowSink = std::function<Status(const Row&)>;
using ProgressFn = std::function<void(int64_t done_tokens)>;

// Why a decoded future stopped. Only kEnd means the model finished: a future cut by its
// budget or by the context says nothing about what it would have written next.
enum class FutureStop {
  kBudget,   // the token budget ran out (max_tokens, or as far as the extension let it run)
  kEnd,      // an end-of-generation token (the model closed its turn; a server's own stop)
  kContext,  // the context is full
};
// The JSON name: "budget", "end_of_generation", "context".
const char* FutureStopName(FutureStop s);
// The stop of a JSON name; nullopt for anything else.
std::optional<FutureStop> FutureStopFromName(std::string_view name);

// How a future was decoded (FutureDecoding, records/modes.h): under the fork grammar
// (LlamaEngine::SetGrammar) or free.

// A future decoded from a fork point.
struct Future {
  std::vector<int32_t> tokens;
  std::vector<float> probs;  // the probability of each chosen token
  double seconds = 0;        // decoding time
  FutureStop stop = FutureStop::kBudget;
  FutureDecoding decoding = FutureDecoding::kFree;
  bool first_masked = false;  // the grammar rejected the asked first token: tokens[0] is its best allowed one
};

// The grammar a llama.cpp server constrains generation with (the lazy tool-call grammar of its
// chat handling, common_chat_params): GBNF with the start rule "root"; a lazy one constrains
// nothing until a trigger (a regex over the written text, or a token) matches.
struct DecodeGrammar {
  std::string gbnf;
  bool lazy = true;
  std::vector<std::string> trigger_patterns;
  std::vector<int32_t> trigger_tokens;
  // For a fork at p: the position of the first token the model wrote in the turn that token p+1
  // belongs to (the server's sampler saw tokens [turn_start, p] before the future); p + 1: none.
  std::function<int32_t(int32_t position)> turn_start;
};

class Engine {
 public:
  virtual ~Engine() = default;
  // The vocabulary size of rows this engine produces.
  virtual int32_t n_vocab() const = 0;
  // Runs tokens teacher-forced and calls sink for every position in probes (ascending, < size).
  virtual Status Prefill(std::span<const int32_t> tokens, std::span<const int32_t> probes, const RowSink& sink,
                         const ProgressFn& progress) = 0;
  // Engine name, version, commit, build flags, devices and the resolved knobs (the manifest's
  // engine block: ToJson(EngineDescription)).
  virtual EngineDescription Describe() const = 0;
  // The token sequences the load's fillers are cut from (knob load > 0); without a call, the
  // prefilled tokens themselves. Engines without load ignore it.
  virtual void SetLoadPool(std::vector<FillerSource> pool) { (void)pool; }
  // What the load did during the last Prefill (fillers, their sources and lengths, batch shapes);
  // none when it ran alone.
  virtual std::optional<EngineLoadRecord> LoadRecord() const { return std::nullopt; }
  // Wall seconds of the last Prefill's parts, as the engine splits its work (the exact engine:
  // widening, projections, attention, MLP, vocabulary projection, rows); none when it does not.
  virtual std::optional<PassPartTimes> PartTimes() const { return std::nullopt; }
};

// Token id -> text (special tokens rendered) from a model's vocabulary, loaded vocab-only (fast,
// no weights). The function owns the vocabulary; ids outside it give "".
Result<std::function<std::string(int32_t)>> LoadDetokenizer(const std::string& model_path);

// Index of the largest value, ties to the lowest index (the capture format's argmax rule).
int32_t ArgmaxLowest(std::span<const float> row);

// The variables of this process's environment that change what ggml computes, by name: every
// GGML_* (e.g. GGML_CUDA_DISABLE_FUSION) and the *_VISIBLE_DEVICES of the GPU runtimes. A capture
// records them (its engine's "env") and is reused only under the same ones.
std::map<std::string, std::string> NumericsEnvironment();

// The compiled-in (registered) ggml backends, e.g. {"CPU"} or {"CUDA", "CPU"}.
std::vector<std::string> Backends();
// The devices ggml sees, with their memory.
std::vector<EngineDevice> Devices();
// The CPU kernel path here (records/records.h) for a model whose weights are in weight_buffers.
KernelPathRecord KernelPath(const WeightBufferSizes& weight_buffers);
// Where the linked llama.cpp came from: the release ("llama-cpp-python X", or "" for a checkout
// of one's own), the tree's llama.cpp commit and its CPU build options.
EngineSource LlamaSource();
// The buffer types among weight_buffers that are ggml's extra CPU types (CPU_REPACK, AMX...):
// neither plain host memory nor a device's own buffer.
std::vector<std::string> ExtraBufferTypes(const WeightBufferSizes& weight_buffers);
// The "<type> model buffer size = <n> MiB" lines of llama.cpp's model-load log, as type -> MiB.
WeightBufferSizes WeightBuffers(const std::string& load_log);

}  // namespace flipscope
