// engine: runs a model. Teacher-forced prefill that hands over logits rows at chosen positions,
// and (llama only) forking the sequence at a position to decode a greedy future.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/runtime.h"
#include "util/names.h"
#include "util/status.h"

namespace flipscope {

// The knobs that take one of a few named values, as llama.h has them (llama_flash_attn_type,
// llama_split_mode); in JSON, TOML and flags they are spelled as llama.cpp spells them.
enum class FlashAttn { kAuto, kOn, kOff };              // -fa auto|on|off
enum class SplitMode { kNone, kLayer, kRow, kTensor };  // -sm none|layer|row|tensor
enum class Repack { kOn, kOff };                        // --repack on|off (llama.cpp: -nr for off)
// How the transcript is computed (not a llama.cpp setting; docs/served.md): prefill feeds every
// token in -b chunks; served feeds what the model wrote one token per llama_decode call, as a
// deployed agent loop decoded it, and prefills what it read.
enum class Replay { kPrefill, kServed };  // --replay prefill|served
// The KV cache types llama.cpp accepts for -ctk / -ctv (ggml's type names); read once where a knob
// enters (flags, JSON, TOML, a manifest's knobs), an unknown name refused there.
enum class KvCacheType { kF32, kF16, kBF16, kQ8_0, kQ4_0, kQ4_1, kIQ4_NL, kQ5_0, kQ5_1 };
template <>
struct Names<KvCacheType> {
  static constexpr std::pair<KvCacheType, const char*> v[] = {
      {KvCacheType::kF32, "f32"},       {KvCacheType::kF16, "f16"},   {KvCacheType::kBF16, "bf16"},
      {KvCacheType::kQ8_0, "q8_0"},     {KvCacheType::kQ4_0, "q4_0"}, {KvCacheType::kQ4_1, "q4_1"},
      {KvCacheType::kIQ4_NL, "iq4_nl"}, {KvCacheType::kQ5_0, "q5_0"}, {KvCacheType::kQ5_1, "q5_1"}};
};
// The spelling of a value in flags and JSON: "auto", "layer", "off"...
std::string_view ToString(FlashAttn v);
std::string_view ToString(SplitMode v);
std::string_view ToString(Repack v);
std::string_view ToString(Replay v);

// Numerics knobs, named as llama.cpp names them. Defaults are llama.cpp's own. KnobTable() is
// the one list of their keys, flags and help; a new knob is a member here and an entry there.
struct Knobs {
  FlashAttn flash_attn = FlashAttn::kAuto;       // -fa
  KvCacheType cache_type_k = KvCacheType::kF16;  // -ctk
  KvCacheType cache_type_v = KvCacheType::kF16;  // -ctv
  int n_ctx = 0;                                 // -c; 0 = the model's training context
  int n_batch = 2048;                            // -b logical batch (prefill chunk)
  int n_ubatch = 512;                            // -ub physical batch
  int n_threads = 0;                             // -t; 0 = all hardware threads
  int n_gpu_layers = -1;                         // -ngl; -1 = all layers (where a GPU backend exists)
  SplitMode split_mode = SplitMode::kLayer;      // -sm
  std::vector<float> tensor_split;               // -ts
  std::string devices;                           // -dev, comma separated; empty = default; "none" = CPU only
  Repack repack = Repack::kOn;                   // --repack (-nr for off): weights in ggml's extra CPU buffer types
  int load = 0;                                  // --load N: N filler sequences share the batches (docs/load.md)
  int load_seed = 0;                             // --load-seed: which fillers, their lengths and timing
  Replay replay = Replay::kPrefill;              // --replay: prefill, or served (docs/served.md)

  // The knobs as a JSON object (keys are the long llama.cpp names).
  nlohmann::json ToJson() const;
  // Reads knobs from a JSON object, with defaults for missing keys; error names the bad key.
  static Result<Knobs> FromJson(const nlohmann::json& j);
  // Checks values (types, ranges, combinations llama.cpp refuses).
  Status Validate() const;
  // The flags that reproduce these knobs on llama-server / llama-cli.
  std::string ToFlags() const;
};

// A setting llama.cpp ran with another value than the one asked for (an auto value resolved, a
// size clamped or rounded), and the rule that decided it. Manifests hold the effective values as
// "knobs" and these under the engine's "resolved": key -> {requested, effective, reason}.
struct KnobResolution {
  std::string key;           // KnobTable() key, e.g. "flash_attn"
  nlohmann::json requested;  // as asked: "auto", 0
  nlohmann::json effective;  // as it ran: "on", 8192
  std::string reason;        // the rule, e.g. "quantized V cache (-ctv q8_0) requires it"
};
// The manifest block of resolutions: key -> {requested, effective, reason}.
nlohmann::json ResolutionsToJson(const std::vector<KnobResolution>& resolutions);

// One numerics knob: its key in JSON and experiment files, its flags, its help and how to read
// and write it. The table drives Knobs' JSON, flags, the CLI's options and experiment keys.
struct KnobInfo {
  const char* key;         // JSON / TOML key, e.g. "flash_attn"
  const char* long_flag;   // flipscope's flag, e.g. "--flash-attn"
  const char* llama_flag;  // llama.cpp's spelling when it differs (one dash, several letters), or ""
  const char* help;        // one line for --help
  bool always_in_flags;    // ToFlags() writes it even at its default
  nlohmann::json (*get)(const Knobs&);
  // Sets the member from a JSON value; the error says what was expected (without the key).
  Status (*set)(Knobs&, const nlohmann::json&);
};
// Every knob, in the order flags and JSON list them.
const std::vector<KnobInfo>& KnobTable();
// The entry for a JSON key, or nullptr.
const KnobInfo* FindKnob(const std::string& key);
// Sets a knob from command-line text ("8", "on", "3,1"); the error says what was expected.
Status SetKnobFromText(Knobs& k, const KnobInfo& info, const std::string& text);

// Every KV cache type, in Names<KvCacheType>'s order.
const std::vector<KvCacheType>& KvCacheTypes();
// Bytes per element of a KV cache type from ggml's type and block sizes, e.g. q8_0 -> 34/32.
double KvTypeBytesPerElement(KvCacheType type);
// Whether a KV cache type is quantized (not f32, f16 or bf16).
bool KvTypeQuantized(KvCacheType type);

// ---- Load: other sequences sharing the batches with the measured one (docs/load.md) ----------

// Real text the fillers are cut from: its name (for the manifest) and its token ids.
struct FillerSource {
  std::string name;
  std::vector<int32_t> tokens;
};

// One request a filler slot runs: the prompt tokens[offset, offset + length) of pool source
// `source`, prefilled `chunk` tokens per batch, then `generate` greedy tokens (0: prefill only).
// A warm job's prompt is prefilled before the measured sequence starts, so it decodes from the
// first batch on.
struct FillerJob {
  int slot = 0, index = 0;  // filler slot 1..N and the job's number within it
  int source = 0, offset = 0, length = 0, generate = 0, chunk = 0;
  bool warm = false;
  nlohmann::json ToJson(const std::vector<FillerSource>& pool) const;
};

// Job `index` of filler `slot` under `seed`: a pure function of its arguments, so a load is
// reproducible. A job holds at most max_cells cache cells (prompt + generated); pool non-empty,
// every source at least 2 tokens, max_cells >= 16.
FillerJob PlanFillerJob(uint64_t seed, int slot, int index, const std::vector<FillerSource>& pool, int max_cells);

// Cache cells each of `load` fillers may hold at once, so that they and the measured sequence
// (n_tokens, plus `reserve` cells for forks) fit n_ctx; an error when fewer than 16 are left.
Result<int> FillerCells(int load, int n_ctx, int n_tokens, int reserve);

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

// A future decoded from a fork point.
struct Future {
  std::vector<int32_t> tokens;
  std::vector<float> probs;  // the probability of each chosen token
  double seconds = 0;        // decoding time
  FutureStop stop = FutureStop::kBudget;
  // "grammar": decoded under the fork grammar (LlamaEngine::SetGrammar); "free": unconstrained
  // (no grammar, or the transcript before the point already left it).
  std::string decoding = "free";
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
  // Engine name, version, commit, build flags, devices and the resolved knobs.
  virtual nlohmann::json Describe() const = 0;
  // The token sequences the load's fillers are cut from (knob load > 0); without a call, the
  // prefilled tokens themselves. Engines without load ignore it.
  virtual void SetLoadPool(std::vector<FillerSource> pool) { (void)pool; }
  // What the load did during the last Prefill (fillers, their sources and lengths, batch shapes);
  // null when it ran alone.
  virtual nlohmann::json LoadRecord() const { return nullptr; }
};

// Fork requests for LlamaEngine::PrefillWithForks: at position p, after the teacher-forced
// prefix [0, p] is in the cache, decode greedily from `first` for max_tokens tokens.
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
  nlohmann::json Describe() const override;
  // Like Prefill, with the same prefill chunks (so the same numerics), and at every fork
  // request copies the sequence's cache up to its position, decodes greedily in the copy and
  // drops it. Requests must be sorted by position. Needs n_seq_max >= 2.
  Status PrefillWithForks(std::span<const int32_t> tokens, std::span<const int32_t> probes, const RowSink& sink,
                          std::span<const ForkRequest> forks, int max_tokens, const ForkSink& fork_sink,
                          const ProgressFn& progress, const ExtendFn& extend = nullptr);
  // Like PrefillWithForks, with the forks chosen by `plan` while the rows arrive (at probe
  // positions only), so a capture can follow its own disagreements without a second pass.
  Status PrefillWithPlannedForks(std::span<const int32_t> tokens, std::span<const int32_t> probes, const RowSink& sink,
                                 const ForkPlanner& plan, int max_tokens, const PlannedForkSink& fork_sink,
                                 const ProgressFn& progress, const ExtendFn& extend = nullptr);
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
  nlohmann::json LoadRecord() const override;
  // Under --replay served: per token of the next passes, whether a deployed model wrote it
  // (ModelWrites of the workload's spans). Position p is then fed alone, at its position, when
  // the model wrote tokens p and p+1 (its logits predict a written token from a written one: the
  // decode path); the rest is prefilled in -b chunks from each segment's start. A served pass
  // without them fails.
  void SetWritten(std::vector<uint8_t> written);
  // What the last served pass ran (tokens fed singly, llama_decode calls, prefill segments and
  // chunks, written tokens, the decode steps' time); null after a prefill.
  nlohmann::json ServedRecord() const;
  struct Impl;

 private:
  explicit LlamaEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// ---- Servers over HTTP: vLLM and SGLang (docs/engines.md) ---------------------------------------

// A server's API: kVllm POST /v1/completions; kSglang POST /generate; kLlamaServer POST
// /completion (served replay only: it returns no prompt log-probabilities).
enum class HttpApi { kVllm, kSglang, kLlamaServer };
template <>
struct Names<HttpApi> {
  static constexpr std::pair<HttpApi, const char*> v[] = {
      {HttpApi::kVllm, "vllm"}, {HttpApi::kSglang, "sglang"}, {HttpApi::kLlamaServer, "llama-server"}};
};

// How to reach a server that returns prompt log-probabilities, and what to ask it for.
struct HttpOptions {
  std::string url;  // base URL, e.g. http://gpu-host:8000 (no path)
  HttpApi api = HttpApi::kVllm;
  std::string served_model;  // vLLM's request "model"; empty = the first id of GET /v1/models
  int logprobs = 20;         // k per position; -1 (vLLM) = the whole vocabulary
  std::string api_key_env;   // env var holding a Bearer key; the key itself is never recorded
  double timeout_s = 600;    // per request (a long prompt is one request)
  int retries = 4;           // extra attempts after 5xx, 429, timeouts and refused connections
  double backoff_s = 1;      // delay before the first retry, doubled before each next one
  std::string server_note;   // free text for the manifest, e.g. the server's launch flags
  int load = 0;              // concurrent filler requests while the measured one runs (knob load)
  int load_seed = 0;         // knob load_seed
  // A server flipscope started (flipscope run's `launch`): what was asked ({"command", "env",
  // "health", "port"}; part of a capture's identity) and what happened ({"command" as run, "pid",
  // "log", "startup_s"}); both null otherwise. Recorded in the manifest under engine.launch.
  nlohmann::json launch, launched;
  // Called before every retry; an error ends the retries with it (a launched server that exited).
  std::function<Status()> alive;
  // Checks the values; errors name the field.
  Status Validate() const;
  // The flags that reproduce these options on `flipscope capture` (no key, URL redacted).
  std::string ToFlags() const;
};

// Top-k rows at chosen positions (a served replay over HTTP keeps only the rows it can show were
// computed as served): row i is ids / logprobs [i*k, (i+1)*k), most probable first.
struct TopKRows {
  int32_t k = 0;
  std::vector<int32_t> positions, ids, argmax;
  std::vector<float> logprobs;
};
// The probes a served replay over HTTP can hand over: the decode steps (the model wrote p and
// p+1) and each message's generation prompt's last row (it did not write p but wrote p+1).
std::vector<int32_t> ServedHttpPositions(std::span<const int32_t> probes, std::span<const uint8_t> written);

// A server over HTTP. Rows are truncated: the top-k ids and log-probabilities the server returns,
// argmax = its top-1 id. The whole token sequence is sent as one request, because every
// position's distribution depends on its whole prefix.
class HttpEngine : public Engine {
 public:
  // Reads the key from opts.api_key_env, asks the server for its model id, version and context
  // limit (recorded in Describe()); n_vocab is the local model's, to check returned ids.
  static Result<std::unique_ptr<HttpEngine>> Create(const HttpOptions& opts, int32_t n_vocab);
  ~HttpEngine() override;
  int32_t n_vocab() const override;
  // k of every row (n_vocab when logprobs == -1).
  int32_t topk() const;
  // Sends tokens as one request and hands over the top-k rows at probes; errors name the URL.
  Status Prefill(std::span<const int32_t> tokens, std::span<const int32_t> probes, const RowSink& sink,
                 const ProgressFn& progress) override;
  // Engine "openai", the API, the redacted URL, the server's model id / version / limits as
  // reported, the note, the request parameters and "flags".
  nlohmann::json Describe() const override;
  void SetLoadPool(std::vector<FillerSource> pool) override;
  // The filler requests sent during the last Prefill (load > 0), and how many overlapped it.
  nlohmann::json LoadRecord() const override;
  // Served replay (docs/served.md, "Over HTTP"; api vllm, sglang or llama-server): for each run of
  // written tokens, a greedy generation from its generation prompt, then one request per decode step
  // (position p fed alone over the server's cached prefix [0, p)). Returns the rows at the probes
  // ServedHttpPositions keeps: a decode step's row when the server reports 1 token computed over p
  // cached; else the generation's row when it had followed the transcript up to p (a decode step
  // too); else none (listed in ServedRecord as recomputed). Errors name the URL, or the server flag
  // that its prefix cache or cache counts need.
  Result<TopKRows> ServedReplay(std::span<const int32_t> tokens, std::span<const int32_t> probes,
                                std::span<const uint8_t> written, const ProgressFn& progress);
  // What the last ServedReplay sent and what the server reported: requests, per row its source and
  // cached / computed counts, the rows not kept, and the proof (one-token rows against the generation's).
  nlohmann::json ServedRecord() const;
  // Greedy continuation of prompt at temperature 0: up to max_new_tokens generated tokens (fewer
  // when the server stops at end of generation), each with its probability; errors name the URL.
  Result<Future> Complete(std::span<const int32_t> prompt, int max_new_tokens);
  struct Impl;

 private:
  explicit HttpEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// llama-server's greedy choice after a prompt, and the top log-probabilities of the raw (pre-
// sampling) distribution it chose from, most probable first (none when the chosen token's piece is
// an incomplete UTF-8 character: llama-server leaves them out then).
struct ServedChoice {
  int32_t token = -1;
  std::vector<int32_t> ids;
  std::vector<double> logprobs;
};
// POST opts.url/completion to llama-server with the prompt as token ids, n_predict 1, n_probs k,
// post_sampling_probs false, return_tokens and temperature 0, keeping its prompt cache (so prompts that extend
// the previous one cost only their new tokens); errors name the URL or the field that is wrong.
Result<ServedChoice> LlamaServerChoice(const HttpOptions& opts, std::span<const int32_t> prompt, int k,
                                       int32_t n_vocab);

// How to start a server and know it is up (docs/engines.md, "Servers flipscope starts").
struct LaunchOptions {
  std::string command;                     // run as /bin/sh -c COMMAND in a process group of its own
  std::map<std::string, std::string> env;  // set on top of flipscope's environment
  std::string url;                         // base URL where it answers
  std::string health = "/health";          // GET path that answers 200 once the server is ready
  double startup_timeout_s = 600;          // the longest wait for the health check
  double stop_timeout_s = 10;              // after SIGTERM to the group, SIGKILL follows this late
  std::string log_path;                    // its stdout and stderr (appended)
};

// A running server started from LaunchOptions; destroying it stops it.
class ServerProcess {
 public:
  // Starts the command and waits until GET url+health answers 200. Errors say whether the
  // process ended first (how, and its log's last line) or the time-out passed (it is then stopped).
  static Result<std::unique_ptr<ServerProcess>> Start(const LaunchOptions& opts);
  ~ServerProcess();
  // Ok while the process runs; else an error saying how it ended and where its log is.
  Status Alive();
  // SIGTERM to the process group, SIGKILL after stop_timeout_s, then waits (at most 10 s more)
  // until no process of the group runs; idempotent.
  void Stop();
  int pid() const;
  // Seconds from the start to the first healthy answer.
  double startup_seconds() const;
  struct Impl;

 private:
  explicit ServerProcess(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A TCP port on 127.0.0.1 that was free a moment ago (for `{port}` in a launch command).
Result<int> FreePort();

// url with any "user:password@" removed, for manifests and messages.
std::string RedactUrl(const std::string& url);

// Token id -> text (special tokens rendered) from a model's vocabulary, loaded vocab-only (fast,
// no weights). The function owns the vocabulary; ids outside it give "".
Result<std::function<std::string(int32_t)>> LoadDetokenizer(const std::string& model_path);

// Index of the largest value, ties to the lowest index (the capture format's argmax rule).
int32_t ArgmaxLowest(std::span<const float> row);

// The compiled-in (registered) ggml backends, e.g. {"CPU"} or {"CUDA", "CPU"}.
std::vector<std::string> Backends();
// The devices ggml sees, with their memory.
nlohmann::json Devices();
// The CPU kernel path, which changes the numbers like any knob: the instruction-set features
// ggml's CPU backend uses here, the llama.cpp build's CPU options, the buffer types that hold the
// weights (weight_buffers: type -> MiB), the extra ones among them (repacking, AMX), and a
// one-line "summary" that two captures share exactly when they ran the same path.
nlohmann::json KernelPath(const nlohmann::json& weight_buffers);
// Where the linked llama.cpp came from: {"release": "llama-cpp-python X" or "" for a checkout of
// one's own, "commit": the tree's llama.cpp commit, "build": its CPU build options}.
nlohmann::json LlamaSource();
// The buffer types among weight_buffers that are ggml's extra CPU types (CPU_REPACK, AMX...):
// neither plain host memory nor a device's own buffer.
std::vector<std::string> ExtraBufferTypes(const nlohmann::json& weight_buffers);
// The "<type> model buffer size = <n> MiB" lines of llama.cpp's model-load log, as type -> MiB.
nlohmann::json WeightBuffers(const std::string& load_log);

}  // namespace flipscope
