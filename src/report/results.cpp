// Reading the results document: tolerant accessors, number formatting, the ranking and the
// per-window series every renderer shares.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "report/internal.h"

namespace flipscope::report {

using nlohmann::json;

namespace {

// Median of values (mean of the two middle ones for an even count); values must be non-empty.
double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Every comparison of one configuration that holds a compare document, in file order.
std::vector<const ComparisonRecord*> ComparisonsOf(const std::vector<ComparisonRecord>& comparisons,
                                                   const std::string& config) {
  std::vector<const ComparisonRecord*> out;
  for (const ComparisonRecord& c : comparisons)
    if (c.entry.config == config && c.compare) out.push_back(&c);
  return out;
}

// A window as the report shows it: merged_probes > 0 when the final window was merged into it,
// and then only the figures that merge are present.
struct ShownWindow {
  WindowStats w;
  double merged_probes = 0;
};

// A figure of a shown window; nullopt when absent there or NaN.
std::optional<double> FigureOf(const ShownWindow& s, WindowFigure figure) {
  const WindowStats& w = s.w;
  const bool merged = s.merged_probes > 0;
  double v = compare::kNaN;
  switch (figure) {
    case WindowFigure::kFlipRate:
      v = w.flip_rate;
      break;
    case WindowFigure::kFlipRateLo:
      v = w.flip_rate_ci.first;
      break;
    case WindowFigure::kFlipRateHi:
      v = w.flip_rate_ci.second;
      break;
    case WindowFigure::kKlMean:
      v = w.kl_mean;
      break;
    case WindowFigure::kKlMax:
      v = w.kl_max;
      break;
    case WindowFigure::kKlMedian:
      v = merged ? compare::kNaN : w.kl_median;
      break;
    case WindowFigure::kKlP99:
      v = merged ? compare::kNaN : w.kl_p99;
      break;
  }
  return std::isnan(v) ? std::nullopt : std::optional<double>(v);
}

// A comparison's windows as the report shows them: a final window holding fewer than a quarter
// of the median probes of the others (the transcript's tail, e.g. 100 tokens after the last full
// window) is merged into the one before it, so that its wide interval does not dominate a chart.
// The merged window's flips, probes, flip rate, Wilson interval and probe-weighted KL mean are
// recomputed; figures that cannot be merged (KL median, p99) are left out of it.
std::vector<ShownWindow> ShownWindows(const std::vector<WindowStats>& windows) {
  std::vector<ShownWindow> out;
  for (const WindowStats& w : windows) out.push_back({w, 0});
  if (windows.size() < 2) return out;
  std::vector<double> probes;
  for (size_t i = 0; i + 1 < windows.size(); ++i) probes.push_back(double(windows[i].probes));
  const WindowStats& last = windows.back();
  const double n_last = double(last.probes);
  if (n_last <= 0 || n_last >= Median(probes) / 4) return out;
  out.pop_back();
  WindowStats& prev = out.back().w;
  const double n_prev = double(prev.probes), n = n_prev + n_last;
  const double flips = double(prev.flips + last.flips);
  const auto [lo, hi] = Wilson95(flips, n);
  prev.end = last.end;
  prev.probes += last.probes, prev.flips += last.flips;
  prev.flip_rate = n > 0 ? flips / n : 0.0;
  prev.flip_rate_ci = {lo, hi};
  // NaN (absent) in either stays NaN: the merged figure is left out.
  prev.kl_mean = n > 0 ? (prev.kl_mean * n_prev + last.kl_mean * n_last) / n : compare::kNaN;
  prev.kl_max = std::max(prev.kl_max, last.kl_max);
  if (std::isnan(last.kl_max)) prev.kl_max = compare::kNaN;
  out.back().merged_probes = n_last;
  return out;
}

}  // namespace

std::string InlineText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  if (!v.is_array() && !v.is_object()) return v.dump();
  std::string out;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!out.empty()) out += ", ";
    out += v.is_object() ? it.key() + "=" + InlineText(*it) : InlineText(*it);
  }
  return out;
}

std::string OutcomeCountsText(const BranchCounts& counts) {
  if (!counts.outcomes) return "";
  const OutcomeTally& o = *counts.outcomes;
  // The failure kinds that occurred, by name.
  auto kinds = [](const FailureTally& t) {
    std::string out;
    for (const auto& [name, n] : t.KindsByName())
      if (n > 0) out += (out.empty() ? "" : ", ") + name + " " + InlineText(n);
    return out.empty() ? out : " (" + out + ")";
  };
  std::string out;
  for (const auto& [name, n] : counts.OutcomesByName()) {
    out += (out.empty() ? "" : ", ") + name + " " + InlineText(n);
    const std::optional<Outcome> outcome = FromName<Outcome>(name);
    if (outcome == Outcome::kDamage) out += kinds(o.damage);
    if (outcome == Outcome::kRepair) out += kinds(o.repair);
  }
  return out;
}

std::string ForkedText(const BranchCounts& counts) {
  const int64_t total = counts.total;
  const int64_t points = counts.branch_points.value_or(total);
  const int64_t read = counts.teacher_forced_only.value_or(0);
  std::string out = points > total ? fmt::format("Followed {} of {} branch points.", total, points)
                                   : fmt::format("Followed {} branch points.", total);
  if (read > 0)
    out += fmt::format(
        " {} teacher-forced only: flips where the model reads the next token (tool results, system or user "
        "text), not forked, never damage or repair.",
        read);
  return out;
}

std::string DecodingText(const BranchRecord& group) {
  const auto& d = group.result.config.decoding;
  if (!d) return "";  // branches followed before decodings were recorded: free
  std::string out;
  if (d->UsedMode() == FutureDecoding::kGrammar)
    out = "Futures decoded under the tool-call grammar a llama.cpp server would build (" + d->source.value_or("") +
          "): greedy among the tokens it allows, once a call starts.";
  else
    out = "Futures decoded free (unconstrained greedy)" + (d->why.value_or("").empty() ? "" : ": " + *d->why) + ".";
  if (const auto& free = group.free_counts)
    out += fmt::format(" The same forks decoded free: {}; invalid_tool_call verdicts {} free, {} under the grammar.",
                       OutcomeCountsText(*free), InlineText(free->invalid_tool_call),
                       InlineText(group.result.counts.invalid_tool_call));
  return out;
}

json VerdictCounts(const BranchCounts& counts) {
  json flat = ToJson(counts);  // the document's own order, and fields of later versions
  for (const char* k : {"outcomes", "branch_points", "teacher_forced_only"}) flat.erase(k);
  return flat;
}

std::string VerdictCountsText(const BranchCounts& counts) { return InlineText(VerdictCounts(counts)); }

std::string Percent(std::optional<double> fraction, int decimals) {
  if (!fraction || !std::isfinite(*fraction)) return "—";
  return fmt::format("{:.{}f}%", *fraction * 100.0, decimals);
}

std::string Small(std::optional<double> v) {
  if (!v || !std::isfinite(*v)) return "—";
  if (*v == 0) return "0";
  double a = std::fabs(*v);
  if (a >= 0.01 && a < 1000) return fmt::format("{:.4g}", *v);
  return fmt::format("{:.2e}", *v);
}

std::string Count(std::optional<double> v) {
  if (!v || !std::isfinite(*v)) return "—";
  std::string digits = fmt::format("{:.0f}", std::fabs(*v));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (*v < 0 ? "-" : "") + out;
}

std::string Or(const std::string& s, std::string_view fallback) { return s.empty() ? std::string(fallback) : s; }

std::string BaselineName(const ExperimentResults& results) {
  return results.baseline.empty() ? "baseline" : results.baseline;
}

std::string StatusText(const ConfigEntry& config) {
  return config.status ? std::string(NameOf(*config.status)) : Str(config.fields, "status", "ok");
}

std::optional<double> Tokens(const ExperimentResults& results) {
  const auto n = results.workload.facts.n_tokens;
  return n ? std::optional<double>(double(*n)) : std::nullopt;
}

std::string ModelName(const ExperimentResults& results) {
  const ModelInfo& m = results.model.facts;
  return !m.name.empty() ? m.name : !m.path.empty() ? m.path : "?";
}

std::optional<double> ContextLength(const ExperimentResults& results) {
  if (const ConfigEntry* c = results.measured.Config(BaselineName(results))) {
    if (const Knobs* k = c->RanKnobs(); k && k->n_ctx > 0) return double(k->n_ctx);
  }
  return Tokens(results);
}

namespace {

// One row per configuration (configs[] in file order, then summary rows naming others), with its
// summary, and whether it is the baseline or the recommended one.
std::vector<ConfigRow> ConfigRows(const ExperimentResults& results) {
  const std::string base = BaselineName(results);
  const std::string recommended = results.recipe ? results.recipe->recommended : "";
  const std::optional<double> ctx = ContextLength(results);
  std::vector<ConfigRow> rows;
  std::map<std::string, size_t> index;  // name -> position in rows
  auto row_for = [&](const std::string& name) -> ConfigRow& {
    auto [it, fresh] = index.emplace(name, rows.size());
    if (fresh) {
      rows.emplace_back();
      rows.back().name = name;
      rows.back().status = "ok";
    }
    return rows[it->second];
  };
  for (const ConfigEntry& c : results.measured.configs) {
    if (c.name.empty()) continue;
    ConfigRow& r = row_for(c.name);
    r.config = &c;
    r.description = c.description.value_or("");
    r.status = StatusText(c);
    r.state = FromName<ConfigStatus>(r.status).value_or(ConfigStatus::kFailed);
    r.reason = c.reason.value_or("");
    r.flags = c.flags.value_or("");
    r.replay = c.RanReplay();
    r.kv_bytes_per_token = c.kv_bytes_per_token;
    if (r.kv_bytes_per_token && ctx) r.kv_bytes_at_context = *r.kv_bytes_per_token * *ctx;
  }
  for (const SummaryRow& s : results.measured.summary)
    if (!s.config.empty()) row_for(s.config).summary = s;
  for (ConfigRow& r : rows) {
    r.is_baseline = r.name == base;
    r.is_recommended = !recommended.empty() && r.name == recommended;
  }
  return rows;
}

// Orders rows: the experiment's ranking (recipe.ranking) where given; measured rows it does not
// name follow, by fidelity (median flip rate, then KL mean); then rows without measurements.
// Each row the ranking names gets its entry and tie group. Returns each tie group's size.
std::map<int, int> OrderRows(std::vector<ConfigRow>& rows, const std::vector<RecipeRankingRow>& ranking) {
  std::map<std::string, int> given;
  for (const RecipeRankingRow& n : ranking)  // names, or rows that name their configuration
    if (!n.config.empty()) given.emplace(n.config, int(given.size()));
  auto key = [&](const ConfigRow& r) {
    bool measured = r.summary && r.state == ConfigStatus::kOk;
    auto g = given.find(r.name);
    double rate = measured ? r.summary->median_flip_rate : INFINITY;
    double kl = measured ? r.summary->kl_mean : INFINITY;
    return std::make_tuple(!measured, g == given.end() ? 1 : 0, g == given.end() ? 0 : g->second, rate, kl);
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const ConfigRow& a, const ConfigRow& b) { return key(a) < key(b); });
  std::map<int, int> group_size;
  for (const RecipeRankingRow& n : ranking)
    if (!n.name_only)
      for (ConfigRow& r : rows)
        if (r.name == n.config) r.ranked = &n, r.tie_group = IntOr(n.tie_group, 0), ++group_size[r.tie_group];
  return group_size;
}

}  // namespace

std::vector<ConfigRow> RankedConfigs(const ExperimentResults& results) {
  std::vector<ConfigRow> rows = ConfigRows(results);
  static const std::vector<RecipeRankingRow> none;
  std::map<int, int> group_size = OrderRows(rows, results.recipe ? results.recipe->ranking : none);
  int rank = 0;
  for (ConfigRow& r : rows) {
    if (r.tie_group > 0) r.tie_size = group_size[r.tie_group];
    if (r.ranked && r.RankedReplayMode() == Replay::kServed && results.served)
      r.twin_summary = results.served->measured.Row(ServedName(r.name));
    if (const std::string* why = results.recipe ? results.recipe->NotRankedWhy(r.name) : nullptr)
      r.not_ranked = true, r.reason = *why;
    if (r.summary && r.state == ConfigStatus::kOk && !r.not_ranked)
      r.rank = ++rank;
    else if (r.state == ConfigStatus::kOk && r.reason.empty())  // say why a configuration that ran has no figures
      r.reason = r.is_baseline ? "the reference configuration ran once: no repeat to compare it with"
                               : "no comparison with the reference";
  }
  return rows;
}

RowMeasurements MeasurementsOf(const ExperimentResults& results, const ConfigRow& row) {
  if (results.served && row.RankedReplayMode() == Replay::kServed) {
    const std::string twin = ServedName(row.name);
    if (results.served->measured.Config(twin) || results.served->measured.Row(twin))
      return {&results.served->measured, twin, true};
  }
  return {&results.measured, row.name, false};
}

std::string ShownReplaySentence(const ExperimentResults& results) {
  if (!results.served) return "";
  for (const ConfigRow& row : RankedConfigs(results))
    if (MeasurementsOf(results, row).served)
      return "Served replay, the replay the ranking used: each configuration's served twin against " +
             results.served->baseline + " (the prefill figures are in results.json).";
  return "Prefill replay, the replay the ranking used (the served twins' figures are in results.json).";
}

std::vector<WindowPoint> WindowSeries(const std::vector<ComparisonRecord>& comparisons, const std::string& config,
                                      WindowFigure figure) {
  std::map<int, WindowPoint> points;
  std::map<int, std::vector<double>> values;
  for (const ComparisonRecord* c : ComparisonsOf(comparisons, config)) {
    for (const ShownWindow& s : ShownWindows(c->compare->windows)) {
      const int idx = int(s.w.index);
      const auto v = FigureOf(s, figure);
      if (idx < 0 || !v) continue;
      WindowPoint& p = points[idx];
      p.index = idx;
      p.begin = double(s.w.begin);
      p.end = double(s.w.end);
      p.merged_probes = std::max(p.merged_probes, s.merged_probes);
      values[p.index].push_back(*v);
    }
  }
  std::vector<WindowPoint> out;
  for (auto& [i, p] : points) {
    p.value = Median(values[i]);
    p.repeats = int(values[i].size());
    out.push_back(p);
  }
  return out;
}

const ComparisonRecord* MedianComparison(const Measurements& measured, const std::string& config) {
  std::vector<const ComparisonRecord*> cmps = ComparisonsOf(measured.comparisons, config);
  if (cmps.empty()) return nullptr;
  // The repeat the summary chose (results written since it names one), else the same rule.
  if (const SummaryRow* s = measured.Row(config); s && s->median_repeat)
    for (const ComparisonRecord* c : cmps)
      if (c->entry.repeat == *s->median_repeat) return c;
  std::vector<double> rates;
  for (const ComparisonRecord* c : cmps) rates.push_back(c->compare->overall.flip_rate);
  return cmps[MedianRepeatIndex(rates)];
}

}  // namespace flipscope::report
