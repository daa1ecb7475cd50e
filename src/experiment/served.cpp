// replay = "both": every configuration's served twin, each configuration's prefill-vs-served
// distance (overall, per window, where the model wrote against where it read) and the ranking
// under each replay.
#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "capture/capture.h"
#include "compare/compare.h"
#include "experiment/steps.h"
#include "workload/workload.h"

namespace flipscope {

using nlohmann::json;

Experiment ServedTwin(const Experiment& exp, std::vector<ServedSkip>* skipped) {
  Experiment sv = exp;
  sv.replay_both = false;
  sv.reference_exact = false;
  sv.layers.enabled = false;
  // Forks are followed for the twins too, so that a configuration ranked by its served figures
  // carries damage measured on the same replay (like with like).
  for (std::string& name : sv.branch.configs) name = ServedName(name);
  sv.baseline.name = ServedName(exp.baseline.name);
  sv.baseline.knobs.replay = Replay::kServed;
  sv.variants.clear();
  for (const ConfigSpec& v : exp.variants) {
    // A server configuration's twin is captured over HTTP (one-token requests over its prefix
    // cache, docs/served.md "Over HTTP"): a server that cannot prove it is refused there, not here.
    if (v.knobs.load > 0) {
      skipped->push_back({v.name, "runs under load: served replay does not run under --load yet"});
      continue;
    }
    ConfigSpec t = v;
    t.name = ServedName(v.name);
    t.knobs.replay = Replay::kServed;
    sv.variants.push_back(std::move(t));
  }
  return sv;
}

namespace {

// The probes of a comparison split by who produced the predicted token p + 1: the model
// ("written", and of those the tool calls) or the transcript ("elsewhere").
std::vector<ReplayGroup> Groups(const Comparison& cmp, const std::vector<Span>& spans) {
  std::vector<ReplayGroup> g = {{"written"}, {"tool_calls"}, {"elsewhere"}};
  auto in_call = [&](int32_t pos) {
    return std::any_of(spans.begin(), spans.end(),
                       [&](const Span& s) { return s.kind == SpanKind::kToolCall && pos >= s.begin && pos < s.end; });
  };
  for (const compare::ProbeMetrics& m : cmp.probes) {
    const bool wrote = ModelWrites(spans, m.position + 1);
    for (ReplayGroup* e : {wrote ? &g[0] : &g[2], wrote && in_call(m.position + 1) ? &g[1] : nullptr}) {
      if (!e) continue;
      e->probes++, e->flips += m.flip, e->bit_identical += m.identical;
      e->kl_mean += m.kl_base_cand;
    }
  }
  for (ReplayGroup& e : g)
    if (e.probes > 0) e.flip_rate = double(e.flips) / double(e.probes), e.kl_mean /= double(e.probes);
  return g;
}

// Configurations ordered by median flip rate, then KL mean (the baseline, without a summary
// row when it ran once, at 0), under each replay; only those measured under both.
ReplayRanking RankBoth(const ExperimentResults& results) {
  using Key = std::tuple<double, double, std::string>;
  std::vector<Key> prefill, served;
  for (const ConfigEntry& c : results.measured.configs) {
    const SummaryRow* p = results.measured.Row(c.name);
    const SummaryRow* s = results.served->measured.Row(ServedName(c.name));
    const bool base = c.name == results.baseline;
    if (!(p || base) || !(s || base)) continue;
    prefill.emplace_back(p ? p->median_flip_rate : 0.0, p ? p->kl_mean : 0.0, c.name);
    served.emplace_back(s ? s->median_flip_rate : 0.0, s ? s->kl_mean : 0.0, c.name);
  }
  std::stable_sort(prefill.begin(), prefill.end());
  std::stable_sort(served.begin(), served.end());
  ReplayRanking r;
  for (const Key& k : prefill) r.prefill.push_back(std::get<2>(k));
  for (const Key& k : served) r.served.push_back(std::get<2>(k));
  r.changed = r.prefill != r.served;
  return r;
}

}  // namespace

Status ReplayDistances(const Experiment& exp, ExperimentResults& results, const Log& log) {
  ServedResults& served = *results.served;
  const CompareOptions co = OptionsOf(exp, results.measured);
  served.distance.clear();
  for (const ConfigEntry& c : results.measured.configs) {
    if (!c.Ok()) continue;
    const ConfigEntry* twin = served.measured.Config(ServedName(c.name));
    if (!twin || !twin->Ok()) continue;
    log.Info(fmt::format("  comparing {} under prefill and served replay", c.name));
    FS_ASSIGN_OR_RETURN(auto base, CaptureReader::Open(c.captures[0]));
    FS_ASSIGN_OR_RETURN(auto cand, CaptureReader::Open(twin->captures[0]));
    FS_ASSIGN_OR_RETURN(Comparison cmp, Compare(*base, *cand, co));
    ReplayDistance d;
    d.config = c.name;
    d.figures = ComparisonFigures::Of(cmp);
    d.groups = Groups(cmp, base->manifest().workload.spans);
    d.windows = cmp.windows;
    served.distance.push_back(std::move(d));
  }
  served.ranking = RankBoth(results);
  if (!exp.replay_variant.empty()) served.asked_by = exp.replay_variant;
  return Status::Ok();
}

}  // namespace flipscope
