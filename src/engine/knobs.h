// engine/knobs.h: the numerics knobs (Knobs, KnobTable()), their named values and how llama.cpp
// resolved them. Part of the engine stage (engine/engine.h is its interface).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "records/engine_records.h"
#include "util/names.h"
#include "util/status.h"

namespace flipscope {

// The knobs that take one of a few named values, as llama.h has them (llama_flash_attn_type,
// llama_split_mode); in JSON, TOML and flags they are spelled as llama.cpp spells them.
enum class FlashAttn { kAuto, kOn, kOff };              // -fa auto|on|off
enum class SplitMode { kNone, kLayer, kRow, kTensor };  // -sm none|layer|row|tensor
enum class Repack { kOn, kOff };                        // --repack on|off (llama.cpp: -nr for off)
// Replay (how the transcript is computed) is a mode of records/modes.h.
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

  // Every knob's value by its key (KnobTable()'s order is the table's, the map's is by key).
  KnobValues Values() const;
  // The knobs as a JSON object (keys are the long llama.cpp names).
  nlohmann::json ToJson() const;
  // Reads knobs from a JSON object, with defaults for missing keys; error names the bad key.
  static Result<Knobs> FromJson(const nlohmann::json& j);
  // Checks values (types, ranges, combinations llama.cpp refuses).
  Status Validate() const;
  // The flags that reproduce these knobs on llama-server / llama-cli.
  std::string ToFlags() const;
  // The flags of every knob whose value differs from base's (the load's as flipscope's --load,
  // the replay not: it is no flag of llama.cpp); "" when none does.
  std::string FlagsChangedFrom(const Knobs& base) const;
};

// A setting llama.cpp ran otherwise than asked (KnobResolution) is a record of
// records/engine_records.h.

// One numerics knob: its key in JSON and experiment files, its flags, its help and how to read
// and write it. The table drives Knobs' JSON, flags, the CLI's options and experiment keys.
struct KnobInfo {
  const char* key;         // JSON / TOML key, e.g. "flash_attn"
  const char* long_flag;   // flipscope's flag, e.g. "--flash-attn"
  const char* llama_flag;  // llama.cpp's spelling when it differs (one dash, several letters), or ""
  const char* help;        // one line for --help
  bool always_in_flags;    // ToFlags() writes it even at its default
  KnobValue (*get)(const Knobs&);
  // Sets the member from a value (a name, a count, a list of fractions as KnobValue holds them);
  // the error says what was expected (without the key).
  Status (*set)(Knobs&, const KnobValue&);
  // The flag as a command line shows it: llama.cpp's spelling (-fa), else flipscope's first form
  // (-t of "-t,--threads").
  std::string ShownFlag() const;
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

}  // namespace flipscope
