// Knobs: the one table of numerics knobs, and their JSON round trip, validation and flags.
#include "engine/knobs.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "util/names.h"

namespace flipscope {

// The spellings of the enum knobs' values (and a future's stop), in the order help and errors
// list them.
template <>
struct Names<FlashAttn> {
  static constexpr std::pair<FlashAttn, const char*> v[] = {
      {FlashAttn::kOn, "on"}, {FlashAttn::kOff, "off"}, {FlashAttn::kAuto, "auto"}};
};
template <>
struct Names<SplitMode> {
  static constexpr std::pair<SplitMode, const char*> v[] = {{SplitMode::kNone, "none"},
                                                            {SplitMode::kLayer, "layer"},
                                                            {SplitMode::kRow, "row"},
                                                            {SplitMode::kTensor, "tensor"}};
};
template <>
struct Names<Repack> {
  static constexpr std::pair<Repack, const char*> v[] = {{Repack::kOn, "on"}, {Repack::kOff, "off"}};
};

namespace {

// Bytes and elements per block of each KV cache type, as ggml's type traits have them (a block
// is one element for the float types): written out so that reading knobs needs no llama.cpp
// library (results/ reads them); engine_test checks them against ggml_type_size/ggml_blck_size.
struct KvBlock {
  KvCacheType type;
  int bytes, elements;
};
constexpr KvBlock kKvBlocks[] = {
    {KvCacheType::kF32, 4, 1},      {KvCacheType::kF16, 2, 1},    {KvCacheType::kBF16, 2, 1},
    {KvCacheType::kQ8_0, 34, 32},   {KvCacheType::kQ4_0, 18, 32}, {KvCacheType::kQ4_1, 20, 32},
    {KvCacheType::kIQ4_NL, 18, 32}, {KvCacheType::kQ5_0, 22, 32}, {KvCacheType::kQ5_1, 24, 32}};

template <typename T>
std::string Expected() {
  if constexpr (std::is_same_v<T, int>)
    return "an integer";
  else if constexpr (std::is_same_v<T, std::string>)
    return "a string";
  else if constexpr (std::is_enum_v<T>)
    return Choices<T>();
  else
    return "a list of numbers";
}

template <auto M>
KnobValue Get(const Knobs& k) {
  using T = std::remove_cvref_t<decltype(k.*M)>;
  if constexpr (std::is_enum_v<T>)
    return std::string(NameOf(k.*M));
  else if constexpr (std::is_same_v<T, int>)
    return int64_t(k.*M);
  else if constexpr (std::is_same_v<T, std::vector<float>>)
    return std::vector<double>((k.*M).begin(), (k.*M).end());
  else
    return k.*M;
}

template <auto M>
Status Set(Knobs& k, const KnobValue& v) {
  using T = std::remove_cvref_t<decltype(k.*M)>;
  if constexpr (std::is_enum_v<T>) {
    const auto* name = std::get_if<std::string>(&v);
    const auto e = name ? FromName<T>(*name) : std::nullopt;
    // A KV cache type's refusal is a whole message (FromJson and SetKnobFromText pass it on as it is).
    if constexpr (std::is_same_v<T, KvCacheType>)
      if (!e)
        return Status::InvalidArgument(fmt::format(
            "unknown KV cache type '{}' for {} (one of {})", KnobText(v),
            M == &Knobs::cache_type_k ? "cache_type_k (-ctk)" : "cache_type_v (-ctv)", Choices<KvCacheType>()));
    if (!e) return Status::Error(Expected<T>());
    k.*M = *e;
  } else if constexpr (std::is_same_v<T, int>) {
    const auto* n = std::get_if<int64_t>(&v);
    if (!n) return Status::Error(Expected<T>());
    k.*M = int(*n);
  } else if constexpr (std::is_same_v<T, std::string>) {
    const auto* text = std::get_if<std::string>(&v);
    if (!text) return Status::Error(Expected<T>());
    k.*M = *text;
  } else {
    const auto* list = std::get_if<std::vector<double>>(&v);
    if (!list) return Status::Error(Expected<T>());
    k.*M = T(list->begin(), list->end());
  }
  return Status::Ok();
}

// The most filler sequences a load may have (llama.cpp's own limit on sequences is 256).
constexpr int kMaxLoad = 64;

}  // namespace

std::string_view ToString(FlashAttn v) { return NameOf(v); }
std::string_view ToString(SplitMode v) { return NameOf(v); }
std::string_view ToString(Repack v) { return NameOf(v); }
std::string_view ToString(Replay v) { return NameOf(v); }

const std::vector<KnobInfo>& KnobTable() {
  static const std::vector<KnobInfo> table = {
      {"flash_attn", "--flash-attn", "-fa", "Flash attention: on, off or auto", true, Get<&Knobs::flash_attn>,
       Set<&Knobs::flash_attn>},
      {"cache_type_k", "--cache-type-k", "-ctk", "K cache type (f32 f16 bf16 q8_0 q4_0 q4_1 iq4_nl q5_0 q5_1)", true,
       Get<&Knobs::cache_type_k>, Set<&Knobs::cache_type_k>},
      {"cache_type_v", "--cache-type-v", "-ctv", "V cache type (as -ctk)", true, Get<&Knobs::cache_type_v>,
       Set<&Knobs::cache_type_v>},
      {"batch_size", "-b,--batch-size", "", "Logical batch size (prefill chunk)", true, Get<&Knobs::n_batch>,
       Set<&Knobs::n_batch>},
      {"ubatch_size", "--ubatch-size", "-ub", "Physical batch size", true, Get<&Knobs::n_ubatch>,
       Set<&Knobs::n_ubatch>},
      {"ctx_size", "-c,--ctx-size", "", "Context size; 0 = the model's training context", false, Get<&Knobs::n_ctx>,
       Set<&Knobs::n_ctx>},
      {"threads", "-t,--threads", "", "Threads; 0 = all hardware threads", false, Get<&Knobs::n_threads>,
       Set<&Knobs::n_threads>},
      {"n_gpu_layers", "--n-gpu-layers", "-ngl", "Layers on the GPU; -1 = all", false, Get<&Knobs::n_gpu_layers>,
       Set<&Knobs::n_gpu_layers>},
      {"split_mode", "--split-mode", "-sm", "Multi-GPU split: none, layer, row or tensor", false,
       Get<&Knobs::split_mode>, Set<&Knobs::split_mode>},
      {"tensor_split", "--tensor-split", "-ts", "Fractions per GPU, e.g. 3,1", false, Get<&Knobs::tensor_split>,
       Set<&Knobs::tensor_split>},
      {"device", "--device", "-dev", "Devices, comma separated (see --version); none = the CPU alone", false,
       Get<&Knobs::devices>, Set<&Knobs::devices>},
      {"repack", "--repack", "", "Weights repacked into ggml's extra CPU buffer types (AMX, CPU_REPACK): on or off",
       false, Get<&Knobs::repack>, Set<&Knobs::repack>},
      {"load", "--load", "", "Filler sequences sharing every batch with the measured one (0 = alone; docs/load.md)",
       false, Get<&Knobs::load>, Set<&Knobs::load>},
      {"load_seed", "--load-seed", "", "Seed of the fillers' choice, lengths and timing under --load", false,
       Get<&Knobs::load_seed>, Set<&Knobs::load_seed>},
      {"replay", "--replay", "",
       "How the transcript is computed: prefill (all in -b chunks) or served (what the model wrote decoded one "
       "token per step, the rest prefilled; docs/served.md)",
       false, Get<&Knobs::replay>, Set<&Knobs::replay>},
  };
  return table;
}

const KnobInfo* FindKnob(const std::string& key) {
  for (const auto& k : KnobTable())
    if (key == k.key) return &k;
  return nullptr;
}

Status SetKnobFromText(Knobs& k, const KnobInfo& info, const std::string& text) {
  const KnobValue current = info.get(k);
  KnobValue value;
  if (std::holds_alternative<int64_t>(current)) {
    size_t used = 0;
    try {
      value = int64_t(std::stoi(text, &used));
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != text.size()) return Status::Error(fmt::format("'{}' is not an integer", text));
  } else if (std::holds_alternative<std::vector<double>>(current)) {
    // llama.cpp's -ts takes "3,1" or "3/1".
    std::vector<double> list;
    size_t start = 0;
    while (start < text.size()) {
      size_t sep = text.find_first_of(",/", start);
      std::string item = text.substr(start, sep == std::string::npos ? std::string::npos : sep - start);
      size_t used = 0;
      try {
        list.push_back(std::stof(item, &used));
      } catch (...) {
        used = 0;
      }
      if (used == 0 || used != item.size()) return Status::Error(fmt::format("'{}' is not a number", item));
      start = sep == std::string::npos ? text.size() : sep + 1;
    }
    value = std::move(list);
  } else {
    // A named value ("on", "layer"): the error quotes what was given beside what is accepted.
    if (Status st = info.set(k, KnobValue(text)); !st.ok())
      return st.code() == StatusCode::kInvalidArgument
                 ? st
                 : Status::Error(fmt::format("'{}' is not {}", text, st.message()));
    return Status::Ok();
  }
  return info.set(k, value);
}

const std::vector<KvCacheType>& KvCacheTypes() {
  static const std::vector<KvCacheType> types = [] {
    std::vector<KvCacheType> out;
    for (const auto& [e, name] : Names<KvCacheType>::v) out.push_back(e);
    return out;
  }();
  return types;
}

double KvTypeBytesPerElement(KvCacheType t) {
  for (const KvBlock& b : kKvBlocks)
    if (t == b.type) return double(b.bytes) / double(b.elements);
  return std::nan("");
}

bool KvTypeQuantized(KvCacheType t) {
  return t != KvCacheType::kF32 && t != KvCacheType::kF16 && t != KvCacheType::kBF16;
}

KnobValues Knobs::Values() const {
  KnobValues values;
  for (const auto& k : KnobTable()) values[k.key] = k.get(*this);
  return values;
}

nlohmann::json Knobs::ToJson() const { return flipscope::ToJson(Values()); }

Result<Knobs> Knobs::FromJson(const nlohmann::json& j) {
  Knobs k;
  if (!j.is_object()) return Status::Error("knobs must be an object");
  for (auto& [key, v] : j.items()) {
    const KnobInfo* info = FindKnob(key);
    if (!info) return Status::Error("unknown knob '" + key + "'");
    if (Status st = info->set(k, KnobValueFromJson(v)); !st.ok())
      return Status::Error(st.code() == StatusCode::kInvalidArgument
                               ? st.message()
                               : fmt::format("knob '{}' must be {}", key, st.message()));
  }
  return k;
}

Status Knobs::Validate() const {
  // The KV cache types are checked where they are read (an unknown name never becomes a Knobs).
  if (KvTypeQuantized(cache_type_v) && flash_attn == FlashAttn::kOff)
    return Status::InvalidArgument("a quantized V cache (cache_type_v = " + std::string(NameOf(cache_type_v)) +
                                   ") needs flash attention; llama.cpp refuses it with flash_attn off (-fa off)");
  if (n_ctx < 0) return Status::InvalidArgument("ctx_size (-c) must be >= 0");
  if (n_batch < 1 || n_ubatch < 1) return Status::InvalidArgument("batch_size (-b) and ubatch_size (-ub) must be >= 1");
  if (n_threads < 0) return Status::InvalidArgument("threads (-t) must be >= 0");
  if (load < 0 || load > kMaxLoad)
    return Status::InvalidArgument(fmt::format("{} must be from 0 to {}", OptionName("load"), kMaxLoad));
  if (load_seed < 0) return Status::InvalidArgument("load_seed (--load-seed) must be >= 0");
  if (replay == Replay::kServed && load > 0)
    return Status::InvalidArgument(OptionName("replay") + " served does not run under " + OptionName("load") +
                                   " > 0 yet: the fillers' batches are "
                                   "planned for prefill chunks");
  return Status::Ok();
}

std::string KnobInfo::ShownFlag() const {
  const std::string flag = *llama_flag ? llama_flag : long_flag;
  return flag.substr(0, flag.find(','));
}

namespace {
// Knob k at value v as a command line spells it: llama.cpp's flag where it has one ("-ctk q8_0"),
// --repack's off as llama.cpp's switch -nr.
std::string FlagText(const KnobInfo& k, const KnobValue& v) {
  if (std::string(k.key) == "repack") return KnobText(v) == "off" ? "-nr" : "--repack on";
  const std::string flag = k.ShownFlag();
  // -ts as llama.cpp reads it ("3,1"), each fraction as the float it is.
  const auto* list = std::get_if<std::vector<double>>(&v);
  const std::string text =
      list ? fmt::format("{}", fmt::join(std::vector<float>(list->begin(), list->end()), ",")) : KnobText(v);
  return flag + " " + text;
}
}  // namespace

std::string Knobs::ToFlags() const {
  static const Knobs defaults;
  std::string s;
  for (const auto& k : KnobTable()) {
    const KnobValue v = k.get(*this);
    if (!k.always_in_flags && v == k.get(defaults)) continue;
    // The load is a measuring condition, not a setting of llama.cpp: a launch command has no
    // flag for it (the manifest's knobs and "load" block record it).
    if (std::string(k.key).rfind("load", 0) == 0) continue;
    // Neither is the replay: it decides how flipscope feeds the tokens (the manifest's knobs and
    // "served" block record it), which a server does by itself.
    if (std::string(k.key) == "replay") continue;
    s += " " + FlagText(k, v);
  }
  return s.empty() ? s : s.substr(1);
}

std::string Knobs::FlagsChangedFrom(const Knobs& base) const {
  std::string s;
  for (const auto& k : KnobTable()) {
    const KnobValue v = k.get(*this);
    if (v == k.get(base) || std::string(k.key) == "replay") continue;
    s += " " + FlagText(k, v);
  }
  return s.empty() ? s : s.substr(1);
}

}  // namespace flipscope
