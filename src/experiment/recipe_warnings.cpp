// The recipe's warnings: a configuration whose figures do not hold under load, and a context
// that does not hold the session measured or lies past the model's training context.
#include <fmt/format.h>

#include "experiment/steps.h"

namespace flipscope {

using nlohmann::json;

// A configuration that is within the repeat floor alone (or is the baseline) but flips above it
// when other sequences share its batches: its alone figures do not hold on a busy server.
std::vector<std::string> LoadWarnings(const Measurements& measured, const std::string& baseline) {
  std::vector<std::string> out;
  for (const SummaryRow& s : measured.summary) {
    if (!s.load || s.alone.empty() || !s.above_floor.value_or(false)) continue;
    const SummaryRow* alone = measured.Row(s.alone);
    const bool fine_alone = alone ? !alone->above_floor.value_or(true) : s.alone == baseline;
    if (!fine_alone) continue;
    out.push_back(
        fmt::format("{} is within the repeat floor alone, but under load {} ({}) it flips {} of {} probes "
                    "({:.3f}%): on a server that batches requests its figures do not hold",
                    s.alone, *s.load, s.config, s.flips, s.probes, 100 * s.median_flip_rate));
  }
  return out;
}

// What the recipe's context means for the session measured: too short to hold it, or past the
// model's training context (as measured, but outside the model's trained regime).
std::vector<std::string> ContextWarnings(int64_t context, int64_t session, const ModelInfo& model, bool budget) {
  std::vector<std::string> out;
  if (session > context)
    out.push_back(fmt::format("-c {} holds fewer tokens than the session measured ({}){}", context, session,
                              budget ? ": the memory budget leaves no longer context" : ""));
  if (model.n_ctx_train > 0 && context > model.n_ctx_train)
    out.push_back(
        fmt::format("-c {} is past the model's training context ({}), as measured: the figures hold "
                    "for this session, but past {} tokens the model runs outside its trained regime",
                    context, model.n_ctx_train, model.n_ctx_train));
  return out;
}

}  // namespace flipscope
