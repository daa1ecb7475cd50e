// engine/llama_engine.h: llama.cpp linked as a library (LlamaEngine): prefill, forks, taps of
// intermediate tensors, served replay. Part of the engine stage (engine/engine.h is its interface).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine_base.h"
#include "engine/knobs.h"
#include "util/status.h"

namespace flipscope {

// A fork asked of LlamaEngine::Prefill (PrefillRequest::forks): at position p, after the
// teacher-forced prefix [0, p] is in the cache, decode greedily from `first`.
struct ForkRequest {
  int32_t position = 0;
  int32_t first = 0;
};
using ForkSink = std::function<Status(size_t request_index, const Future&)>;
// Chooses, as each probe row arrives, whether to fork there: the future's first token, or -1.
using ForkPlanner = std::function<int32_t(const Row&)>;
// Receives the future of a fork the planner asked for.
using PlannedForkSink = std::function<Status(const ForkRequest&, const Future&)>;
// Whether a fork's future, having used its token budget, decodes one more token (e.g. to let a
// tool call it is writing close); called with the fork's position and its tokens so far.
using ExtendFn = std::function<bool(int32_t position, std::span<const int32_t> future)>;

// One teacher-forced pass of LlamaEngine::Prefill: rows at the probes to sink, and optionally
// futures decoded at forks, each in a copy of the cache right after the chunk holding its point,
// so the rows keep the numerics of a plain prefill. Forks need n_seq_max >= 2.
struct PrefillRequest {
  std::span<const int32_t> tokens{};
  std::span<const int32_t> probes{};  // ascending
  RowSink sink{};
  // Called once every row of a decode has gone to sink, before anything overwrites them (the
  // next decode, a fork): a sink that kept a row's span is done with it when this returns. May be
  // empty; an error stops the pass.
  std::function<Status()> rows_handed{};
  std::span<const ForkRequest> forks{};  // forks at fixed points, sorted by position; to fork_sink
  ForkPlanner plan{};                    // forks chosen as the probe rows arrive; to planned_sink
  int max_tokens = 0;                    // a future's length, first token included
  ForkSink fork_sink{};                  // with the index of the request in forks
  PlannedForkSink planned_sink{};
  ProgressFn progress{};  // tokens done; may be empty
  ExtendFn extend{};      // may decode a future past max_tokens; empty: never
};

// One intermediate tensor of llama.cpp's graph, computed, as handed to a TensorTap: its name
// (llama.cpp's, e.g. "attn_out-3", "l_out-3"), its rows and the ubatch it belongs to.
struct TappedTensor {
  std::string_view name;
  int32_t pos0 = 0;      // position of the ubatch's first token
  int32_t n_tokens = 0;  // tokens in the ubatch
  int64_t width = 0;     // values per row (ne0)
  int64_t rows = 0;      // rows (ne1): n_tokens, or the ubatch's outputs after the last layer's row selection
  // Copies row `row` (width F32 values) out of the backend's buffer; only F32 tensors with
  // contiguous rows can be read (the error says which tensor cannot).
  std::function<Status(int64_t row, std::span<float> out)> read;
};
// Reads chosen intermediate tensors while llama.cpp computes (its graph callback, cb_eval). The
// graph is then computed in pieces ending at each wanted tensor; what a piece computes is the
// same, so the rows do not change on the CPU (callers check the final rows' digests anyway).
struct TensorTap {
  std::function<bool(std::string_view name)> want;  // whether a tensor of this name is read
  std::function<Status(const TappedTensor&)> take;  // called with every wanted tensor, computed
  // A tensor computed once at the start of every ubatch's graph, before any wanted one (e.g.
  // "attn_norm-0"): counting it tells which ubatch, so which positions, the rows belong to.
  std::string ubatch_marker;
};

// llama.cpp linked as a library.
class LlamaEngine : public Engine {
 public:
  // Loads the model and creates a context with the knobs; errors carry llama.cpp's reason. With a
  // tap, every prefill hands it the wanted intermediate tensors (a tap error fails the prefill).
  static Result<std::unique_ptr<LlamaEngine>> Create(const std::string& model_path, const Knobs& knobs,
                                                     int n_seq_max = 1, const TensorTap* tap = nullptr);
  ~LlamaEngine() override;
  int32_t n_vocab() const override;
  Status Prefill(std::span<const int32_t> tokens, std::span<const int32_t> probes, const RowSink& sink,
                 const ProgressFn& progress) override;
  EngineDescription Describe() const override;
  // The pass req asks for (rows, forks); an error names the bad position, or the engine's failure.
  Status Prefill(const PrefillRequest& req);
  // Greedy decode from scratch: prefill tokens[0..p] then decode from first (the re-prefill
  // baseline, and the fallback for models whose memory cannot be forked).
  Result<Future> DecodeFresh(std::span<const int32_t> prefix, int32_t first, int max_tokens,
                             const ExtendFn& extend = nullptr);
  // Futures of the next passes decode greedily under grammar (the best token it allows at each
  // step, the asked first token included), or free with nullopt; an error when llama.cpp cannot
  // parse the grammar.
  Status SetGrammar(std::optional<DecodeGrammar> grammar);
  // Whether the model's memory can be forked by copying a sequence (false for recurrent).
  bool CanFork() const;
  // Context size in tokens.
  int n_ctx() const;
  // Detokenizes one token (special tokens rendered).
  std::string TokenText(int32_t token) const;
  void SetLoadPool(std::vector<FillerSource> pool) override;
  std::optional<EngineLoadRecord> LoadRecord() const override;
  // Under --replay served: per token of the next passes, whether a deployed model wrote it
  // (ModelWrites of the workload's spans). Position p is then fed alone, at its position, when
  // the model wrote tokens p and p+1 (its logits predict a written token from a written one: the
  // decode path); the rest is prefilled in -b chunks from each segment's start. A served pass
  // without them fails.
  void SetWritten(std::vector<uint8_t> written);
  // What the last served pass ran (tokens fed singly, llama_decode calls, prefill segments and
  // chunks, written tokens, the decode steps' time); none after a prefill.
  std::optional<ServedPlan> ServedRecord() const;
  struct Impl;

 private:
  explicit LlamaEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace flipscope
