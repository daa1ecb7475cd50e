// The engine interface's small shared pieces: a future's stop names and the argmax rule.
#include "engine/engine_base.h"

#include "util/names.h"

namespace flipscope {

template <>
struct Names<FutureStop> {
  static constexpr std::pair<FutureStop, const char*> v[] = {
      {FutureStop::kBudget, "budget"}, {FutureStop::kEnd, "end_of_generation"}, {FutureStop::kContext, "context"}};
};

const char* FutureStopName(FutureStop s) { return NameOf(s).data(); }

std::optional<FutureStop> FutureStopFromName(std::string_view name) { return FromName<FutureStop>(name); }

int32_t ArgmaxLowest(std::span<const float> row) {
  int32_t best = 0;
  for (size_t i = 1; i < row.size(); ++i)
    if (row[i] > row[size_t(best)]) best = int32_t(i);  // strict: ties keep the lowest id
  return best;
}

}  // namespace flipscope
