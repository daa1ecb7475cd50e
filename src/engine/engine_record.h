// engine/engine_record.h: what an engine recorded of itself (Engine::Describe(): a capture
// manifest's "engine" block, a results configuration's "engine" and the run's "environment"),
// and the facts of it that stages, the recipe and the report decide on or show. Part of the
// engine stage (engine/engine.h is its interface); it needs no llama.cpp library.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/knobs.h"
#include "records/records.h"

namespace flipscope {

// The block's "devices" (EngineDevice) and "llama_source" (EngineSource) are records of
// records/records.h.

// The launch of a server configuration's server (the block's "launch"): what the experiment
// asked and what ran. The two sub-blocks are the launch settings as written, kept whole.
struct EngineLaunch {
  nlohmann::json asked, run;  // null when not recorded
  // Read from them: the command that ran (its {port} filled in) and its URL (none when not
  // recorded), and the variables set on top of flipscope's environment (as text: a value that
  // is not a string is its JSON).
  std::optional<std::string> command, url;
  std::map<std::string, std::string> env;
  nlohmann::json asked_command;  // the command as the experiment file gave it (with {port}); null: none

  // Reads a launch block ({"asked", "run"}); none when it is not an object.
  static std::optional<EngineLaunch> Of(const nlohmann::json& block);
  // The block: {"asked", "run"}.
  nlohmann::json ToJson() const { return {{"asked", asked}, {"run", run}}; }
};

// The block, kept as written (its keys differ by engine and version; a file reads back byte for
// byte), and its facts read once. Empty text: not recorded.
struct EngineRecord {
  nlohmann::json record;    // as written (null: absent)
  std::string name;         // "llama", "exact", "openai" (older exact captures say "name")
  std::string flags;        // the effective settings as llama.cpp flags
  std::string kernel_path;  // kernel_path.summary: the CPU kernels and weight buffers that ran
  std::string llama_build;  // kernel_path.llama_build: the llama.cpp build's CPU options
  std::string llama_cpp, ggml, system_info;
  std::optional<EngineSource> source;         // none when not recorded
  std::optional<std::string> server_version;  // a server engine's: set when it records a server
  std::string url;                            // a server engine's URL (credentials redacted)
  std::vector<std::string> backends;
  std::vector<EngineDevice> devices;
  std::vector<KnobResolution> resolved;  // settings llama.cpp ran otherwise than asked, by key
  std::optional<bool> swa_full;          // whether every sliding-window cell was kept
  std::optional<EngineLaunch> launch;
  nlohmann::json knobs;  // the knobs it ran with, as it recorded them (effective values; null: none)
  // ggml's environment variables set when it ran (NumericsEnvironment; "env"); empty: none set.
  std::map<std::string, std::string> env;

  // Reads any writer's block, kept as given: a missing key or a wrong type leaves its member
  // empty (every member, for a value that is not an object).
  static EngineRecord Of(const nlohmann::json& block);
  // The block as written.
  const nlohmann::json& ToJson() const { return record; }
};

// Environment variables as one line, "K=v K2=v2" in name order ("" for none): how the report,
// compare and the replays show the ggml variables a capture ran under (not shell-quoted).
std::string EnvText(const std::map<std::string, std::string>& env);

// The settings llama.cpp decided itself, one line each ("flash_attn auto ran as on: <rule>"),
// leaving out the defaults that always resolve (a context or thread count of 0, all layers on a
// GPU) and any line in except.
std::vector<std::string> ResolvedNotes(const EngineRecord& engine, const std::vector<std::string>& except = {});

}  // namespace flipscope
