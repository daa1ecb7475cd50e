// The engine interface's small shared pieces: a future's stop names and the argmax rule.
#include "engine/engine_base.h"

#include "util/names.h"

extern char** environ;

namespace flipscope {

template <>
struct Names<FutureStop> {
  static constexpr std::pair<FutureStop, const char*> v[] = {
      {FutureStop::kBudget, "budget"}, {FutureStop::kEnd, "end_of_generation"}, {FutureStop::kContext, "context"}};
};

const char* FutureStopName(FutureStop s) { return NameOf(s).data(); }

std::optional<FutureStop> FutureStopFromName(std::string_view name) { return FromName<FutureStop>(name); }

std::map<std::string, std::string> NumericsEnvironment() {
  std::map<std::string, std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view kv(*e);
    const size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view name = kv.substr(0, eq);
    // The GPU runtimes' device lists, read inside this process; not NVIDIA_VISIBLE_DEVICES, which
    // the container runtime reads before the process starts (and sets on every GPU container).
    const bool devices =
        name == "CUDA_VISIBLE_DEVICES" || name == "HIP_VISIBLE_DEVICES" || name == "ROCR_VISIBLE_DEVICES";
    if (name.starts_with("GGML_") || devices) out.emplace(std::string(name), std::string(kv.substr(eq + 1)));
  }
  return out;
}

int32_t ArgmaxLowest(std::span<const float> row) {
  int32_t best = 0;
  for (size_t i = 1; i < row.size(); ++i)
    if (row[i] > row[size_t(best)]) best = int32_t(i);  // strict: ties keep the lowest id
  return best;
}

}  // namespace flipscope
