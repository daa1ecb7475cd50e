// Plain-text tables and disclosure facts shared by the HTML and Markdown renderers, so both
// say the same thing with the same numbers.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

#include "report/internal.h"
#include "util/util.h"

namespace flipscope::report {

using nlohmann::json;

namespace {

std::string IntervalText(const std::optional<flipscope::Interval>& ci) {
  return ci ? Percent((*ci)[0], 2) + " – " + Percent((*ci)[1], 2) : "—";
}

std::string YesNo(std::optional<bool> v) { return v ? (*v ? "yes" : "no") : "—"; }

// A count that may be absent.
std::string CountOf(std::optional<int64_t> v) { return v ? Count(double(*v)) : Count(std::nullopt); }

}  // namespace

namespace {
// Whether the results hold the exact reference's figures (then the table shows the distance to it).
bool HasExact(const ExperimentResults& results) { return results.reference.has_value(); }
}  // namespace

std::vector<std::string> RankingHeader(const ExperimentResults& results) {
  std::vector<std::string> h{"#", "Configuration"};
  if (HasExact(results)) h.push_back("Flip rate against exact (95% CI)");
  for (std::string c :
       {"Median flip rate", "95% CI", "Flips / probes", "Damage / repair (forks); damage rate (95% CI)",
        "Confident flips", "KL mean", "KL p99", "Bit-identical probes", "Above floor", "KV bytes/token"})
    h.push_back(c);
  h.push_back("KV memory at " + Count(ContextLength(results)) + " tokens");
  // A property of the deployment's path beside each row; the order never uses it.
  if (HasServedDistance(results)) h.push_back("Prefill vs served (its own replays; not ranked)");
  return h;
}

std::string RankCell(const ConfigRow& row) {
  if (row.tie_group == 0) return std::to_string(row.rank);
  return std::to_string(row.tie_group) + (row.tie_size > 1 ? "=" : "");
}

// "damage / repair (followed of forkable flips; N teacher-forced only)": the forks' findings,
// of how many, and the flips that could do no damage because the model only reads there.
namespace {
std::string ForksCell(const SummaryRow& s) {
  const ForkCounts& f = *s.forks;
  std::string of = f.forkable > f.followed
                       ? fmt::format("{} of {} forks", Count(double(f.followed)), Count(double(f.forkable)))
                       : fmt::format("{} forks", Count(double(f.followed)));
  if (f.teacher_forced_only > 0) of += fmt::format("; {} teacher-forced only", Count(double(f.teacher_forced_only)));
  return fmt::format("{} / {} ({}); {} ({})", Count(double(f.damage)), Count(double(f.repair)), of,
                     Percent(f.damage_rate), IntervalText(s.DamageRateCi()));
}

// The distance to the exact reference with its interval (the recipe's figures, else reference.summary's).
std::string ExactCell(const ExperimentResults& results, const ConfigRow& row) {
  std::optional<double> rate;
  if (row.ranked) rate = row.ranked->exact_flip_rate;
  std::optional<Interval> ci;
  if (row.ranked && row.ranked->exact_flip_rate_ci)
    ci = Interval{(*row.ranked->exact_flip_rate_ci)[0], (*row.ranked->exact_flip_rate_ci)[1]};
  if (!rate && results.reference)
    for (const SummaryRow& e : results.reference->summary)
      if (e.config == row.name) rate = e.median_flip_rate, ci = e.flip_rate_ci;
  return rate ? Percent(*rate) + " (" + IntervalText(ci) + ")" : "—";
}
}  // namespace

std::vector<std::string> RankingCells(const ExperimentResults& results, const ConfigRow& row) {
  const std::string kv_at = row.kv_bytes_at_context ? HumanBytes(*row.kv_bytes_at_context) : "—";
  std::vector<std::string> cells;
  if (HasExact(results)) cells.push_back(ExactCell(results, row));
  if (!row.Figures()) {
    for (std::string c : {"—", "—", "— / —", "—", "—", "—", "—", "— of —", "—"}) cells.push_back(c);
    cells.push_back(Count(row.kv_bytes_per_token));
    cells.push_back(kv_at);
    if (HasServedDistance(results)) cells.push_back(ServedDistanceCell(row));
    return cells;
  }
  const SummaryRow& s = *row.Figures();
  const std::optional<ForkCounts>& f = s.forks;
  std::vector<std::string> rest{Percent(s.median_flip_rate), IntervalText(s.flip_rate_ci),
                                Count(double(s.flips)) + " / " + Count(double(s.probes)),
                                // What following the forks found ("—" where they were not followed).
                                f                                            ? ForksCell(s)
                                : s.median_flip_rate > 0 && !row.is_baseline ? "not followed"
                                                                             : "—",
                                Count(double(s.confident_flips)), Small(s.kl_mean), Small(s.kl_p99),
                                Count(double(s.bit_identical)) + " of " + Count(double(s.bit_identical_of)),
                                YesNo(s.above_floor), Count(row.kv_bytes_per_token), kv_at};
  cells.insert(cells.end(), rest.begin(), rest.end());
  if (HasServedDistance(results)) cells.push_back(ServedDistanceCell(row));
  return cells;
}

TextTable WindowTable(const ExperimentResults& results, WindowFigure figure, bool percent, bool ranked_replay) {
  TextTable t;
  t.header.push_back("Window (tokens)");
  std::vector<std::vector<WindowPoint>> columns;
  std::set<std::tuple<int, double, double>> windows;  // every window any configuration has
  for (const ConfigRow& row : RankedConfigs(results)) {
    const RowMeasurements m =
        ranked_replay ? MeasurementsOf(results, row) : RowMeasurements{&results.measured, row.name, false};
    auto pts = WindowSeries(m.measured->comparisons, m.config, figure);
    if (pts.empty()) continue;
    for (const auto& p : pts) windows.emplace(p.index, p.begin, p.end);
    t.header.push_back(row.name);
    columns.push_back(std::move(pts));
  }
  for (const auto& [index, begin, end] : windows) {
    std::vector<std::string> cells{fmt::format("{} ({}–{})", index, Count(begin), Count(end))};
    for (const auto& pts : columns) {
      std::string v = "—";
      for (const auto& p : pts)
        if (p.index == index) v = percent ? Percent(p.value) : Small(p.value);
      cells.push_back(v);
    }
    t.rows.push_back(std::move(cells));
  }
  return t;
}

std::string RepeatLabel(const ComparisonRecord& comparison) { return "repeat " + Count(comparison.entry.repeat + 1.0); }

std::string FloorSentence(const ExperimentResults& r) {
  const std::optional<Floor>& floor = r.measured.floor;
  if (!floor) return "";
  if (floor->bit_identical.value_or(false))
    return "Repeatability: the reference configuration repeated itself bit for bit (" + Count(double(floor->repeats)) +
           " runs), so every divergence is arithmetic, not noise.";
  if (!floor->flip_rate)
    return "No repeat floor: " + (floor->note.empty() ? "the reference configuration ran once" : floor->note) + ".";
  return "Repeat floor: the reference configuration against itself gave " + CountOf(floor->flips) + " flips of " +
         CountOf(floor->probes) + " probes = " + Percent(floor->flip_rate) + " (KL mean " + Small(floor->kl_mean) +
         "); divergences are measured against it.";
}

TextTable LoadFloorTable(const ExperimentResults& r) {
  TextTable t{{"Load", "Configuration", "Repeats", "Flips", "Probes", "Flip rate", "KL mean", "Bit-identical"}, {}};
  for (const LoadFloorRow& f : r.measured.load_floor)
    t.rows.push_back({Count(double(f.load)) + (f.load == 0 ? " (alone)" : ""), f.config, Count(double(f.repeats)),
                      CountOf(f.flips), CountOf(f.probes), Percent(f.flip_rate), Small(f.kl_mean),
                      YesNo(f.bit_identical)});
  return t;
}

std::vector<std::string> RecipeWarnings(const ExperimentResults& r) {
  std::vector<std::string> out;
  if (r.recipe) out = r.recipe->warnings;
  return out;
}

namespace {

// The reference configuration's configs[] entry, or nullptr.
const ConfigEntry* BaseConfig(const ExperimentResults& r) { return r.measured.Config(BaselineName(r)); }

// The engine the reference ran with (its capture's), else the run's environment.
const EngineRecord& BaseEngine(const ExperimentResults& r) {
  const ConfigEntry* c = BaseConfig(r);
  return c && c->engine ? *c->engine : r.environment;
}

std::string DevicesText(const EngineRecord& engine) {
  std::string devices;
  for (const EngineDevice& d : engine.devices)
    devices += fmt::format("{}{} — {} ({})", devices.empty() ? "" : "; ", d.name, d.description,
                           d.memory_total ? HumanBytes(*d.memory_total) : "?");
  return devices;
}

// A configuration's CPU kernel path; "" when not recorded.
std::string KernelPath(const ConfigEntry& c) { return c.engine ? c.engine->kernel_path : ""; }
// The settings llama.cpp decided for a configuration (ResolvedNotes), leaving out except.
std::vector<std::string> Decided(const ConfigEntry& c, const std::vector<std::string>& except = {}) {
  return c.engine ? ResolvedNotes(*c.engine, except) : std::vector<std::string>{};
}

// A configuration whose CPU kernel path differs from the reference's (another ISA, repacked or
// AMX weights) is named: that difference is part of what its numbers measure.
std::string OtherKernelPaths(const ExperimentResults& r, const std::string& base_path) {
  if (base_path.empty()) return "";
  std::string other;
  for (const ConfigEntry& c : r.measured.configs) {
    const std::string path = KernelPath(c);
    if (!path.empty() && path != base_path) other += fmt::format("{}{}: {}", other.empty() ? "" : "; ", c.name, path);
  }
  return other.empty() ? "none: every configuration ran the reference's" : other;
}

// Per configuration, the settings llama.cpp decided itself (-fa auto resolved, sizes clamped):
// its flags and knobs are those effective values, this says what was asked and why they differ.
std::string DecidedByLlama(const ExperimentResults& r) {
  // The reference's lines once; another configuration's only where they differ from them.
  const ConfigEntry* base = BaseConfig(r);
  const std::vector<std::string> base_notes = base ? Decided(*base) : std::vector<std::string>{};
  std::string out;
  if (base && !base_notes.empty()) out = fmt::format("{}: {}", base->name, fmt::join(base_notes, "; "));
  for (const ConfigEntry& c : r.measured.configs) {
    if (&c == base) continue;
    std::vector<std::string> notes = Decided(c, base_notes);
    if (!notes.empty()) out += fmt::format("{}{}: {}", out.empty() ? "" : " · ", c.name, fmt::join(notes, "; "));
  }
  return out.empty() ? "nothing: every configuration ran its settings as requested"
                     : out + (base ? " (other configurations: as the reference)" : "");
}

std::vector<Fact> RuntimeFacts(const ExperimentResults& r) {
  const std::string g = "Reference and runtime";
  const ConfigEntry* base_cfg = BaseConfig(r);
  const EngineRecord& engine = BaseEngine(r);
  const std::string& base_path = engine.kernel_path;
  return {{g, "Reference configuration", BaselineName(r), false},
          {g, "Reference flags", base_cfg ? base_cfg->flags.value_or("") : "", true},
          {g, "Reference knobs", base_cfg && base_cfg->knobs ? InlineText(base_cfg->knobs->record) : "", true},
          {g, "Settings llama.cpp decided", DecidedByLlama(r), false},
          {g, "Engine", engine.name, false},
          {g, "llama.cpp", engine.llama_cpp, true},
          {g, "ggml", engine.ggml, true},
          {g, "Backends", InlineText(json(engine.backends)), false},
          {g, "Devices", DevicesText(engine), false},
          {g, "System info", engine.system_info, true},
          {g, "ggml environment", EnvText(engine.env), true},
          {g, "CPU kernel path", base_path, true},
          {g, "llama.cpp build", engine.llama_build, true},
          {g, "Other kernel paths", OtherKernelPaths(r, base_path), true}};
}

std::vector<Fact> ModelFacts(const ExperimentResults& r) {
  const std::string g = "Model and workload";
  const ModelInfo& model = r.model.facts;
  const WorkloadFacts& wl = r.workload.facts;
  // A count; "" for none or 0 (a fact the model file did not give).
  auto count_or_empty = [](double v) { return v > 0 ? Count(v) : std::string(); };
  std::string layers;
  if (model.n_layer > 0)
    layers = Count(model.n_layer) + " / " + Count(double(model.n_ctx_train)) + " / " + Count(double(model.n_vocab));
  std::string tpl_text = wl.template_name.value_or("");
  if (!wl.template_source.empty()) tpl_text += (tpl_text.empty() ? "" : " from ") + wl.template_source;
  return {{g, "Model", model.name, false},
          {g, "Model file", model.path, true},
          {g, "Model sha256", model.sha256, true},
          {g, "Architecture", model.architecture, false},
          {g, "Parameters", count_or_empty(double(model.n_params)), false},
          {g, "Layers / training context / vocabulary", layers, false},
          {g, "Weight types", InlineText(json(model.quant_types)), false},
          {g, "Workload", wl.path, true},
          {g, "Workload format", wl.format, false},
          {g, "Workload sha256", wl.sha256, true},
          {g, "Workload tokens", Tokens(r) ? Count(Tokens(r)) : std::string(), false},
          {g, "Chat template", tpl_text, false},
          {g, "Chat template sha256", wl.template_sha256, true},
          {g, "Tool-call form", wl.tool_call_form, false},
          {g, "Tool-result form", wl.tool_result_form, false},
          {g, "Workload warnings", fmt::format("{}", fmt::join(wl.warnings, "; ")), false},
          {g, "Rendered text sha256", wl.text_sha256, true}};
}

// KL direction, truncation and skipped probes over every comparison.
struct ComparisonsMethod {
  std::string kl_dir, kl_estimate;
  int truncated = 0, n = 0;
  double skipped = 0;
};
ComparisonsMethod MethodOf(const std::vector<ComparisonRecord>& cmps) {
  ComparisonsMethod m;
  for (const ComparisonRecord& c : cmps) {
    ++m.n;
    if (!c.compare) continue;
    if (m.kl_dir.empty()) m.kl_dir = c.compare->kl_direction;
    if (m.kl_estimate.empty() && c.compare->truncated) m.kl_estimate = c.compare->kl_estimate;
    if (c.compare->truncated) ++m.truncated;
    m.skipped += double(c.compare->probes_skipped_base + c.compare->probes_skipped_cand);
  }
  return m;
}

std::vector<Fact> MethodFacts(const ExperimentResults& r) {
  const std::string g = "Method";
  const ProbePlanFacts& plan = r.probe_plan.facts;
  const RunSettings& settings = r.settings;
  const ComparisonsMethod m = MethodOf(r.measured.comparisons);
  std::string plan_text;
  auto count = [](std::optional<int64_t> v) { return Count(v ? std::optional<double>(double(*v)) : std::nullopt); };
  if (plan.recorded)
    plan_text = fmt::format("every {} tokens; 100% inside: {}; {} probes", count(plan.stride),
                            plan.full.value_or("").empty() ? "nothing" : *plan.full, count(plan.n_probes));
  return {{g, "Context length", ContextLength(r) ? Count(ContextLength(r)) + " tokens" : "", false},
          {g, "Sampled positions", plan_text, false},
          {g, "Window", settings.window ? Count(double(*settings.window)) + " tokens" : "", false},
          {g, "Confident flip", "reference top-1 probability ≥ " + Small(settings.confident.value_or(0.9)), false},
          {g, "KL direction", (m.kl_dir.empty() ? "KL(base||cand)" : m.kl_dir) + "; base is the reference", false},
          {g, "Truncation",
           m.truncated ? fmt::format("top-k (truncated) in {} of {} comparisons", m.truncated, m.n)
                       : "none: full-vocabulary logits in every comparison",
           false},
          {g, "KL of truncated captures", m.kl_estimate, false},
          {g, "Skipped probes", m.skipped > 0 ? Count(m.skipped) : "none", false},
          {g, "Aggregation",
           "median over repeats; every repeat of every configuration is compared with the reference's first capture, "
           "and the reference's own repeats give the floor",
           false},
          {g, "Experiment file", r.experiment_file, true},
          {g, "Results written by", "flipscope " + Or(r.flipscope_version) + " at " + Or(r.created), false}};
}

}  // namespace

std::vector<Fact> Disclosure(const ExperimentResults& r) {
  std::vector<Fact> facts = RuntimeFacts(r);
  for (auto part : {ModelFacts, MethodFacts})
    for (Fact& f : part(r)) facts.push_back(std::move(f));
  std::erase_if(facts, [](const Fact& f) { return f.value.empty(); });
  return facts;
}

}  // namespace flipscope::report
