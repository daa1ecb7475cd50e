// records/engine_records.h: the records an engine gives of itself and of its last pass that the
// capture stage writes into a manifest: its description (Engine::Describe(), a manifest's
// "engine" block), the load it ran beside the measured sequence (Engine::LoadRecord()) and a
// served replay over HTTP (HttpEngine::ServedRecord()). Part of the records library (records.h
// holds the smaller records they are made of); their JSON is in engine_json.cpp, the only code
// that knows their keys.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "records/records.h"

namespace flipscope {

// A JSON value flipscope does not model but keeps whole for its file (a server's answer about
// itself, a BLAS library's report, a launch as it was given): only serializers look inside.
class OpaqueJson {
 public:
  OpaqueJson();  // null
  explicit OpaqueJson(const nlohmann::json& value);
  // The value as given (null when none was).
  const nlohmann::json& get() const;
  bool is_null() const;

 private:
  std::shared_ptr<const nlohmann::json> value_;  // immutable, so copies may share it
};

// How a record read from a file differs from what its typed members write: the top-level keys
// whose value the members do not model or give otherwise (an unknown key, a mistyped value, a
// block another version wrote), and the keys the members write that the file did not hold. Only
// the serializers read it; it makes any file's record write back byte for byte.
struct AsRead {
  OpaqueJson differing;              // an object of key -> the value as read (null: none)
  std::vector<std::string> missing;  // keys the file lacked
};

// The AsRead of a record read from the object `stored` whose typed members write `written`.
AsRead AsReadOf(const nlohmann::json& stored, const nlohmann::json& written);
// Makes `written` what the file held: drops the keys it lacked, restores its differing values.
void ApplyAsRead(nlohmann::json& written, const AsRead& as_read);

// A knob's value as files and records hold it: none, a switch, a count, a size or fraction, a
// name, or a list of fractions (-ts).
using KnobValue = std::variant<std::nullptr_t, bool, int64_t, double, std::string, std::vector<double>>;
// Knob values by key (KnobTable()'s keys), as a manifest's "knobs" holds them.
using KnobValues = std::map<std::string, KnobValue>;
// The value as JSON: null, a boolean, an integer, a number, a string or an array of numbers.
nlohmann::json ToJson(const KnobValue& v);
// Knob values as one JSON object.
nlohmann::json ToJson(const KnobValues& values);
// The value of a JSON scalar or array of numbers; none (null) for anything else.
KnobValue KnobValueFromJson(const nlohmann::json& j);
// Every member of a JSON object as a knob value (anything else: none).
KnobValues KnobValuesFromJson(const nlohmann::json& j);
// The value as a line of text: a name as it is, anything else as its JSON ("auto", "8", "0.5").
std::string KnobText(const KnobValue& v);

// A setting llama.cpp ran with another value than the one asked for (an auto value resolved, a
// size clamped or rounded), and the rule that decided it. Manifests hold the effective values as
// "knobs" and these under the engine's "resolved": key -> {requested, effective, reason}.
struct KnobResolution {
  std::string key;      // KnobTable() key, e.g. "flash_attn"
  KnobValue requested;  // as asked: "auto", 0
  KnobValue effective;  // as it ran: "on", 8192
  std::string reason;   // the rule, e.g. "quantized V cache (-ctv q8_0) requires it"
};
// The manifest block of resolutions: key -> {requested, effective, reason}.
nlohmann::json ToJson(const std::vector<KnobResolution>& resolutions);

// What the llama engine says of itself beyond the common facts.
struct LlamaEngineFacts {
  std::string llama_cpp, ggml, system_info, model_desc;
  std::optional<EngineSource> source;  // none in blocks written before it was recorded
  std::vector<std::string> backends;
  std::vector<EngineDevice> devices;
  std::vector<KnobResolution> resolved;
  KernelPathRecord kernel_path;
  bool kv_unified = true, swa_full = true;
};

// The exact engine's check of one ggml type's dequantization (elements decoded, how many of them
// ggml's float decode gets otherwise than an FP64 decode; checked: a decoder exists for the type).
struct DequantCheck {
  int64_t elements = 0, inexact = 0;
  bool checked = false;
};
// The device of the exact engine's CUDA pass.
struct ExactDeviceFacts {
  std::string kind, name, description, compute_capability;
  double memory_gib = 0;
  std::string driver_cuda, runtime_cuda, cublas, route;
};
// What the FP64 engine says of itself: its version, the model's architecture, the BLAS it runs,
// how the weights were widened and checked, its attention, its load time and its device.
struct ExactEngineFacts {
  std::string version, precision, architecture;
  OpaqueJson blas;  // as the BLAS library reports itself
  std::string dequant_route, dequant_check;
  bool dequant_exact = false;
  std::map<std::string, DequantCheck> dequant_types;
  int64_t query_block = 0;
  std::string softmax;
  double load_s = 0;
  std::optional<ExactDeviceFacts> device;  // the CUDA pass only
};

// What an HTTP engine says of the server it reads and how it asks it.
struct ServerEngineFacts {
  std::string api, url, endpoint, served_model;  // url with its credentials redacted
  OpaqueJson server;                             // what the server reported about itself
  int64_t server_context = 0;
  std::string server_note;
  int64_t logprobs = 0, topk = 0;
  std::string api_key_env;  // the variable's name only
  double timeout_s = 0;
  int64_t retries = 0;
  // A server flipscope started: the launch as asked and as it ran (the block "launch").
  struct Launch {
    OpaqueJson asked, run;
  };
  std::optional<Launch> launch;
};

// Engine::Describe(): everything about an engine that can change the numbers (a manifest's
// "engine" block): its settings as flags, the knobs it ran with, the ggml variables set, and the
// facts of its kind.
struct EngineDescription {
  std::string flags;
  KnobValues knobs;
  std::map<std::string, std::string> env;  // NumericsEnvironment(); written only when non-empty
  // monostate: an engine this version does not know (read from a file; every key is kept as read).
  std::variant<std::monostate, LlamaEngineFacts, ExactEngineFacts, ServerEngineFacts> facts;
  AsRead as_read;  // empty unless read from a file
};
// The manifest's engine block, byte for byte what the engines have always written (and, for a
// block read from a file, what the file held).
nlohmann::json ToJson(const EngineDescription& d);
// Any writer's engine block ("engine": llama, exact or openai; older exact blocks say "name");
// none when it is not an object.
std::optional<EngineDescription> EngineDescriptionFromJson(const nlohmann::json& j);

// A filler job the llama engine ran (PlanFillerJob's job and how far it got).
struct FillerJobRecord {
  int64_t slot = 0, job = 0;
  std::string source;  // the pool source's name
  int64_t offset = 0, length = 0, generate = 0, chunk = 0;
  bool warm = false;
  int64_t prefilled = 0, generated = 0;
  bool operator==(const FillerJobRecord&) const = default;
};
// A filler request an HTTP engine sent: its job, when it ran (seconds from the load's start) and
// the HTTP status (none: no answer).
struct FillerRequestRecord {
  int64_t slot = 0, job = 0;
  std::string source;
  int64_t offset = 0, length = 0, generate = 0;
  double start_s = 0, end_s = 0;
  std::optional<int64_t> status;
};
// One shared batch of the llama engine: tokens of fillers decoding, of the measured sequence, of
// fillers prefilling.
struct LoadBatchRecord {
  int64_t decoding = 0, measured = 0, prefilling = 0;
};
// The load the llama engine ran: its jobs and batches (the first ones, and how many in all).
struct LlamaLoadRecord {
  int64_t fillers = 0, seed = 0, cells_per_filler = 0, context_batch = 0;
  std::vector<FillerJobRecord> jobs;
  int64_t jobs_total = 0;
  std::vector<LoadBatchRecord> batches;
  int64_t batches_total = 0;
};
// The load an HTTP engine ran: its filler requests and how many overlapped the measured one.
struct ServerLoadRecord {
  int64_t fillers = 0, seed = 0, cells_per_filler = 0;
  double measured_start_s = 0, measured_end_s = 0;
  int64_t overlapping = 0;
  std::vector<FillerRequestRecord> requests;
};
// Engine::LoadRecord(): what the load did during the last pass.
using EngineLoadRecord = std::variant<LlamaLoadRecord, ServerLoadRecord>;
// The manifest's load block as the engine gives it (the capture stage adds its sources).
nlohmann::json ToJson(const EngineLoadRecord& r);
// A load block as either engine wrote it (the llama engine's has "jobs"); none when it is not an
// object. Keys beyond the engine's (the capture stage's sources) are left to the caller.
std::optional<EngineLoadRecord> EngineLoadRecordFromJson(const nlohmann::json& j);

// A served replay over HTTP (HttpEngine::ServedRecord()): the requests, the proof that a decode
// step's row is the server's own, and each kept row's source and cache figures.
struct ServerServedRecord {
  std::string mechanism, api;
  int64_t requests = 0, generations = 0, generated_tokens = 0, generation_matched = 0;
  int64_t not_served = 0;  // planned probes no decode step reached
  // Rows computed with other tokens in one batch: not kept.
  struct Recomputed {
    int64_t position = 0, cached = 0, computed = 0;
  };
  std::vector<Recomputed> recomputed;
  int64_t proof_compared = 0, proof_identical = 0;
  std::vector<int64_t> proof_differs;  // the first positions where they differ
  std::vector<int64_t> positions;      // per kept row
  std::vector<std::string> source;     // per kept row: "decode", "generation" or "prompt"
  std::vector<int64_t> cached, computed;
  double seconds = 0, requests_per_s = 0;
};
// The manifest's served block as the engine gives it (the capture stage adds planned_probes).
nlohmann::json ToJson(const ServerServedRecord& r);
// A served block an HTTP engine wrote; none when it is not an object.
std::optional<ServerServedRecord> ServerServedRecordFromJson(const nlohmann::json& j);

}  // namespace flipscope
