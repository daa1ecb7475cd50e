// The engine interface's small shared pieces: a future's stop names and the argmax rule.
#include "engine/engine_base.h"

#include <algorithm>
#include <cmath>

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
  // The same answer as the chain `if (row[i] > row[best]) best = i` (ties keep the lowest id, a
  // NaN is never greater, a NaN first value stays the answer), in two passes the compiler can
  // vectorize: the largest value in 16 independent lanes, then its first index. The chain is one
  // long dependency: about 1 ms for a 262,144-entry row (docs/performance.md, "The row pipeline").
  if (row.empty() || std::isnan(row[0])) return 0;
  constexpr size_t kLanes = 16;
  float lane[kLanes];
  std::fill(std::begin(lane), std::end(lane), row[0]);
  size_t i = 0;
  for (; i + kLanes <= row.size(); i += kLanes)
    for (size_t k = 0; k < kLanes; ++k) lane[k] = row[i + k] > lane[k] ? row[i + k] : lane[k];
  float best = row[0];
  for (float v : lane) best = v > best ? v : best;
  for (; i < row.size(); ++i) best = row[i] > best ? row[i] : best;
  return int32_t(std::find(row.begin(), row.end(), best) - row.begin());
}

}  // namespace flipscope
