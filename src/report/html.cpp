// The HTML page: head with inline CSS, the headline, ranking table, the two charts and the
// recipe; the detail sections come from html_detail.cpp. Every piece of data is escaped.
#include <fmt/format.h>

#include <cctype>

#include "report/internal.h"
#include "util/util.h"

namespace flipscope {

using nlohmann::json;
using report::Count;
using report::Num;
using report::Percent;
using report::Small;
using report::Str;
using report::Sub;

namespace {

std::string E(std::string_view s) { return HtmlEscape(s); }

constexpr const char* kStyle = R"CSS(
:root { --fg:#1a1a1a; --muted:#555; --line:#d0d0d0; --bg-alt:#f5f6f8; --accent:#0b5cad; --bad:#a1260d; --ok:#1d6b32; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); margin: 0;
       background: #fff; }
header, main, footer { max-width: 1180px; margin: 0 auto; padding: 0 20px; }
header { padding-top: 20px; border-bottom: 2px solid var(--line); }
h1 { font-size: 1.6em; margin: 0.2em 0; }
h2 { font-size: 1.3em; margin-top: 1.8em; border-bottom: 1px solid var(--line); }
h3 { font-size: 1.05em; margin-bottom: 0.3em; }
.meta { color: var(--muted); margin: 0.2em 0 0.8em; }
nav ul { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: 4px 16px; margin: 0.5em 0 1em; }
a { color: var(--accent); }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.92em; }
th, td { border: 1px solid var(--line); padding: 4px 8px; vertical-align: top; text-align: left; }
thead th { background: var(--bg-alt); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody.not-measured td { background: #fbf3f1; }
tbody.tie-group { border-top: 2px solid #bbb; }
tbody.tied td { background: #f3f6fb; }
.table-wrap { overflow-x: auto; }
.badge { display: inline-block; border-radius: 3px; padding: 0 6px; font-size: 0.8em; font-weight: 600;
         border: 1px solid currentColor; margin-left: 4px; }
.confident { color: var(--bad); font-weight: 700; }
.badge.rec { color: var(--ok); } .badge.ref { color: var(--accent); }
.badge.bad { color: var(--bad); } .badge.neutral { color: var(--muted); }
figure { margin: 1em 0 1.6em; } svg.chart { width: 100%; max-width: 900px; height: auto; display: block; }
figcaption { color: var(--muted); font-size: 0.92em; max-width: 900px; }
code, pre, .tok { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 0.9em; }
pre { background: var(--bg-alt); padding: 8px 10px; white-space: pre-wrap; word-break: break-word; margin: 0.4em 0; }
code.t { background: var(--bg-alt); padding: 0 3px; white-space: pre; border-radius: 2px; }
td.ctx { min-width: 22em; max-width: 40em; } td.ctx pre { margin: 0; padding: 2px 4px; }
details { margin: 0.4em 0; } summary { cursor: pointer; font-weight: 600; }
.branch { border: 1px solid var(--line); border-radius: 4px; padding: 8px 12px; margin: 1em 0; break-inside: avoid; }
/* A branch record off screen is not laid out until it scrolls near: each is ~150 elements. */
article.branch { content-visibility: auto; contain-intrinsic-size: auto 900px; }
.futures { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
.future { border: 1px solid var(--line); padding: 6px 8px; background: #fff; }
.future h4 { margin: 0 0 4px; font-size: 0.9em; color: var(--muted); }
.tok { white-space: pre-wrap; border-bottom: 1px dotted #999; }
mark.diff { background: #ffe08a; outline: 2px solid #b8860b; }
mark.masked { background: #dbe7ff; outline: 2px dashed #3a5fa8; }
dl.kv { display: grid; grid-template-columns: minmax(10em, 17em) 1fr; gap: 2px 16px; }
dl.kv dt { font-weight: 600; } dl.kv dd { margin: 0; word-break: break-word; }
footer { color: var(--muted); font-size: 0.85em; border-top: 1px solid var(--line); margin-top: 2em;
         padding-bottom: 2em; }
@media (max-width: 700px) { .futures { grid-template-columns: 1fr; } }
@media print {
  nav, .noprint { display: none; } body { font-size: 11pt; } a { color: inherit; text-decoration: none; }
  h2 { break-after: avoid; } tr, figure, .branch { break-inside: avoid; } .table-wrap { overflow: visible; }
}
)CSS";

// Opens every <details> for printing and restores them afterwards.
constexpr const char* kScript = R"JS(
(function () {
  var opened = [];
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details:not([open])").forEach(function (d) { d.open = true; opened.push(d); });
  });
  window.addEventListener("afterprint", function () {
    opened.forEach(function (d) { d.open = false; }); opened = [];
  });
})();
)JS";

std::string Badge(const std::string& cls, const std::string& text) {
  return fmt::format(R"(<span class="badge {}">{}</span>)", cls, E(text));
}

// A text table as an escaped HTML table.
std::string TableHtml(const report::TextTable& t) {
  std::vector<std::string> head;
  for (const std::string& h : t.header) head.push_back(E(h));
  std::string rows;
  for (const auto& cells : t.rows) {
    std::vector<std::string> escaped;
    for (const std::string& c : cells) escaped.push_back(E(c));
    rows += report::HtmlRow(escaped);
  }
  return "<div class=\"table-wrap\"><table><thead>" + report::HtmlRow(head, true) + "</thead><tbody>" + rows +
         "</tbody></table></div>";
}

// The floor alone beside the floor under each load; empty when no load was measured.
std::string LoadFloorSection(const ExperimentResults& r) {
  report::TextTable t = report::LoadFloorTable(r);
  if (t.rows.empty()) return "";
  return "<section id=\"load-floor\"><h2>Repeat floor alone and under load</h2><p>The reference configuration "
         "against its first capture alone, with other sequences sharing its batches (docs/load.md).</p>" +
         TableHtml(t) + "</section>";
}

// One chart over every configuration with comparisons, plus its data as a table (defined below).
std::string ChartFigure(const ExperimentResults& r, const std::string& id, report::WindowFigure field, bool flip_chart,
                        bool against_exact = false);

// Every configuration against the exact reference, and the flip rate per window against it.
std::string ExactSection(const ExperimentResults& r) {
  report::TextTable t = report::ExactTable(r);
  if (t.rows.empty()) return "";
  ExperimentResults shadow = r;  // the same results with the comparisons against exact, for the chart
  shadow.measured.comparisons = r.reference->comparisons;
  return "<section id=\"exact\"><h2>Against the exact reference</h2><p>Every capture compared with the FP64 exact "
         "engine's capture of the same tokens (docs/exact.md): its distance to the weights' true function, beside "
         "its distance to the baseline. Median over repeats; the interval is the median repeat's." +
         E(report::ExactServedNote(r)) + "</p><p>" + E(report::ExactClosestSentence(r)) + "</p>" + TableHtml(t) +
         ChartFigure(shadow, "exact-flip-chart", report::WindowFigure::kFlipRate, true, true) + "</section>";
}

// replay = "both": each configuration's prefill-vs-served distance and the ranking under each.
std::string ServedSection(const ExperimentResults& r) {
  const std::string sentence = report::ReplaySentence(r);
  if (sentence.empty()) return "";
  return "<section id=\"served\"><h2>Prefill against served replay</h2><p>" + E(sentence) +
         "</p><h3>Each configuration, prefill against served</h3><p>Its first prefill capture against its first "
         "served one. &ldquo;Model wrote&rdquo;: probes whose predicted token the model wrote (decode steps under "
         "served replay), of them those inside tool calls; &ldquo;elsewhere&rdquo;: tokens it read.</p>" +
         TableHtml(report::ReplayDistanceTable(r)) + "<h3>Flip rate per window, prefill against served</h3>" +
         TableHtml(report::ReplayWindowTable(r)) +
         "<h3>Ranking under each replay</h3><p>Each replay's configurations against its own baseline.</p>" +
         TableHtml(report::ReplayRankingTable(r)) + "</section>";
}

std::string Headline(const ExperimentResults& r) {
  std::string out = "<section id=\"headline\"><h2>Summary</h2><ul>";
  if (!report::FloorSentence(r).empty()) out += "<li>" + E(report::FloorSentence(r)) + "</li>";
  // The first place, or the first tie group: none of a tie is "the most faithful".
  std::vector<std::string> first;
  int first_group = 0;
  for (const auto& row : report::RankedConfigs(r)) {
    if (!row.Figures() || row.rank == 0) continue;
    if (first.empty()) first_group = row.tie_group;
    if (first.empty() || (first_group > 0 && row.tie_group == first_group))
      first.push_back("<strong>" + E(row.name) + "</strong> (" + E(Percent(row.Figures()->median_flip_rate)) + ", " +
                      E(row.RankedReplay()) + " replay)");
  }
  if (first.size() == 1)
    out += "<li>Most faithful: " + first[0] + ".</li>";
  else if (!first.empty()) {
    std::string names;
    for (const std::string& n : first) names += (names.empty() ? "" : ", ") + n;
    out += "<li>Most faithful, indistinguishable on this workload: " + names + ".</li>";
  }
  if (const std::string exact = report::ExactClosestSentence(r); !exact.empty()) out += "<li>" + E(exact) + "</li>";
  if (r.recipe && !r.recipe->recommended.empty())
    out += fmt::format("<li>Recommended: <strong>{}</strong> — {}. {}</li>", E(r.recipe->recommended),
                       E(r.recipe->reason), E(report::RecommendationBasis(r)));
  for (const std::string& w : report::RecipeWarnings(r)) out += "<li><strong>Warning:</strong> " + E(w) + "</li>";
  return out + "</ul></section>" + LoadFloorSection(r);
}

std::string RankingSection(const ExperimentResults& r) {
  std::string out = "<section id=\"ranking\"><h2>Ranking by fidelity</h2>";
  out += "<p class=\"ranking-key\">" + E(report::RankingKeyText(r)) + "</p>";
  out +=
      "<p>Flip rates are medians over repeats (95% Wilson interval of the median repeat). Damage counts forks "
      "where the candidate broke what the reference's future got right, against repairs, of the forks followed; "
      "flips where the model only reads the next token (tool results, system or user text) are teacher-forced "
      "only: not forked, and never damage. Rows marked <code>2=</code> share a tie group. Configurations that "
      "were not measured, or not ranked (every ranked row is of one replay), are listed last with the reason.</p>";
  for (const std::string& t : report::TieLines(r)) out += "<p class=\"tie-note\">" + E(t) + ".</p>";
  std::vector<std::string> header;
  for (const std::string& h : report::RankingHeader(r)) header.push_back(E(h));
  out += "<div class=\"table-wrap\"><table class=\"ranking\"><thead>" + report::HtmlRow(header, true) + "</thead>";
  std::string refused;
  int open_group = -1;  // each tie group is its own <tbody>, so that a tie reads as one block
  for (const auto& row : report::RankedConfigs(r)) {
    std::string name = "<strong>" + E(row.name) + "</strong>";
    name += Badge("neutral", row.RankedReplay() + " replay");
    if (row.is_baseline) name += Badge("ref", "reference");
    if (row.is_recommended) name += Badge("rec", "recommended");
    if (row.tie_size > 1) name += Badge("neutral", "tie");
    if (!row.description.empty()) name += "<br><small>" + E(row.description) + "</small>";
    if (row.rank == 0) {
      std::string why = row.UnrankedLabel();
      refused += fmt::format(R"(<tr class="refused"><td class="num">—</td><td>{}</td>)"
                             R"(<td colspan="{}" class="reason">{}</td></tr>)",
                             name + Badge(row.state == ConfigStatus::kOk ? "neutral" : "bad", why), header.size() - 2,
                             E(row.reason.empty() ? "no reason given" : row.reason));
      continue;
    }
    if (row.tie_group != open_group || row.tie_group == 0) {
      out += std::string(open_group >= 0 ? "</tbody>" : "") +
             fmt::format(R"(<tbody class="{}" data-tie-group="{}">)", row.tie_size > 1 ? "tie-group tied" : "tie-group",
                         row.tie_group);
      open_group = row.tie_group;
    }
    std::vector<std::string> cells{E(report::RankCell(row)), name};
    for (const std::string& c : report::RankingCells(r, row)) cells.push_back(E(c));
    out += report::HtmlRow(cells);
  }
  if (open_group >= 0) out += "</tbody>";
  if (!refused.empty()) out += "<tbody class=\"not-measured\">" + refused + "</tbody>";
  return out + "</table></div></section>";
}

// One chart over every configuration with comparisons, plus its data as a table.
std::string ChartFigure(const ExperimentResults& r, const std::string& id, report::WindowFigure field, bool flip_chart,
                        bool against_exact) {
  report::Chart chart;
  chart.id = id;
  chart.x_label = "position in the workload (thousand tokens, window centre)";
  chart.log_y = !flip_chart;
  chart.y_percent = flip_chart;
  chart.title = flip_chart ? "Top-1 flip rate per window" : "KL(base‖cand) mean per window (log scale)";
  if (against_exact) chart.title += " against the exact reference";
  chart.y_label = flip_chart ? "flip rate" : "KL mean (nats)";
  chart.description = flip_chart ? "Flip rate per window of each configuration against the reference, median over "
                                   "repeats; the grey band is the reference's repeat floor (95% interval)."
                                 : "Mean KL divergence per window, median over repeats; zeros sit on the bottom edge "
                                   "as hollow markers.";
  if (against_exact)
    chart.description =
        "Flip rate per window of every configuration, the baseline included, against the FP64 exact "
        "engine's capture of the same tokens, median over repeats.";
  auto centre = [](const report::WindowPoint& p) { return (p.begin + p.end) / 2000.0; };
  if (!against_exact && !report::ShownReplaySentence(r).empty())
    chart.description += " " + report::ShownReplaySentence(r);
  for (const auto& row : report::RankedConfigs(r)) {
    // Each row's figures from the replay it is ranked by (the exact chart's are the comparisons given).
    const report::RowMeasurements m =
        against_exact ? report::RowMeasurements{&r.measured, row.name, false} : report::MeasurementsOf(r, row);
    auto pts = report::WindowSeries(m.measured->comparisons, m.config, field);
    if (pts.empty()) continue;
    report::ChartSeries s;
    s.name = row.is_baseline && !against_exact ? row.name + " (repeat)" : row.name;
    for (const auto& p : pts) {
      s.x.push_back(centre(p));
      s.y.push_back(p.value);
      s.tips.push_back(fmt::format("{} · window {} ({}–{}): {} (median of {} repeat{})", row.name, p.index,
                                   Count(p.begin), Count(p.end), flip_chart ? Percent(p.value) : Small(p.value),
                                   p.repeats, p.repeats == 1 ? "" : "s") +
                       (p.merged_probes > 0 ? fmt::format(" · includes the final window's {} probes, too few to "
                                                          "stand alone",
                                                          Count(p.merged_probes))
                                            : ""));
    }
    chart.series.push_back(std::move(s));
    if (!flip_chart || !row.is_baseline || against_exact) continue;
    auto lo = report::WindowSeries(m.measured->comparisons, m.config, report::WindowFigure::kFlipRateLo);
    auto hi = report::WindowSeries(m.measured->comparisons, m.config, report::WindowFigure::kFlipRateHi);
    if (lo.empty() || lo.size() != hi.size()) continue;
    report::ChartBand b{"repeat floor (95% CI)", {}, {}, {}};
    for (size_t i = 0; i < lo.size(); ++i) {
      b.x.push_back(centre(lo[i]));
      b.lo.push_back(lo[i].value);
      b.hi.push_back(hi[i].value);
    }
    chart.band = std::move(b);
  }
  if (chart.series.empty()) return "<p>No per-window data.</p>";
  return fmt::format(
      "<figure id=\"fig-{}\">{}<figcaption>{}</figcaption><details class=\"noprint\"><summary>Data "
      "table</summary>{}</details></figure>",
      id, report::RenderSvgChart(chart), E(chart.description),
      TableHtml(report::WindowTable(r, field, flip_chart, !against_exact)));
}

std::string RecipeSection(const ExperimentResults& r) {
  if (!r.recipe) return "";
  const RecipeResult& recipe = *r.recipe;
  std::string out = "<section id=\"recipe\"><h2>Recipe</h2>";
  if (!recipe.recommended.empty())
    out += fmt::format("<p>Recommended configuration: <strong>{}</strong> — {}</p>", E(recipe.recommended),
                       E(recipe.reason));
  if (const std::string by = report::RecipeRankedBy(r); !by.empty()) out += "<p>" + E(by) + "</p>";
  for (const auto& [label, command] : {std::pair{report::RecipeServerLabel(recipe), recipe.server_command},
                                       std::pair{std::string("llama-cli"), recipe.cli_command}})
    if (!command.empty()) out += fmt::format("<h3>{}</h3><pre><code>{}</code></pre>", label, E(command));
  if (const std::string launch = report::RecipeLaunchLine(recipe); !launch.empty())
    out += "<p id=\"recipe-launch\">" + E(launch) + "</p>";
  out += "<p>" + E(report::RecipeMemoryLine(recipe)) + "</p><p id=\"recipe-verification\">" +
         E(report::RecipeVerificationLine(recipe)) + "</p>";
  if (!recipe.kv_types.empty()) {
    out += fmt::format("<h3>KV cache per type</h3><p>{}.</p>", E(report::RecipeBudgetText(recipe)));
    out +=
        "<table class=\"kv\"><thead>" +
        report::HtmlRow({"KV type", "Bytes per token (full-attention layers)",
                         E("KV cache at -c " + Count(report::Figure(recipe.context))), "Context that fits the budget"},
                        true) +
        "</thead><tbody>";
    for (const RecipeKvType& t : recipe.kv_types)
      out += report::HtmlRow({"<code>" + E(t.type) + "</code>", E(Count(t.bytes_per_token)),
                              E(HumanBytes(t.bytes_at_context.value_or(0))),
                              E(Count(report::Figure(t.context_at_budget)))});
    out += "</tbody></table>";
  }
  return out + "</section>";
}

}  // namespace

std::string report::HtmlRow(const std::vector<std::string>& cells, bool header) {
  std::string out = "<tr>";
  for (size_t i = 0; i < cells.size(); ++i) {
    // The first column of a body row heads it; numbers align right.
    bool numeric = !cells[i].empty() && (std::isdigit(static_cast<unsigned char>(cells[i][0])) || cells[i] == "—");
    const char* attrs = header ? " scope=\"col\"" : numeric && i > 0 ? " class=\"num\"" : "";
    const char* tag = header ? "th" : "td";
    out += fmt::format("<{}{}>{}</{}>", tag, attrs, cells[i], tag);
  }
  return out + "</tr>";
}

const char* report::PageStyle() { return kStyle; }

std::string RenderHtml(const ExperimentResults& r) {
  const std::string name = report::Or(r.name, "experiment");
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">";
  out += "<title>flipscope report: " + E(name) + "</title><style>" + kStyle + "</style></head><body>";
  out += "<header><h1>flipscope report: " + E(name) + "</h1>";
  out += fmt::format(
      "<p class=\"meta\">Model <strong>{}</strong> · workload <code>{}</code> ({} tokens) · "
      "created {} · flipscope {}</p>",
      E(report::ModelName(r)), E(report::Or(r.workload.facts.path, "?")), E(Count(report::Tokens(r))),
      E(report::Or(r.created)), E(report::Or(r.flipscope_version)));
  // Navigation to the sections this document has (the recipe is optional).
  out += "<nav aria-label=\"Sections\"><ul>";
  for (const auto& [id, title] : std::vector<std::pair<std::string, std::string>>{{"headline", "Summary"},
                                                                                  {"ranking", "Ranking"},
                                                                                  {"exact", "Exact"},
                                                                                  {"served", "Served"},
                                                                                  {"charts", "Charts"},
                                                                                  {"flips", "Flips"},
                                                                                  {"branches", "Branches"},
                                                                                  {"layers", "Layers"},
                                                                                  {"recipe", "Recipe"},
                                                                                  {"disclosure", "Disclosure"}})
    if ((id != "recipe" || r.recipe.has_value()) && (id != "layers" || (r.layers && !r.layers->empty())) &&
        (id != "exact" || r.reference) && (id != "served" || r.served))
      out += fmt::format("<li><a href=\"#{}\">{}</a></li>", id, title);
  out += "</ul></nav></header><main>";
  out += Headline(r) + RankingSection(r) + ExactSection(r) + ServedSection(r);
  out += "<section id=\"charts\"><h2>Divergence along the workload</h2>";
  out += ChartFigure(r, "flip-chart", report::WindowFigure::kFlipRate, true) +
         ChartFigure(r, "kl-chart", report::WindowFigure::kKlMean, false);
  out += "</section>";
  out += report::HtmlFlipsSection(r) + report::HtmlBranchesSection(r) + report::HtmlLayersSection(r) +
         RecipeSection(r) + report::HtmlDisclosureSection(r);
  out += "</main><footer><p>Written by flipscope " + E(report::Or(r.flipscope_version)) +
         ". This file is self-contained: it loads nothing from the network.</p></footer>";
  out += std::string("<script>") + kScript + "</script></body></html>\n";
  return out;
}

}  // namespace flipscope
