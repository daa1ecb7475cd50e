// report's building blocks, shared by its renderers (html, markdown, csv) and checked by its
// tests; not part of the stage's interface (report.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "report/report.h"
#include "results/experiment_results.h"
#include "results/results.h"
#include "util/read.h"

namespace flipscope {

namespace report {

// Tolerant accessors (util/read.h, shared with the results model): the value at key when it
// has the asked type, else the fallback.
using read::Int;
using read::Num;
using read::NumAt;
using read::Str;
using read::Sub;

// Any JSON value as one line of plain text: arrays joined with ", ", objects as key=value.
std::string InlineText(const nlohmann::json& v);

// A branch group's outcome counts (counts.outcomes) as one line, by name, damage and repair with
// their failure kinds: "benign 2, both_fail 5, damage 3 (invalid_tool_call 2, literal_mutated 1), ...";
// "" when the counts hold no outcomes (records judged before attribution).
std::string OutcomeCountsText(const BranchCounts& counts);
// "Followed 12 of 17 branch points. 14 teacher-forced only: ..." from a branch group's counts.
std::string ForkedText(const BranchCounts& counts);
// How a branch group's futures were decoded (branch_config.decoding) and, with free_counts, what
// the same forks decoded free gave; "" for groups that do not say.
std::string DecodingText(const BranchRecord& group);
// The verdicts on the pairs of futures (counts without outcomes and points), by name, as written.
nlohmann::json VerdictCounts(const BranchCounts& counts);
// VerdictCounts as one line: "benign=0, divergent=2, ...".
std::string VerdictCountsText(const BranchCounts& counts);

// "0.370%" for a fraction 0.0037 ("—" when absent).
std::string Percent(std::optional<double> fraction, int decimals = 3);
// Compact number for KL and other small quantities: "0", "1.23e-04", "0.0153" ("—" when absent).
std::string Small(std::optional<double> v);
// Integer with thousands separators: 40000 -> "40,000" ("—" when absent).
std::string Count(std::optional<double> v);
// "6 of 14 flips" where a layers document looked into a subset of a pair's flips, else "14 flips".
std::string FlipsOf(const LayersResult& layers);

// A figure that NaN marks as absent (a truncated capture cannot give it), as an optional.
inline std::optional<double> Figure(double v) { return v == v ? std::optional<double>(v) : std::nullopt; }
// An optional integer as an int, clamped to int's range; fallback when none.
inline int IntOr(const std::optional<int64_t>& v, int fallback) {
  return v ? int(std::clamp<int64_t>(*v, std::numeric_limits<int>::min(), std::numeric_limits<int>::max())) : fallback;
}
// A branch record's verdict as shown: "unjudged" for a record without one.
inline std::string VerdictWord(const ForkRecord& b) { return b.verdict.empty() ? "unjudged" : b.verdict; }
// An optional count as a figure (none stays none).
inline std::optional<double> Figure(const std::optional<int64_t>& v) {
  return v ? std::optional<double>(double(*v)) : std::nullopt;
}

// s, or the fallback when s is empty (a document field it did not hold).
std::string Or(const std::string& s, std::string_view fallback = "?");
// The baseline's name ("baseline" when the document does not say).
std::string BaselineName(const ExperimentResults& results);
// A configuration's status as its entry spells it: "ok" when it says none, and a name this version
// does not know as written.
std::string StatusText(const ConfigEntry& config);

// One configuration as the report shows it, merged from configs[], summary[] and recipe.
struct ConfigRow {
  std::string name, description, status, reason, flags;  // status as the file spells it
  ConfigStatus state = ConfigStatus::kOk;                // status read (a name it does not know: failed)
  Replay replay = Replay::kPrefill;                      // what its captures ran (configs[].knobs.replay)
  const ConfigEntry* config = nullptr;                   // the configs[] entry, if any
  std::optional<SummaryRow> summary;                     // the summary[] entry, if any
  int rank = 0;                                          // 1-based among measured configs; 0 when not ranked
  // Its statistical tie group (recipe.ranking[].tie_group, 1-based; 0 when the recipe gives none)
  // and how many configurations share it; its recipe.ranking entry (null when none).
  int tie_group = 0, tie_size = 1;
  // Its served twin's summary when the recipe ranked it by served replay (results.served): the
  // figures the ranking used.
  const SummaryRow* twin_summary = nullptr;
  bool not_ranked = false;  // measured, but left out of the ranking (recipe.not_ranked; reason says why)
  const RecipeRankingRow* ranked = nullptr;
  bool is_baseline = false, is_recommended = false;
  std::optional<double> kv_bytes_per_token, kv_bytes_at_context;

  // The figures its rank rests on: its served twin's when ranked by served replay, else its own.
  const SummaryRow* Figures() const { return twin_summary ? twin_summary : summary ? &*summary : nullptr; }
  // The replay of those figures: the recipe's for a ranked row, else what its captures ran.
  std::string RankedReplay() const { return ranked && ranked->replay ? *ranked->replay : std::string(NameOf(replay)); }
  // The same as its mode; none for a name this version does not know.
  std::optional<Replay> RankedReplayMode() const { return FromName<Replay>(RankedReplay()); }
  // How a row without a rank is listed: "not ranked", "not measured" or its status.
  std::string UnrankedLabel() const {
    return not_ranked ? "not ranked" : state == ConfigStatus::kOk ? "not measured" : status;
  }
};
// Measured configurations in ranking order (recipe.ranking: names or {"config": name} objects;
// else median flip rate then KL mean), then the refused / failed ones in file order.
std::vector<ConfigRow> RankedConfigs(const ExperimentResults& results);
// The context length the report speaks of: the baseline's ctx_size, else the workload's length.
std::optional<double> ContextLength(const ExperimentResults& results);
// The workload's length in tokens; none when not recorded.
std::optional<double> Tokens(const ExperimentResults& results);
// The model as the report names it: its name, else its file, else "?".
std::string ModelName(const ExperimentResults& results);

// Per-window value of one configuration: the median over its repeats (comparisons[]).
struct WindowPoint {
  int index = 0;
  double begin = 0, end = 0;
  double value = 0;  // median over repeats
  int repeats = 0;
  double merged_probes = 0;  // > 0: the final window's probes merged into this one (too few to stand alone)
};
// A figure of a window that a per-window series shows.
enum class WindowFigure { kFlipRate, kFlipRateLo, kFlipRateHi, kKlMean, kKlMedian, kKlP99, kKlMax };
// Median over repeats of a window figure for config among comparisons. A final window with fewer
// than a quarter of the others' median probes is merged into the one before it (flips, probes,
// flip rate, interval, KL mean and max recomputed; the other figures absent there). A NaN figure
// is absent.
std::vector<WindowPoint> WindowSeries(const std::vector<ComparisonRecord>& comparisons, const std::string& config,
                                      WindowFigure figure);
// Where a ranked row's flips and per-window figures come from: under a ranking by served replay,
// its served twin's comparisons with the served baseline (results.served); else its own.
struct RowMeasurements {
  const Measurements* measured = nullptr;
  std::string config;  // the row's name there (its twin's, "kv-q8@served", when served)
  bool served = false;
};
RowMeasurements MeasurementsOf(const ExperimentResults& results, const ConfigRow& row);
// One sentence naming the replay the flips and per-window figures show, the ranking's; "" when the
// results hold one replay only (then there is nothing to tell apart).
std::string ShownReplaySentence(const ExperimentResults& results);

// The comparison shown for a configuration: the repeat its summary row names (median_repeat),
// else its median repeat by overall flip rate (the lower middle for an even count, ties in
// repeat order: the summary's rule); null when the configuration has no comparison.
const ComparisonRecord* MedianComparison(const Measurements& measured, const std::string& config);

// "repeat 2" for a comparisons[] entry: its 0-based capture index, shown 1-based.
std::string RepeatLabel(const ComparisonRecord& comparison);
// One sentence on the reference's repeat floor (bit-identical, a flip rate, or why there is none);
// empty when results has no floor.
std::string FloorSentence(const ExperimentResults& results);

// A line chart drawn as inline SVG.
struct ChartSeries {
  std::string name;
  std::vector<double> x, y;       // same length
  std::vector<std::string> tips;  // hover text per point (title elements); may be empty
};
struct ChartBand {  // a shaded band from lo to hi over x (e.g. the repeat floor)
  std::string name;
  std::vector<double> x, lo, hi;
};
struct Chart {
  std::string id;  // unique within the page: the prefix of the title/desc ids
  std::string title, description, x_label, y_label;
  bool log_y = false;
  bool y_percent = false;  // y values are fractions, labelled as percentages
  std::vector<ChartSeries> series;
  std::optional<ChartBand> band;
};
// The chart as an <svg> element (role="img", escaped title/desc, legend, markers with tips).
// On a log axis values <= 0 are drawn on the bottom edge as hollow markers.
std::string RenderSvgChart(const Chart& chart);

// The layers charts (flipscope layers' JSON, docs/layers.md): small multiples of the relative
// difference against the layer, one thin line per flip and the median bold; one flip's own
// chart; and a self-contained page with both and the birth counts.
// id names the chart's SVG elements (unique in a page); id_prefix goes before a flip's own ids.
std::string RenderLayersChart(const LayersResult& layers, const std::string& id = "layers");
std::string RenderFlipLayersChart(const LayersResult& layers, size_t flip_index, const std::string& id_prefix = "");
// One flip of the layers document as one line of HTML: tokens, birth, largest growth, logits' difference.
std::string FlipLayersLine(const LayersFlip& flip);
// The experiment report's section for results["layers"] (the [layers] table): per configuration
// the birth counts, the small-multiples chart and each flip's own chart; "" when there are none.
std::string HtmlLayersSection(const ExperimentResults& results);

// Plain-text tables and facts that the HTML and Markdown renderers both lay out.
struct TextTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};
// Column titles of the ranking table ("#", "Configuration", metrics...; the distance to the
// exact reference where the results have one).
std::vector<std::string> RankingHeader(const ExperimentResults& results);
// The metric cells of a measured row, in RankingHeader order after "#" and "Configuration".
std::vector<std::string> RankingCells(const ExperimentResults& results, const ConfigRow& row);
// The "#" cell: the tie group, "2=" when others share it; the plain rank without tie groups.
std::string RankCell(const ConfigRow& row);
// What the ranking's order rests on (recipe.ranking_key, the configurations whose forks were not
// followed, the tie groups) in sentences; a fallback for results written before it was recorded.
std::string RankingKeyText(const ExperimentResults& results);
// The tie groups of more than one configuration, one line each: "kv-q8_0, fa-off: indistinguishable
// on this workload (ordered by the memory each needs)".
std::vector<std::string> TieLines(const ExperimentResults& results);
// What the recommendation rests on and how sure it is (recipe.basis); "" when not recorded.
std::string RecommendationBasis(const ExperimentResults& results);
// Per-window medians over repeats of one field, one column per configuration with comparisons.
// `ranked_replay`: each row's figures from the replay it is ranked by (MeasurementsOf); false: from
// results.measured as they are (a chart of other comparisons put there).
TextTable WindowTable(const ExperimentResults& results, WindowFigure figure, bool percent, bool ranked_replay = true);
// The repeat floor alone (load 0) and under each load (results["load_floor"], docs/load.md) side
// by side; no rows when the experiment measured no load.
TextTable LoadFloorTable(const ExperimentResults& results);
// Every configuration against the exact reference (results["reference"]["summary"]: median over
// repeats, the median repeat's counts and interval) beside its figures against the baseline; no
// rows without the reference.
TextTable ExactTable(const ExperimentResults& results);
// Which configuration is closest to the exact reference (flip rate, then KL), those its interval
// does not tell apart, the baseline's distance, and, where the variant nearest the baseline is not
// the variant nearest exact, both; "" without the reference.
std::string ExactClosestSentence(const ExperimentResults& results);
// " Served twins (NAME@served) ..." where the exact table holds them; "" otherwise.
std::string ExactServedNote(const ExperimentResults& results);
// replay = "both" (results["served"], docs/served.md).
// What the served part measured, how it compares, whether the ranking changed, and what was
// not captured served; "" without a served part.
std::string ReplaySentence(const ExperimentResults& results);
// Per configuration its prefill capture against its served one: flips, KL, bit-identical rows,
// and the flips where the model wrote the predicted token, inside tool calls, and elsewhere.
TextTable ReplayDistanceTable(const ExperimentResults& results);
// The same distance's flip rate per window, one column per configuration.
TextTable ReplayWindowTable(const ExperimentResults& results);
// Each configuration's place and figures under prefill replay and under served replay.
TextTable ReplayRankingTable(const ExperimentResults& results);
// Whether any ranked row carries its prefill-vs-served distance (the ranking then shows it).
bool HasServedDistance(const ExperimentResults& results);
// A ranked row's prefill-vs-served distance, "3 / 816 (0.368%)"; "—" when it has none.
std::string ServedDistanceCell(const ConfigRow& row);
// How the recipe ranked (recipe.ranked_by) and, per configuration whose forks were followed,
// how many of its forks started from the token generation reproduced; "" when it says neither.
std::string RecipeRankedBy(const ExperimentResults& results);
// The recipe's warnings, one sentence each (a configuration fine alone that flips under load).
std::vector<std::string> RecipeWarnings(const ExperimentResults& results);
// What the recipe's memory budget covers (weights and KV cache), for the KV table's caption.
std::string RecipeBudgetText(const RecipeResult& recipe);
// The recommended command's KV cache as llama.cpp allocates it, one sentence; "" when unknown.
std::string RecipeMemoryLine(const RecipeResult& recipe);
// The name shown above recipe.server_command: "llama-server", or for a server configuration
// "launch command (as run)".
std::string RecipeServerLabel(const RecipeResult& recipe);
// For a server configuration, what its command is (recipe.server_launch.note), one sentence; ""
// for a llama configuration.
std::string RecipeLaunchLine(const RecipeResult& recipe);
// Whether the recommended command was served and matched the capture (recipe.verification), one
// sentence: "... matched N/N probes ...", where it did not, or why it is unverified.
std::string RecipeVerificationLine(const RecipeResult& recipe);
// One fact a divergence claim rests on (model, workload, engine, method), grouped for display.
struct Fact {
  std::string group, term, value;
  bool code = false;  // a hash, path or command: shown in monospace
};
// Every disclosure fact that results holds; absent ones are left out.
std::vector<Fact> Disclosure(const ExperimentResults& results);

// The report page's inline CSS, shared by the other pages that show its sections (history.html).
const char* PageStyle();

// HTML pieces shared by the page's sections (cells are HTML already escaped by the caller).
std::string HtmlRow(const std::vector<std::string>& cells, bool header = false);
// The sections after the charts, each a <section> with an id: flips, branches, disclosure.
// HtmlDisclosureSection also lists every configuration's flags and captures.
std::string HtmlFlipsSection(const ExperimentResults& results);
std::string HtmlBranchesSection(const ExperimentResults& results);
std::string HtmlDisclosureSection(const ExperimentResults& results);

}  // namespace report

}  // namespace flipscope
