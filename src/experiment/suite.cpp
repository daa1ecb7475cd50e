// RunSuite: the experiment over every session of a suite, each in its own results folder (its
// captures reused and resumed as a single workload's), then every configuration's figures pooled
// over the sessions with clustered intervals, the recipe on the pooled figures, suite.json and
// the suite's report (docs/experiment.md, "Suites").
#include <fmt/format.h>

#include <filesystem>

#include "capture/capture.h"
#include "checkpoint/model_info.h"
#include "compare/compare.h"
#include "experiment/experiment.h"
#include "experiment/suite_internal.h"
#include "records/records.h"
#include "report/report.h"
#include "util/util.h"

namespace flipscope {

namespace fs = std::filesystem;

TextKind TextKindAt(const std::vector<Span>& spans, int32_t pos) {
  const Span* s = InnermostSpan(spans, pos);
  if (!s) return TextKind::kOther;
  switch (s->kind) {
    case SpanKind::kLiteral:
      return TextKind::kLiteral;
    case SpanKind::kToolCall:
      return TextKind::kToolCallArguments;
    case SpanKind::kToolResult:
      return TextKind::kToolResult;
    case SpanKind::kMessage:
      break;
  }
  if (s->role == "system") return TextKind::kSystem;
  if (s->role == "user") return TextKind::kUser;
  if (s->role == "assistant") return TextKind::kAssistantProse;
  if (s->role == "tool") return TextKind::kToolResult;
  return TextKind::kOther;
}

namespace {

// The comparison of cand with base probe by probe; kinds from the base capture's spans (the
// logits at p predict token p + 1, so the probe's kind is that token's).
Result<ProbeSeries> SeriesOf(const std::string& base, const std::string& cand) {
  CompareOptions co;
  co.log = Log::Quiet();
  FS_ASSIGN_OR_RETURN(Comparison c, CompareFiles(base, cand, co));
  FS_ASSIGN_OR_RETURN(auto reader, CaptureReader::Open(base));
  const std::vector<Span>& spans = reader->manifest().workload.spans;
  ProbeSeries s;
  for (const compare::ProbeMetrics& p : c.probes) {
    s.position.push_back(p.position);
    s.flip.push_back(p.flip ? 1 : 0);
    s.kl.push_back(p.kl_base_cand);
    s.kind.push_back(TextKindAt(spans, p.position + 1));
  }
  return s;
}

// Each measured configuration's median repeat probe by probe, and the floor's.
Status MeasureSession(const Experiment& exp, SessionMeasure& m) {
  const Measurements& mm = m.results.measured;
  const std::string base0 = mm.configs[0].captures[0];
  for (const ConfigEntry& c : mm.configs) {
    if (!c.Ok() || c.name == exp.baseline.name) continue;
    const SummaryRow* row = mm.Row(c.name);
    const size_t r = row && row->median_repeat ? size_t(*row->median_repeat) : 0;
    if (r >= c.captures.size()) continue;
    FS_ASSIGN_OR_RETURN(m.series[c.name], SeriesOf(base0, c.captures[r]));
  }
  if (mm.configs[0].captures.size() >= 2) {
    FS_ASSIGN_OR_RETURN(m.floor, SeriesOf(base0, mm.configs[0].captures[1]));
    m.floor_bit_identical = mm.floor && mm.floor->bit_identical.value_or(false);
  }
  return Status::Ok();
}

// One session's experiment: the suite's with this session's workload, in OUTDIR/sessions/NAME.
Experiment SessionExperiment(const Experiment& exp, const SessionSpec& s) {
  Experiment sub = exp;
  sub.sessions.clear();
  sub.workload = s.workload;
  sub.name = exp.name + " / " + s.name;
  return sub;
}

}  // namespace

Result<SuiteResults> RunSuite(const Experiment& exp, const RunOptions& opts) {
  FS_ASSIGN_OR_RETURN(ModelInfo model, ReadModelInfo(exp.model));
  std::vector<SessionMeasure> measured;
  for (size_t i = 0; i < exp.sessions.size(); ++i) {
    const SessionSpec& s = exp.sessions[i];
    opts.log.Info(fmt::format("session {} of {}: {} ({})", i + 1, exp.sessions.size(), s.name, s.workload));
    RunOptions so = opts;
    so.outdir = (fs::path(opts.outdir) / "sessions" / s.name).string();
    so.verify_recipe = false;  // the suite's recipe is checked once, below
    SessionMeasure m;
    auto run = RunExperiment(SessionExperiment(exp, s), so);
    if (!run.ok()) return run.status().Prefixed("session '" + s.name + "'");
    m.results = std::move(*run);
    m.session = {s.name, s.workload, so.outdir, s.weight, m.results.workload.facts.n_tokens.value_or(0)};
    FS_RETURN_IF_ERROR(MeasureSession(exp, m));
    measured.push_back(std::move(m));
  }
  SuiteResults suite;
  suite.flipscope_version = FlipscopeVersion();
  suite.created = UtcNowIso();
  suite.name = exp.name;
  suite.experiment_file = exp.path;
  suite.baseline = exp.baseline.name;
  suite.matrix_cells = exp.matrix.cells;
  suite.matrix_baseline_cell = exp.matrix.baseline_cell;
  PoolOptions po;
  po.window = exp.window;
  PoolSessions(measured, exp, po, suite);
  suite.recipe = PooledRecipe(measured, suite, model);
  suite.rank_differences = RankDifferences(measured, *suite.recipe);
  FS_RETURN_IF_ERROR(WriteFileAtomic((fs::path(opts.outdir) / "suite.json").string(),
                                     suite.ToJson().dump(1, ' ', false, nlohmann::json::error_handler_t::replace)));
  FS_RETURN_IF_ERROR(WriteSuiteReport(suite, opts.outdir));
  return suite;
}

}  // namespace flipscope
