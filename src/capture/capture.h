// capture: the probe plan, the capture file (safetensors + manifest) writer/reader, and the
// `capture` stage that runs a workload through an engine into a capture file.
// File format: docs/capture-format.md.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "capture/manifest.h"
#include "checkpoint/model_info.h"
#include "engine/engine.h"
#include "util/names.h"
#include "util/status.h"
#include "util/util.h"
#include "workload/workload.h"

namespace flipscope {

// ---- Capture file ----------------------------------------------------------------------------

enum class StoreDtype { kF32, kBF16 };

// What a writer needs up front; the tensor table is fixed by it.
struct CaptureLayout {
  std::vector<int32_t> tokens;     // every token fed
  std::vector<int32_t> positions;  // probe positions, strictly ascending, each < tokens.size()
  int32_t n_vocab = 0;             // full-vocabulary width (0 when truncated only)
  StoreDtype store = StoreDtype::kF32;
  int32_t topk = 0;  // > 0: truncated capture (topk_ids / topk_logprobs, no logits)
};

// Streams rows into a temporary file; Commit() writes the final manifest and renames it into
// place. Destroyed without Commit(), nothing remains under the final name.
class CaptureWriter {
 public:
  // Creates PATH's temporary file and writes the tensor table; manifest may grow later.
  static Result<std::unique_ptr<CaptureWriter>> Create(const std::string& path, const CaptureLayout& layout,
                                                       const nlohmann::json& manifest);
  virtual ~CaptureWriter() = default;
  // Writes probe row `index` (rows may come in any order, each exactly once). For full
  // captures `logits` has n_vocab values; argmax and digest are taken from them (native F32).
  virtual Status WriteRow(int64_t index, std::span<const float> logits) = 0;
  // Truncated captures: top-k ids/logprobs (descending) and the source's greedy token.
  virtual Status WriteTopK(int64_t index, std::span<const int32_t> ids, std::span<const float> logprobs,
                           int32_t argmax) = 0;
  // Replaces the manifest (e.g. to add timings); must be called before Commit().
  virtual void SetManifest(const nlohmann::json& manifest) = 0;
  // Checks every row was written, writes argmax/digest and the manifest, fsyncs and renames.
  virtual Status Commit() = 0;
};

// The `__metadata__` key whose string value is the manifest JSON.
inline constexpr const char* kManifestKey = "flipscope.manifest";

// One entry of a capture file's tensor table, as stored.
struct CaptureTensor {
  std::string name;
  std::string dtype;  // safetensors dtype name: "I32", "U64", "F32", "BF16"
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // byte offset within the data section
  uint64_t bytes = 0;
};

// A capture file opened for reading (memory-mapped; rows are read on demand).
class CaptureReader {
 public:
  // Opens and validates the header against the file size; errors name the file and the fault.
  static Result<std::unique_ptr<CaptureReader>> Open(const std::string& path);
  virtual ~CaptureReader() = default;
  virtual const std::string& path() const = 0;
  // The manifest, parsed once when the file is opened.
  virtual const CaptureManifest& manifest() const = 0;
  virtual std::span<const int32_t> tokens() const = 0;
  virtual std::span<const int32_t> positions() const = 0;
  virtual std::span<const int32_t> argmax() const = 0;
  virtual std::span<const uint64_t> digest() const = 0;
  virtual int32_t n_vocab() const = 0;
  virtual bool truncated() const = 0;
  virtual int32_t topk() const = 0;
  virtual StoreDtype store() const = 0;
  // The tensor table in data order, and the file's size in bytes.
  virtual const std::vector<CaptureTensor>& tensors() const = 0;
  virtual uint64_t file_size() const = 0;
  // Row i as F32 (BF16 widened) into out (n_vocab values). Full captures only.
  virtual Status ReadRow(int64_t i, std::span<float> out) const = 0;
  // Row i as FP64 into out. Full captures only.
  virtual Status ReadRowF64(int64_t i, std::span<double> out) const = 0;
  // Truncated captures: the top-k ids and logprobs of row i.
  virtual std::span<const int32_t> TopKIds(int64_t i) const = 0;
  virtual std::span<const float> TopKLogprobs(int64_t i) const = 0;
  // Row i's stored logits as they lie in the file (n_vocab little-endian F32 or BF16 values, per
  // store()), valid while the reader lives; empty for truncated captures, a bad index, or readers
  // without a mapping (then use ReadRow). Lets a caller widen and scan in one pass.
  virtual std::span<const uint8_t> StoredRow(int64_t i) const {
    (void)i;
    return {};
  }
  // Hint: rows [begin, end) will not be read again soon, so a streaming pass can drop their
  // memory-mapped pages (the file stays in the page cache; reading them again stays correct).
  virtual void ReleaseRows(int64_t begin, int64_t end) const {
    (void)begin;
    (void)end;
  }
};

// ---- Two captures side by side (compare, branch, layers) ----------------------------------------

// The vocabulary size of a capture: its rows' width, else its manifest's model.n_vocab; 0 unknown.
int32_t VocabSize(const CaptureReader& cap);
// Whether two captures scored one workload: the same token ids, the same vocabulary size (where
// both are known) and the same tokenizer (where both manifests record it). Errors name both
// files and the first differing position or the sizes.
Status CheckSameWorkload(const CaptureReader& base, const CaptureReader& cand);

// The rows of the probe positions both captures hold, in position order: base[k] and cand[k]
// are the row indices of the k-th shared position (the one walk over two position lists).
struct ProbePairs {
  std::vector<int64_t> base, cand;
};
ProbePairs PairProbes(std::span<const int32_t> base_positions, std::span<const int32_t> cand_positions);

// A flip between two captures: a position both probe where their greedy tokens differ.
struct Flip {
  int32_t position = 0;
  int32_t base_token = 0, cand_token = 0;
};
// Every flip of two captures' probes (positions and argmax as stored), by position. The first N
// of these are the branch points of every fork follower (`flipscope branch`, an experiment's
// forks over HTTP and while capturing, which take the same first flips as the rows arrive) and
// the flips `flipscope layers` explains.
std::vector<Flip> Flips(std::span<const int32_t> base_positions, std::span<const int32_t> base_argmax,
                        std::span<const int32_t> cand_positions, std::span<const int32_t> cand_argmax);

// Which positions a fork follower may fork at (true: fork there); null: every position.
using ForkFilter = std::function<bool(int32_t position)>;
// Where a fork follower forks (branch's fork_where): kAssistant only where a deployed model
// writes the next token (ModelWrites(spans, p + 1): assistant messages and their tool calls),
// kAll everywhere.
enum class ForkScope { kAssistant, kAll };
template <>
struct Names<ForkScope> {
  static constexpr std::pair<ForkScope, const char*> v[] = {{ForkScope::kAssistant, "assistant"},
                                                            {ForkScope::kAll, "all"}};
};
// The fork filter of `scope` over a capture's workload (kAll: null); errors name unreadable spans.
Result<ForkFilter> ForkWhere(const CaptureReader& cap, ForkScope scope);

// The first-N rule of every fork follower, for flips met one at a time in position order (forks
// planned while the rows arrive): Take says whether a shared probe is a flip to fork, one where
// `where` allows forks among the first max such (0 = no limit). Flips where it does not are
// counted (elsewhere()) and never use up max. Fed every shared probe in order, it takes the
// first max entries of Flips() that `where` allows.
class FirstFlips {
 public:
  explicit FirstFlips(int max, ForkFilter where = nullptr) : max_(max), where_(std::move(where)) {}
  bool Take(int32_t position, int32_t base_token, int32_t cand_token) {
    if (base_token == cand_token) return false;
    if (where_ && !where_(position)) {
      ++elsewhere_;
      return false;
    }
    ++forkable_;
    if (max_ > 0 && taken_ >= max_) return false;
    ++taken_;
    return true;
  }
  int64_t forkable() const { return forkable_; }    // flips where forks are allowed, taken or not
  int64_t elsewhere() const { return elsewhere_; }  // flips where they are not

 private:
  int max_;
  ForkFilter where_;
  int64_t taken_ = 0, forkable_ = 0, elsewhere_ = 0;
};
// The first max (0 = all) of Flips(), by the same rule; *available counts them all.
std::vector<Flip> FirstNFlips(std::span<const int32_t> base_positions, std::span<const int32_t> base_argmax,
                              std::span<const int32_t> cand_positions, std::span<const int32_t> cand_argmax, int max,
                              int64_t* available);

}  // namespace flipscope

// ---- Probe plan and the capture stage --------------------------------------------------------

namespace flipscope {

// Which positions get their logits stored: every stride-th position (0, s, 2s, ... < n-1) plus
// every position of the full ranges. Position p's logits predict token p+1.
struct ProbePlan {
  int stride = 32;
  // "" | "tool_calls" (every position predicting a token of a tool call) | "A-B,C-D" (inclusive)
  std::string full;
  nlohmann::json ToJson() const;
};

// Probe positions for a workload of n_tokens with its spans; errors name a bad range.
Result<std::vector<int32_t>> PlanProbes(const ProbePlan& plan, int32_t n_tokens, const std::vector<Span>& spans);

// Forks followed during the capture itself, so that branch following needs no second pass: at
// each probe row `plan` may name a future's first token; each future goes to `sink`. The rows
// are the same as without forks (the prefill chunks do not change).
struct CaptureForks {
  ForkPlanner plan;  // empty: no forks
  int max_tokens = 64;
  ExtendFn extend;  // empty: every future stops at max_tokens
  std::optional<DecodeGrammar> grammar;  // futures decode under it (LlamaEngine::SetGrammar); none: free
  PlannedForkSink sink;
};

// The engine a capture runs: linked llama.cpp, the FP64 reference, or a server over HTTP.
enum class EngineKind { kLlama, kExact, kOpenai };
template <>
struct Names<EngineKind> {
  static constexpr std::pair<EngineKind, const char*> v[] = {
      {EngineKind::kLlama, "llama"}, {EngineKind::kExact, "exact"}, {EngineKind::kOpenai, "openai"}};
};

// Everything one capture needs; the manifest records it with defaults resolved.
struct CaptureRequest {
  std::string model_path, workload_path, out_path;
  WorkloadOptions workload;
  EngineKind engine = EngineKind::kLlama;
  Knobs knobs;       // llama only
  HttpOptions http;  // openai only; the model file then only tokenizes
  ProbePlan plan;
  StoreDtype store = StoreDtype::kF32;
  Log log;             // status lines and progress bars (bars on a terminal only)
  CaptureForks forks;  // not part of the request's identity: forks do not change the rows
  // Under load (knobs.load > 0): transcripts or text the fillers are cut from, each rendered and
  // tokenized like the workload; empty = the workload itself.
  std::vector<std::string> load_text;
};

// Ok when every knob set away from its default is one the request's engine uses (llama: all;
// exact: threads; openai: load, load_seed) and the values pass Knobs::Validate(); else an error
// naming the knobs that do not apply, or the bad value.
Status CheckKnobs(EngineKind engine, const Knobs& knobs);

// Under --replay served: per token of w, whether a deployed model wrote it (ModelWrites), for
// LlamaEngine::SetWritten. An error naming workload_path when w has no messages (plain text,
// token ids: no roles, so no assistant turns to serve).
Result<std::vector<uint8_t>> ServedWritten(const Workload& w, const std::string& workload_path);

// Renders and tokenizes the workload, runs it teacher-forced through the engine (llama.cpp, or a
// server over HTTP: a truncated capture) and writes the capture atomically. Returns the final manifest
// as a reader of the file sees it (CaptureManifest::FromJson of what was written). On error
// nothing is left at out_path.
Result<CaptureManifest> RunCapture(const CaptureRequest& req);

// What every capture of one model file over one workload shares: hashing a multi-gigabyte model
// and rendering a long session cost seconds, so a caller that captures several times (repeats,
// configurations of one model file, the floor under load) prepares this once and passes it in.
struct CaptureSource {
  ModelInfo model;  // the model file's facts, its path and SHA-256 among them
  std::string workload_path;
  WorkloadOptions workload_options;
  Workload workload;  // rendered and tokenized with the model's vocabulary
  std::string workload_sha256;
  // Under load: req.load_text rendered and tokenized like the workload, with the manifest's
  // entries for them; load_sources stays null when the request it was prepared from ran alone.
  std::vector<std::string> load_text;
  std::vector<FillerSource> load_pool;
  nlohmann::json load_sources;
};
// Reads req's model file and workload (and its load texts when req.knobs.load > 0); errors are
// RunCapture's.
Result<CaptureSource> PrepareCapture(const CaptureRequest& req);
// RunCapture over a prepared source, which must be of req's model file, workload and workload
// options (load texts it lacks are read for this capture). Its manifest and rows are those of
// RunCapture(req).
Result<CaptureManifest> RunCapture(const CaptureRequest& req, const CaptureSource& source);

// The manifest's "request": everything that decides the capture's content, as asked (knobs
// unresolved). A run reuses an existing capture only when its request is equal.
nlohmann::json CaptureRequestJson(const CaptureRequest& req, const std::string& model_sha256,
                                  const std::string& workload_sha256);

// ---- The floor under load (docs/load.md) ----------------------------------------------------

// Captures req alone (load 0) at req.out_path, then `repeats` times under req.knobs.load (>= 1)
// at LoadRepeatPath(out, r), compares each with the alone one (CompareToAlone) and writes the
// summary atomically beside it (OUT.load.json): how many of the repeats are bit-identical.
Result<nlohmann::json> RunLoadFloor(const CaptureRequest& req, int repeats);
// OUT.safetensors -> OUT.load<r>.safetensors.
std::string LoadRepeatPath(const std::string& alone, int r);
// Rows of `loaded` bit-identical to `alone` (digests) and the probes whose greedy token differs;
// an error when the two do not share tokens and probe positions.
Result<nlohmann::json> CompareToAlone(const std::string& alone, const std::string& loaded);

// The capture format's name for a storage dtype ("f32" / "bf16"), and back.
std::string StoreName(StoreDtype d);
Result<StoreDtype> ParseStore(const std::string& name);

}  // namespace flipscope

// ---- Re-running a capture --------------------------------------------------------------------

namespace flipscope {

// What re-creates a capture's rows: its model file (checked against the recorded SHA-256) and its
// resolved knobs, the chunking (-b, -ub) among them.
struct CaptureReplay {
  std::string model_path, model_sha256;
  Knobs knobs;
};
// The capture's model file (for a server's capture: its tokenizer), checked against the recorded
// SHA-256; knobs left default. hashes caches each model file's SHA-256 between calls.
Result<CaptureReplay> ModelOf(const CaptureReader& cap, std::map<std::string, std::string>* hashes);
// The replay of a full llama-engine capture; errors name the capture and say why `stage` (e.g.
// "branch") cannot re-run it. hashes caches each model file's SHA-256 between calls.
Result<CaptureReplay> ReplayOf(const CaptureReader& cap, const std::string& stage,
                               std::map<std::string, std::string>* hashes);

}  // namespace flipscope
