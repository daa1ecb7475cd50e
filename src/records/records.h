// records: the vocabulary and the records that stages hand each other, below every stage that
// produces or reads them (engine, capture, branch, results): the named modes (records/modes.h),
// the version that writes every file, and the typed records an engine gives of itself and of its
// last pass. JSON appears only in their serializers (records_json.cpp): a record written and read
// back is the same bytes as the engines have always written.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "records/modes.h"

namespace flipscope {

// The llama.cpp tree an engine was built from (an engine block's "llama_source").
struct EngineSource {
  std::string release;  // "llama-cpp-python 0.3.36", "" for a tree given by path
  std::string commit, build;
};
// {"release", "commit", "build"}.
nlohmann::json ToJson(const EngineSource& s);
// The source of a block; none when it is not an object (a missing or mistyped key reads "").
std::optional<EngineSource> EngineSourceFromJson(const nlohmann::json& j);

// A device ggml saw (an engine block's "devices").
struct EngineDevice {
  std::string name, description;
  std::optional<double> memory_total;  // bytes; none when not recorded
};
// The devices as an array; a memory total is written in whole bytes, none as null.
nlohmann::json ToJson(const std::vector<EngineDevice>& devices);
// Every entry of an array (anything else: none); a missing or mistyped field reads empty.
std::vector<EngineDevice> EngineDevicesFromJson(const nlohmann::json& j);

// The MiB of a model's weights in each buffer type (CPU, CPU_Mapped, CPU_REPACK, CUDA0...).
using WeightBufferSizes = std::map<std::string, double>;

// The CPU kernel path, which changes the numbers like any knob (an engine block's
// "kernel_path"): the instruction-set features ggml's CPU backend uses, the llama.cpp build's
// CPU options, the buffer types that hold the weights, the extra ones among them (repacking,
// AMX), and a one-line summary that two captures share exactly when they ran the same path.
struct KernelPathRecord {
  std::vector<std::string> cpu_features;
  std::string llama_build;
  WeightBufferSizes weight_buffers;
  std::vector<std::string> extra_buffer_types;
  std::string summary;
};
nlohmann::json ToJson(const KernelPathRecord& k);

// Wall seconds of the parts of an engine's last pass, as the exact engine splits its work.
struct PassPartTimes {
  double embed_s = 0, widen_s = 0, project_s = 0, attention_s = 0, mlp_s = 0, logits_s = 0, rows_s = 0;
  std::optional<double> recurrent_s;        // a model with recurrent (DeltaNet) layers only
  std::optional<double> device_memory_gib;  // the CUDA pass only
};
// The manifest's timings.parts: each part's seconds; the optional ones only when set.
nlohmann::json ToJson(const PassPartTimes& t);

// What a capture cost (a manifest's "timings"): making the engine and its load pool, the rows'
// pass and its tokens per second, the forks followed during it and their decoding, the whole
// capture, and the exact engine's split of its pass.
struct CaptureTimings {
  double load_s = 0, prefill_s = 0, tokens_per_s = 0, fork_decode_s = 0, total_s = 0;
  int64_t forks = 0;
  std::optional<PassPartTimes> parts;
};
nlohmann::json ToJson(const CaptureTimings& t);
// A manifest's timings as any writer left them: a missing key or a wrong type reads as 0 (parts:
// absent); none when the block is not an object.
std::optional<CaptureTimings> CaptureTimingsFromJson(const nlohmann::json& j);

// How the llama engine fed a transcript under served replay (its last pass): the positions fed
// alone, the llama_decode calls, the prefilled segments and chunks between them, the tokens the
// model wrote and their runs, and the decode steps' seconds and rate.
struct ServedPlan {
  int64_t fed_singly = 0, decode_calls = 0, prefill_segments = 0, prefill_chunks = 0;
  int64_t written_tokens = 0, written_runs = 0;
  double decode_s = 0, decode_tokens_per_s = 0;
};
// The manifest's served block as the engine gives it (the capture stage adds its rule).
nlohmann::json ToJson(const ServedPlan& p);
// A served block the llama engine wrote (a missing key or a wrong type reads 0); none when it is
// not an object.
std::optional<ServedPlan> ServedPlanFromJson(const nlohmann::json& j);

// A probe whose greedy token differs between a capture made alone and one made under load.
struct LoadFlip {
  int32_t position = 0, alone = 0, loaded = 0;
};
// One capture under load against the alone one: its rows bit-identical to the alone capture's
// (digests) and the probes whose greedy token differs.
struct LoadComparison {
  std::string capture;  // the loaded capture's path
  int64_t probes = 0, identical_rows = 0, flips = 0;
  bool bit_identical = false;  // every row identical
  std::vector<LoadFlip> flipped;
};
nlohmann::json ToJson(const LoadComparison& c);
// The floor under load (docs/load.md): the alone capture, the load, each repeat under it, and
// how many repeats are bit-identical to the alone capture.
struct LoadFloorRecord {
  std::string alone;
  int load = 0, load_seed = 0;
  std::vector<LoadComparison> repeats;
  int bit_identical_repeats = 0, of = 0;
  std::string summary_path;  // where the summary was written (OUT.load.json); not part of it
};
// The summary file's document (without summary_path).
nlohmann::json ToJson(const LoadFloorRecord& f);

// The flipscope version that writes manifests, results and reports (the project's version, as the
// build configured it).
std::string_view FlipscopeVersion();

}  // namespace flipscope
