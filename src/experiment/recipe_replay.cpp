// The replay the recipe ranks by, the configurations it leaves out to keep one replay per
// ranking, each configuration's prefill-vs-served distance, and what that distance says about
// the recommended command's confidence (docs/served.md, "In experiments").
#include <fmt/format.h>

#include <algorithm>

#include "experiment/steps.h"

namespace flipscope {
namespace {

std::string Pct(double v, int decimals = 2) { return fmt::format("{:.{}f}%", 100 * v, decimals); }

// A configuration of an earlier version's results whose only change was the replay: a variant then
// ranked beside the others, whose figures are the baseline's prefill-vs-served distance.
bool OnlyReplay(const ConfigEntry& c, Replay baseline) {
  return c.RanReplay() != baseline && c.changes && c.changes->is_object() && c.changes->size() == 1 &&
         c.changes->contains("replay");
}

}  // namespace

RankedReplay RankedReplayOf(const ExperimentResults& results) {
  const Replay baseline = results.measured.configs.empty() ? Replay::kPrefill : results.measured.configs[0].RanReplay();
  if (!results.served) return {baseline, false};
  const ConfigEntry* twin = results.served->measured.Config(results.served->baseline);
  return twin && twin->Ok() ? RankedReplay{Replay::kServed, true} : RankedReplay{baseline, false};
}

std::string NotRankedReason(const ExperimentResults& results, const RankedReplay& by, const ConfigEntry& config) {
  const std::string replay(ToString(by.replay));
  if (!by.twins) {
    if (config.RanReplay() == by.replay) return "";
    return fmt::format(
        "captured under {} replay against a {} baseline: its flips are the baseline's prefill-vs-served "
        "distance (the deployment's other path, shown beside each configuration), not a setting to rank",
        ToString(config.RanReplay()), replay);
  }
  const ServedResults& served = *results.served;
  const std::string twin = ServedName(config.name);
  if (served.measured.Row(twin) || config.name == results.measured.configs[0].name) return "";
  std::string why = "its served twin was not compared with " + served.baseline;
  for (const ServedSkip& s : served.skipped)
    if (s.config == config.name) why = "not captured under served replay: " + s.reason;
  if (const ConfigEntry* t = served.measured.Config(twin); t && !t->Ok())
    why = "its served twin " + std::string(t->status ? NameOf(*t->status) : "failed") + ": " +
          t->reason.value_or("no reason given");
  return why + "; every ranked row is ranked by its served figures, never by prefill figures among them";
}

std::optional<RecipeServedDistance> OwnServedDistance(const ExperimentResults& results, const std::string& config) {
  auto of = [&](const std::string& name, const ComparisonFigures& f) {
    RecipeServedDistance d;
    d.of = name, d.flips = f.flips, d.probes = f.probes, d.flip_rate = f.flip_rate, d.kl_mean = f.kl_mean;
    d.flip_rate_ci = f.flip_rate_ci;
    return d;
  };
  if (results.served)
    for (const ReplayDistance& d : results.served->distance)
      if (d.config == config) return of(config, d.figures);
  // Earlier results: the baseline's distance is what a replay-only variant measured against it.
  if (results.measured.configs.empty() || config != results.measured.configs[0].name) return std::nullopt;
  for (const ConfigEntry& c : results.measured.configs)
    if (const SummaryRow* s = results.measured.Row(c.name);
        s && OnlyReplay(c, results.measured.configs[0].RanReplay())) {
      ComparisonFigures f;
      f.flips = s->flips, f.probes = s->probes, f.flip_rate = s->median_flip_rate, f.kl_mean = s->kl_mean;
      f.flip_rate_ci = s->flip_rate_ci;
      return of(config, f);
    }
  return std::nullopt;
}

std::string ServedDistanceCaveat(const ExperimentResults& results, const std::string& config) {
  const std::string baseline = results.measured.configs.empty() ? "" : results.measured.configs[0].name;
  std::optional<RecipeServedDistance> d = OwnServedDistance(results, config);
  if (!d) d = OwnServedDistance(results, baseline);
  if (!d) return "";
  // The noise either replay's repeats show: the larger of the two floors.
  double floor = 0;
  bool identical = true;
  for (const Measurements* m : {&results.measured, results.served ? &results.served->measured : nullptr})
    if (m && m->floor)
      floor = std::max(floor, m->floor->Threshold()), identical &= m->floor->bit_identical.value_or(false);
  if (d->flips == 0 || d->flip_rate <= floor) return "";
  return fmt::format(
      "{} prefill and served replays (what a deployment reads, and what it decodes one token at a time) part on "
      "{} of greedy choices ({} of {}), above the {}",
      d->of == config ? "its" : "the baseline's", Pct(d->flip_rate), d->flips, d->probes,
      identical ? "bit-identical repeat floor" : "repeat floor (" + Pct(floor, 3) + ")");
}

}  // namespace flipscope
