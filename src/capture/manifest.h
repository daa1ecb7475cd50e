// The capture manifest, typed: the capture stage builds one and writes it with ToJson(); the
// reader parses a file's manifest once with FromJson(), and every other stage reads the struct.
// Only manifest.cpp knows the manifest's keys. File format: docs/capture-format.md.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "checkpoint/model_info.h"
#include "engine/engine.h"
#include "records/engine_records.h"
#include "records/records.h"
#include "util/status.h"
#include "workload/workload.h"

namespace flipscope {

// The manifest's "workload" block: the workload's record as the workload stage wrote it (source,
// lengths, template, tools) and its spans, which are kept apart because they are read as spans.
struct ManifestWorkload {
  nlohmann::json record = nlohmann::json::object();  // the block without "spans", written as is
  std::vector<Span> spans;
  // Read only: why "spans" could not be read (ok when they were, or when there are none); stages
  // that need spans refuse such a capture, compare describes its flips without them.
  Status spans_status;
  // Read only, from the record: the workload file, "template" or "<tool_call> in content" (empty
  // when not recorded), and the tool definitions (null when not recorded).
  std::string path, tool_call_form;
  nlohmann::json tools;
};

// The manifest's "knobs": the knobs the engine ran with, as it recorded them (Describe()'s).
struct ManifestKnobs {
  KnobValues values;
  AsRead as_read;  // a file's values the typed ones do not hold (serializer only)
};

// The manifest's "probe_plan": every stride-th position, the full ranges ("" none), the probes.
struct ManifestProbePlan {
  int64_t stride = 0;
  std::string full;
  int64_t n_probes = 0;
  AsRead as_read;
};

// The manifest's "served": how the transcript was fed under served replay, by the llama engine
// (its plan, with the rule that planned it and a note when nothing was decoded) or over HTTP (the
// engine's requests and proof, and the probes that were planned).
struct ManifestServed {
  std::variant<ServedPlan, ServerServedRecord> record;
  std::string rule, note;                 // the llama engine's ("": none)
  std::optional<int64_t> planned_probes;  // over HTTP
  AsRead as_read;
};

// A text the load's fillers were cut from: the workload itself ({name "workload", path}) or a
// file of --load-text with its SHA-256 and tokens.
struct LoadSourceRecord {
  std::string name, path;
  std::optional<std::string> sha256;
  std::optional<int64_t> n_tokens;
};
// The manifest's "load": what the engine's load did (Engine::LoadRecord()) and its sources.
struct ManifestLoad {
  EngineLoadRecord record;
  std::vector<LoadSourceRecord> sources;
  AsRead as_read;
};

// The manifest's "request": everything that decides the capture's content, as asked (knobs
// unresolved; CaptureRequestOf makes it). A run reuses an existing capture only when its request
// is the same. Members a writer leaves out at their default are written only when set.
struct ManifestRequest {
  std::string model_sha256, workload_sha256;
  WorkloadOptions workload;  // "format" and "chat_template": how the workload was read
  // As asked: every knob (the llama engine; "replay" only when not prefill, the identity of the
  // captures made before it existed), the exact engine's threads and device, or a server's load.
  KnobValues knobs;
  int64_t stride = 0;  // "probe_plan": every stride-th position and the full ranges
  std::string full;
  StoreDtype store = StoreDtype::kF32;
  std::string tool_version;
  EngineKind engine = EngineKind::kLlama;  // written when not llama
  std::map<std::string, std::string> env;  // ggml's variables (llama engine); written when set
  std::vector<std::string> load_text;      // the load's texts; written when set
  // A server's request (openai): its flags (a launched server's url as "http://launched"), the
  // note on its launch, and the launch flipscope made (null: none).
  struct Http {
    std::string flags, server_note;
    OpaqueJson launch;
  };
  std::optional<Http> http;
  AsRead as_read;  // a file's keys the members do not hold (serializer only)
};
// Two requests are the same when they are the same document: a request read from a file holds
// what this version does not model (a later writer's key) and matches only a request that does.
bool operator==(const ManifestRequest& a, const ManifestRequest& b);

// The blocks as the manifest writes them.
nlohmann::json ToJson(const ManifestKnobs& k);
nlohmann::json ToJson(const ManifestProbePlan& p);
nlohmann::json ToJson(const ManifestServed& s);
nlohmann::json ToJson(const ManifestLoad& l);
nlohmann::json ToJson(const ManifestRequest& r);
nlohmann::json ToJson(const std::vector<LoadSourceRecord>& sources);

struct CaptureManifest {
  std::string format = "flipscope.capture";
  int format_version = 1;
  std::string tool_version;      // the flipscope version that wrote it
  std::string created;           // UTC, ISO 8601
  ModelInfo model;               // read back tolerantly: absent facts stay default
  std::string tokenizer_sha256;  // empty: not recorded
  ManifestWorkload workload;
  EngineRecord engine;  // the "engine" block (Engine::Describe()), read once
  // The resolved knobs as recorded (none when absent) and, when read, their parse: the knobs
  // re-run a capture with (an error naming the bad key).
  std::optional<ManifestKnobs> knobs;
  Result<Knobs> parsed_knobs = Status::Error("the manifest has no knobs");
  Replay replay = Replay::kPrefill;             // knobs.replay; prefill when not recorded (or a name it does not know)
  std::optional<ManifestProbePlan> probe_plan;  // none when absent
  std::string store = "f32";                    // the rows' storage dtype name
  bool truncated = false;
  int32_t topk = 0;  // > 0: a server's top-k capture; the manifest then has a "truncation" note
  // The request (CaptureRequestOf): a capture is reused only when its request is the same; none
  // when absent.
  std::optional<ManifestRequest> request;
  // Read only, from the request: how the workload was read (format, chat template); the defaults
  // when not recorded.
  WorkloadOptions workload_options;
  // Known after the rows: what the capture cost (none: not recorded), the served-replay record
  // and the load record (none: absent).
  std::optional<CaptureTimings> timings;
  std::optional<ManifestServed> served;
  std::optional<ManifestLoad> load;
  // Read only: the manifest as stored, every key of another writer included (inspect prints it).
  nlohmann::json raw;

  // Figures of the records above, for a terminal line (0 or none where a record lacks them): the
  // workload's tokens, the probes, prefill tokens per second, and under served replay the
  // positions fed alone.
  int64_t NTokens() const;
  int64_t NProbes() const;
  double TokensPerSecond() const;
  std::optional<int64_t> FedSingly() const;

  // The manifest document; byte for byte what flipscope has always written for these values.
  nlohmann::json ToJson() const;
  // Reads any writer's manifest object: a missing key or a wrong type leaves its default.
  static CaptureManifest FromJson(const nlohmann::json& j);
};

}  // namespace flipscope
