// report: renders an experiment's results (ExperimentResults, as the experiment stage hands them
// over or as results/ reads them back from results.json; the schema is in docs/report.md) into
// report.md, results.csv, one self-contained report.html (inline CSS and SVG, no network) and a
// short terminal summary. Missing optional parts are left out of the output, never an error;
// renderers do not print.
#pragma once

#include <string>

#include "results/experiment_results.h"
#include "results/history_result.h"
#include "results/suite_result.h"
#include "util/status.h"

namespace flipscope {

// Writes outdir/report.html, outdir/report.md and outdir/results.csv (each atomically); error
// names the file or folder that could not be written.
Status WriteReport(const ExperimentResults& results, const std::string& outdir);
// The whole HTML page: one file that opens from disk with no network access.
std::string RenderHtml(const ExperimentResults& results);
// The report as GitHub-flavoured Markdown (tables; no charts).
std::string RenderMarkdown(const ExperimentResults& results);
// One row per configuration (ranked ones first, then refused/failed), RFC 4180 quoting.
std::string RenderCsv(const ExperimentResults& results);
// A suite's report (docs/report.md, "Suites"): outdir/report.md and outdir/report.html, the
// pooled figures, a table per configuration with a row per session, the kinds of text and the
// flip rate by token depth across the sessions.
Status WriteSuiteReport(const SuiteResults& suite, const std::string& outdir);
std::string RenderSuiteMarkdown(const SuiteResults& suite);
std::string RenderSuiteHtml(const SuiteResults& suite);
// A few lines for the terminal: the sessions, each configuration's pooled flip rate and flag,
// the recipe and where the report is.
std::string SuiteSummary(const SuiteResults& suite, const std::string& html_path);
// A few lines for the terminal: ranking, floor, recommendation and where the report is.
std::string TerminalSummary(const ExperimentResults& results, const std::string& html_path);
// Whether the recipe's command was served and matched the capture (recipe.verification), one line.
std::string RecipeVerificationText(const RecipeResult& recipe);

// The page of `flipscope history` (history.html; docs/history.md): versions, steps with
// per-window charts, distance to exact and the forks of the step that changed most.
std::string RenderHistoryHtml(const HistoryResult& history);

// The page of `flipscope layers --html`: the layers document's charts and birth counts, self-contained.
std::string RenderLayersHtml(const LayersResult& layers);

}  // namespace flipscope
