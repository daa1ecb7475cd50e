// capture/capture_run.h: the capture stage: the probe plan, RunCapture (a workload through an
// engine into a capture file), the floor under load and re-running a capture. Part of the capture
// stage (capture/capture.h is its interface).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "capture/capture_file.h"
#include "capture/manifest.h"
#include "checkpoint/model_info.h"
#include "engine/engine.h"
#include "records/records.h"
#include "util/names.h"
#include "util/status.h"
#include "util/util.h"
#include "workload/workload.h"

namespace flipscope {

// ---- Probe plan and the capture stage --------------------------------------------------------

// Which positions get their logits stored: every stride-th position (0, s, 2s, ... < n-1) plus
// every position of the full ranges. Position p's logits predict token p+1.
struct ProbePlan {
  int stride = 32;
  // "" | "tool_calls" (every position predicting a token of a tool call) | "A-B,C-D" (inclusive)
  std::string full;
};

// Probe positions for a workload of n_tokens with its spans; errors name a bad range.
Result<std::vector<int32_t>> PlanProbes(const ProbePlan& plan, int32_t n_tokens, const std::vector<Span>& spans);

// Forks followed during the capture itself, so that branch following needs no second pass: at
// each probe row `plan` may name a future's first token; each future goes to `sink`. The rows
// are the same as without forks (the prefill chunks do not change).
struct CaptureForks {
  ForkPlanner plan;  // empty: no forks
  int max_tokens = 64;
  ExtendFn extend;                       // empty: every future stops at max_tokens
  std::optional<DecodeGrammar> grammar;  // futures decode under it (LlamaEngine::SetGrammar); none: free
  PlannedForkSink sink;
};

// Futures one side already decoded while it was captured (the experiment runner forks during
// its captures): position -> the future from that side's own first token there. `reproduced`:
// the row at each position is bit-for-bit the side's capture's (true for the capture's own
// pass; for a repeat of the baseline, whether the repeat's row equals the compared capture's).
struct DecodedFutures {
  std::map<int32_t, Future> at;
  std::map<int32_t, bool> reproduced;
  int max_tokens = 0;                               // the token budget they were decoded with
  int max_call_tokens = 0;                          // and the cap on an open tool call (0: none)
  FutureDecoding decoding = FutureDecoding::kFree;  // the decoding they were asked with (ForkDecoding::used)
  std::string source;                               // the capture file that decoded them
};

// Keeps a capture's decoded futures beside it (CAPTURE.forks.json, written atomically), stamped
// with the creation times of the capture and of `base` (the capture the forks were planned against;
// the capture itself when it chose them alone).
Status WriteDecoded(const std::string& capture, const std::string& base, const DecodedFutures& d);
// The futures kept beside a capture; nullopt when absent, unreadable, or older than either capture.
std::optional<DecodedFutures> ReadDecoded(const std::string& capture, const std::string& base);
// Forks a capture decodes at `points` (probe positions), each from its own greedy token there,
// free (no grammar), max_tokens each with no extension; the futures go to *out.
CaptureForks OwnForks(std::set<int32_t> points, int max_tokens, std::shared_ptr<DecodedFutures> out);

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
// The decode steps of served replay over n tokens: the positions p fed alone, where the model
// wrote p and p + 1 (the engine's rule), from ServedWritten's flags.
int64_t ServedDecodeSteps(std::span<const uint8_t> written, int64_t n);

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
  // entries for them; load_sources stays none when the request it was prepared from ran alone.
  std::vector<std::string> load_text;
  std::vector<FillerSource> load_pool;
  std::optional<std::vector<LoadSourceRecord>> load_sources;
};
// Reads req's model file and workload (and its load texts when req.knobs.load > 0); errors are
// RunCapture's. The workload's warnings go to req.log here, once ("warning: ..."), as RunCapture's do.
Result<CaptureSource> PrepareCapture(const CaptureRequest& req);
// RunCapture over a prepared source, which must be of req's model file, workload and workload
// options (load texts it lacks are read for this capture). Its manifest and rows are those of
// RunCapture(req).
Result<CaptureManifest> RunCapture(const CaptureRequest& req, const CaptureSource& source);

// The manifest's "request": everything that decides the capture's content, as asked (knobs
// unresolved). A run reuses an existing capture only when its request is equal.
ManifestRequest CaptureRequestOf(const CaptureRequest& req, const std::string& model_sha256,
                                 const std::string& workload_sha256);

// ---- The floor under load (docs/load.md) ----------------------------------------------------

// Captures req alone (load 0) at req.out_path, then `repeats` times under req.knobs.load (>= 1)
// at LoadRepeatPath(out, r), compares each with the alone one (CompareToAlone) and writes the
// summary atomically beside it (OUT.load.json): how many of the repeats are bit-identical.
Result<LoadFloorRecord> RunLoadFloor(const CaptureRequest& req, int repeats);
// OUT.safetensors -> OUT.load<r>.safetensors.
std::string LoadRepeatPath(const std::string& alone, int r);
// Rows of `loaded` bit-identical to `alone` (digests) and the probes whose greedy token differs;
// an error when the two do not share tokens and probe positions.
Result<LoadComparison> CompareToAlone(const std::string& alone, const std::string& loaded);

// ---- Re-running a capture --------------------------------------------------------------------

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
