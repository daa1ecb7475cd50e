// LlamaEngine's state, shared by its creation (llama_engine.cpp), its pass (llama_pass.cpp) and
// its load (llama_load.cpp).
// Not part of the engine's interface.
#pragma once

#include <llama.h>

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace flipscope {

class FillerLoad;

// The probability of token in a logits row (softmax in double).
float ProbOf(std::span<const float> row, int32_t token);

// One future's grammar sampler (llama.cpp's, lazy or not) and whether it can still go on.
class GrammarState {
 public:
  // A fresh sampler of g over vocab; an error when llama.cpp cannot parse the grammar.
  static Result<std::unique_ptr<GrammarState>> Start(const llama_vocab* vocab, const DecodeGrammar& g);
  ~GrammarState();
  // Feeds a token the model wrote; false once the grammar has rejected one (it is then unusable).
  bool Accept(int32_t token);
  // Whether the grammar allows token next (a lazy grammar not yet triggered allows every token).
  bool Allows(int32_t token, float logit);
  // The greedy token among those the grammar allows (ties to the lowest id); -1 when none.
  int32_t Best(std::span<const float> row);

 private:
  explicit GrammarState(llama_sampler* s) : sampler_(s) {}
  llama_sampler* sampler_ = nullptr;
  bool ok_ = true;
};

// How a fork's future starts: its first token (the asked one, or under a grammar that rejects
// it, the grammar's best), that token's probability, and the grammar state after it (null: free).
struct ForkStart {
  int32_t first = 0;
  float prob = 0;
  bool first_masked = false;
  std::shared_ptr<GrammarState> grammar;
};

// One llama_decode call of a teacher-forced pass: tokens [begin, end) of sequence 0.
struct ReplayChunk {
  int32_t begin = 0, end = 0;
  bool single = false;  // a served decode step: one written token fed alone
};
// The calls of a pass over tokens [0, n). Prefill (written empty): [0, n) in n_batch chunks.
// Served (written holds at least n flags): position p alone when written[p] and written[p + 1]
// (a flag past the end counts as not written); each maximal run of the other positions, a prefill
// segment, in n_batch chunks starting at the segment's start, as a server continues a cached prompt.
std::vector<ReplayChunk> PlanReplay(int32_t n, int n_batch, std::span<const uint8_t> written);
// Counts of a served plan for the manifest: fed_singly, decode_calls, prefill_segments,
// prefill_chunks, written_tokens (of [0, n)), written_runs.
ServedPlan ServedPlanOf(std::span<const ReplayChunk> chunks, int32_t n, std::span<const uint8_t> written);

struct LlamaEngine::Impl {
  llama_model* model = nullptr;
  llama_context* ctx = nullptr;
  const llama_vocab* vocab = nullptr;
  Knobs knobs;                              // effective: what llama.cpp ran (ResolveKnobs)
  std::vector<KnobResolution> resolutions;  // where that differs from the request, and why
  WeightBufferSizes weight_buffers;         // buffer type -> MiB of the model's weights (the kernel path)
  std::string model_path;
  int n_seq_max = 1;
  int n_batch_ctx = 0;                          // the context's logical batch: -b, plus room for the fillers
  std::vector<FillerSource> load_pool;          // empty: the fillers are cut from the prefilled tokens
  std::optional<EngineLoadRecord> load_record;  // what the last loaded prefill ran; none when alone
  std::vector<uint8_t> written;                 // served replay: per token, whether the model wrote it
  std::optional<ServedPlan> served_record;      // what the last served pass ran; none after a prefill
  std::optional<DecodeGrammar> grammar;         // futures decode under it (SetGrammar); none: free
  // The graph tap (empty: none) and where the current ubatch lies, for the rows it hands over.
  // Only an unloaded prefill taps: a loaded batch holds other sequences' tokens (Create refuses both).
  TensorTap tap;
  Status tap_status;
  int32_t chunk_pos0 = 0, chunk_end = 0, ubatches_seen = 0;
  ~Impl() {
    if (ctx) llama_free(ctx);
    if (model) llama_model_free(model);
  }
  // The llama_decode calls of a pass over n tokens under the replay knob; an error when a served
  // pass has no written flags for them (SetWritten).
  Result<std::vector<ReplayChunk>> Chunks(int32_t n) const;
  // llama.cpp's graph callback: asked about every node (ask), then given each wanted one computed.
  bool OnTensor(ggml_tensor* t, bool ask);
  // The sequence a fork decodes in: the one after the fillers' (1 alone).
  int ForkSeq() const { return knobs.load + 1; }
  // Decodes tokens[begin, end) in sequence seq at their positions, with outputs where flagged.
  Status DecodeChunk(std::span<const int32_t> tokens, int32_t pos0, int seq,
                     const std::function<bool(int32_t)>& want_output);
  // How the fork at p (tokens: the transcript, row: the logits at p) starts from `first`: under
  // the grammar, the turn's tokens up to p are fed to it first (grammar.cpp).
  Result<ForkStart> StartFork(std::span<const int32_t> tokens, int32_t p, std::span<const float> row, int32_t first);
  // Greedy decode from start.first at pos: max_tokens tokens, then more while extend(pos - 1, so
  // far); each token the best the grammar allows when start has one.
  Result<Future> Greedy(int seq, int32_t pos, const ForkStart& start, int max_tokens, const ExtendFn& extend);
  // A fork asked at a row of the chunk just decoded, started from that row (a fork's decode
  // replaces the context's outputs, so every row of the chunk is handed over first).
  struct PendingFork {
    size_t index = 0;  // in PrefillRequest::forks, or the planner's count of forks
    ForkRequest req;
    bool planned = false;  // asked by PrefillRequest::plan: the future goes to planned_sink
    ForkStart start;
  };
  // Where a pass stands: the next probe and fixed fork, the rows handed over, the planned forks.
  struct PassCursor {
    size_t next_probe = 0, next_fork = 0, n_planned = 0;
    int64_t probe_index = 0;
  };
  // The teacher-forced pass shared by every prefill: rows to r.sink, forks from the fixed list
  // and from the planner, each decoded right after its chunk.
  Status Run(const PrefillRequest& r);
  // Refuses a pass the context cannot run: unsorted forks, more tokens than the context, forks
  // without a sequence of their own.
  Status CheckPass(const PrefillRequest& r) const;
  // Under load, starts the fillers in *load (their tokens cut from r's when no pool was set);
  // alone, leaves it empty.
  Status StartLoad(const PrefillRequest& r, std::optional<FillerLoad>* load);
  // Hands the flagged rows of chunk c (its first token at batch index at) to r.sink and starts
  // the forks asked at them; errors name the position.
  Result<std::vector<PendingFork>> HandRows(const PrefillRequest& r, std::span<const uint8_t> out_flag,
                                            const ReplayChunk& c, int32_t at, PassCursor* cur);
  // Decodes each fork's future in a copy of the cache up to its point, and hands it over.
  Status RunForks(const PrefillRequest& r, std::span<const PendingFork> forks);
};

// The fillers of one loaded prefill: sequences 1..N of the context, each running its jobs
// (PlanFillerJob) while sequence 0, the measured one, is prefilled in its usual chunks.
class FillerLoad {
 public:
  // Plans the first job of every slot; max_cells from FillerCells().
  FillerLoad(LlamaEngine::Impl& e, std::vector<FillerSource> pool, int max_cells);
  // Prefills the warm jobs' prompts (before the measured sequence starts), so they decode from
  // the first shared batch on.
  Status Start();
  // Decodes one batch: the decoding fillers' next tokens, then the measured chunk (sequence 0
  // at pos0.., outputs where want_output), then the prefilling fillers' next prompt pieces.
  // *at receives the batch index of the chunk's first token; the fillers advance.
  Status Decode(std::span<const int32_t> chunk, int32_t pos0, const std::function<bool(int32_t)>& want_output,
                int32_t* at);
  // Drops the fillers' cache cells; returns the record for the manifest (jobs, batch shapes).
  LlamaLoadRecord Finish();

 private:
  struct Slot {
    FillerJob job;
    int prefilled = 0;  // prompt tokens in the cache
    int generated = 0;  // tokens decoded after the prompt
    int32_t next = -1;  // the token to decode next while generating; -1 while prefilling
    int out = -1;       // batch index of this slot's output in the last batch; -1 none
  };
  // Starts the slot's next job (after its current one ended) with its cells dropped.
  void NextJob(Slot& s);
  // After a batch: reads each slot's output and moves it on (prefill done, next token, job done).
  void Advance();
  int32_t Greedy(int out) const;

  LlamaEngine::Impl& e_;
  std::vector<FillerSource> pool_;
  int max_cells_;
  std::vector<Slot> slots_;
  std::vector<FillerJobRecord> jobs_;   // every job that ran, with its progress
  std::vector<LoadBatchRecord> steps_;  // per batch: tokens decoding, measured, prefilling
  // The manifest has room for 64 KiB more than its first version (docs/capture-format.md): the
  // first jobs and batches are listed, every one is counted.
  static constexpr size_t kMaxRecorded = 200;
  int64_t n_jobs_ = 0, n_steps_ = 0;
};

// ---- Resolution (resolve.cpp): the effective value of every setting llama.cpp decides itself ----

// What decided the flash-attention kernel, and the value (nullopt: the device probe decides).
struct FlashAttnRule {
  std::optional<FlashAttn> value;
  std::string reason;
};
// The facts llama_init_from_model's flash-attention rules look at.
struct FlashAttnFacts {
  std::string arch;  // general.architecture
  SplitMode split_mode = SplitMode::kLayer;
  bool v_quantized = false;
  std::string cache_type_v;
};
// llama_init_from_model's rules, in its order: an architecture that forces it off, -sm tensor and
// a quantized V cache that force auto on; an explicit value stands; else nullopt (the probe).
FlashAttnRule FlashAttnByRule(FlashAttn requested, const FlashAttnFacts& facts);
// The device probe's verdict as llama.cpp logs it; nullopt when the log says neither.
std::optional<FlashAttnRule> FlashAttnFromProbeLog(const std::string& log);
// The verdict by behaviour: a few tokens through small contexts made with cp's settings and -fa
// auto, on and off, compared bit for bit; an error when auto matches neither.
Result<FlashAttnRule> FlashAttnByBehaviour(llama_model* model, const llama_context_params& cp);
// Sets e.knobs to the effective values of its freshly created context (asked: the request; cp:
// the context's parameters; init_log: llama.cpp's log of llama_init_from_model) and records in
// e.resolutions every one that differs, with its rule.
Status ResolveKnobs(LlamaEngine::Impl& e, const Knobs& asked, const llama_context_params& cp,
                    const std::string& init_log);

}  // namespace flipscope
