// `doctor` checks that need only metadata: sampler settings (GGUF general.sampling.* against a
// generation_config.json) and the training context against rope scaling.
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <map>

#include "checkpoint/doctor.h"

namespace flipscope {
namespace {

// A sampler knob as llama.cpp's GGUF key, Hugging Face's generation_config key and llama.cpp's flag.
struct Knob {
  const char* gguf;
  const char* hf;
  const char* flag;
};
constexpr Knob kKnobs[] = {{"temp", "temperature", "--temp"},
                           {"top_p", "top_p", "--top-p"},
                           {"top_k", "top_k", "--top-k"},
                           {"min_p", "min_p", "--min-p"},
                           {"penalty_repeat", "repetition_penalty", "--repeat-penalty"}};

using Settings = std::map<std::string, double>;  // keyed by the GGUF name

std::string List(const Settings& m) {
  std::string s;
  for (const auto& [k, v] : m) s += fmt::format("{}{} {:g}", s.empty() ? "" : ", ", k, v);
  return s;
}

std::string Flags(const Settings& m) {
  std::string s = "pass";
  for (const auto& k : kKnobs)
    if (auto it = m.find(k.gguf); it != m.end()) s += fmt::format(" {} {:g}", k.flag, it->second);
  return s;
}

double Number(const GgufMeta& meta, const std::string& key) { return std::atof(meta(key).c_str()); }

}  // namespace

std::vector<Finding> CheckSamplerSettings(const GgufMeta& meta, const nlohmann::json& cfg) {
  Settings in_gguf, in_config;
  for (const auto& k : kKnobs) {
    if (auto v = meta(std::string("general.sampling.") + k.gguf); !v.empty()) in_gguf[k.gguf] = std::atof(v.c_str());
    if (cfg.is_object() && cfg.contains(k.hf) && cfg[k.hf].is_number()) in_config[k.gguf] = cfg[k.hf].get<double>();
  }
  std::vector<Finding> out;
  auto add = [&](Severity s, std::string message, std::string fix = "") {
    out.push_back({"sampling", s, std::move(message), std::move(fix)});
  };
  if (in_gguf.empty() && in_config.empty())
    add(Severity::kInfo,
        "no sampler settings in the file: llama.cpp's defaults apply (temp 0.8, top_k 40, top_p 0.95, min_p 0.05)",
        "use the settings the model card recommends");
  else if (in_config.empty())
    add(Severity::kOk, "embedded sampler defaults, which llama.cpp applies: " + List(in_gguf));
  else if (in_gguf.empty())
    add(Severity::kWarn,
        "generation_config.json recommends " + List(in_config) +
            "; the GGUF carries no general.sampling.* keys, so llama.cpp uses its own defaults",
        Flags(in_config));
  else if (in_gguf != in_config)
    add(Severity::kWarn,
        "the GGUF's sampler defaults (" + List(in_gguf) + ") differ from generation_config.json (" + List(in_config) +
            ")",
        Flags(in_config));
  else
    add(Severity::kOk, "sampler defaults match generation_config.json: " + List(in_gguf));
  if (cfg.is_object() && cfg.value("do_sample", true) == false)
    add(Severity::kInfo, "generation_config.json asks for greedy decoding (do_sample false)", "--temp 0");
  return out;
}

Finding CheckRopeScaling(const GgufMeta& meta) {
  const std::string arch = meta("general.architecture"), type = meta(arch + ".rope.scaling.type");
  const double n_ctx = Number(meta, arch + ".context_length"), factor = Number(meta, arch + ".rope.scaling.factor");
  const double orig = Number(meta, arch + ".rope.scaling.original_context_length");
  if (type.empty() || type == "none") {
    if (factor > 1)
      return {"context", Severity::kWarn,
              fmt::format("rope scaling factor {:g} without a scaling type: llama.cpp ignores it", factor),
              fmt::format("set the type, e.g. --override-kv {}.rope.scaling.type=str:yarn", arch)};
    return {"context", Severity::kOk, fmt::format("training context {:g} tokens, no rope scaling", n_ctx), ""};
  }
  if (orig > 0 && factor > 0 && std::fabs(orig * factor - n_ctx) > 0.01 * n_ctx)
    return {"context", Severity::kWarn,
            fmt::format("context_length {:g}, but original_context_length {:g} x {} factor {:g} = {:g}", n_ctx, orig,
                        type, factor, orig * factor),
            "check the converted rope-scaling keys against the model's config.json"};
  return {"context", Severity::kInfo,
          fmt::format("{} rope scaling x{:g} from {:g} to {:g} tokens: llama.cpp applies it at every length, short "
                      "prompts included",
                      type, factor, orig, n_ctx),
          "for short contexts, --rope-scaling none matches the unscaled model"};
}

}  // namespace flipscope
