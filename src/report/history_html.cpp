// The history page (history.html): one workload over several llama.cpp versions, from the
// history stage's history.json (docs/history.md): the versions as recorded by their captures,
// each step's flips, KL and bit-identical rows with a per-window chart, each version's distance
// to exact, and the forks followed at the flips of the step that changed most.
#include <fmt/format.h>

#include <cmath>

#include "report/internal.h"
#include "util/util.h"

namespace flipscope {

using report::Count;
using report::HtmlRow;
using report::Percent;
using report::Small;

namespace {

std::string E(std::string_view s) { return HtmlEscape(s); }

// A figure for the cells: none for NaN (a figure the file holds as null).
std::optional<double> Fig(double v) { return std::isnan(v) ? std::nullopt : std::optional<double>(v); }

std::string StepName(const HistoryComparison& s) { return s.base + " → " + s.cand; }

// "3 of 134" bit-identical rows, with the whole step's verdict when every row matched.
std::string BitIdenticalCell(const HistoryComparison& s) {
  std::string cell = E(Count(double(s.bit_identical))) + " of " + E(Count(double(s.probes)));
  if (s.bit_identical == s.probes) cell += " <span class=\"badge rec\">bit for bit</span>";
  return cell;
}

// One row per comparison: flips (rate and interval), KL, bit-identical rows.
std::string StepTable(const std::vector<HistoryComparison>& steps, const std::string& cls) {
  std::string out = "<div class=\"table-wrap\"><table class=\"" + cls + "\"><thead>" +
                    HtmlRow({"Step", "Probes", "Flips", "Flip rate (95% CI)", "Confident flips", "KL mean", "KL p99",
                             "KL max", "Bit-identical rows"},
                            true) +
                    "</thead><tbody>";
  for (const HistoryComparison& s : steps) {
    const auto& ci = s.flip_rate_ci;
    const std::string interval =
        std::isnan(ci[0]) || std::isnan(ci[1]) ? "" : fmt::format(" ({} to {})", Percent(ci[0], 2), Percent(ci[1], 2));
    out += HtmlRow({E(StepName(s)), E(Count(double(s.probes))), E(Count(double(s.flips))),
                    E(Percent(Fig(s.flip_rate), 2) + interval), E(Count(double(s.confident_flips))),
                    E(Small(Fig(s.kl_mean))), E(Small(Fig(s.kl_p99))), E(Small(Fig(s.kl_max))), BitIdenticalCell(s)});
  }
  return out + "</tbody></table></div>";
}

// The versions' section: a title, a sentence, and one table row per version.
std::string VersionTable(const std::string& title, const std::string& intro, const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows) {
  std::string out = "<section id=\"versions\"><h2>" + title + "</h2><p>" + intro +
                    "</p><div class=\"table-wrap\"><table class=\"versions\"><thead>" + HtmlRow(header, true) +
                    "</thead><tbody>";
  for (const auto& r : rows) out += HtmlRow(r);
  return out + "</tbody></table></div></section>";
}

// A history of configurations (kind "configurations"): how each capture ran, as its manifest says.
std::string ConfigurationsSection(const HistoryResult& doc) {
  std::vector<std::vector<std::string>> rows;
  for (const HistoryVersion& v : doc.versions)
    rows.push_back({"<strong>" + E(report::Or(v.release)) + "</strong>", E(v.engine.value_or("?")),
                    "<code>" + E(v.flags.value_or("")) + "</code>", E(v.server ? v.server->version : "—"),
                    E(v.llama_cpp.value_or("—")), E(v.kernel_path.value_or("—"))});
  return VersionTable("Configurations",
                      "Each configuration as its capture recorded it, in the order given; every capture is of the "
                      "same token ids.",
                      {"Configuration", "Engine", "Ran with", "Server version", "llama.cpp", "Kernel path"}, rows);
}

// The versions as their captures recorded them: release, llama.cpp commit, build, kernel path, times.
std::string VersionsSection(const HistoryResult& doc) {
  if (doc.OfConfigurations()) return ConfigurationsSection(doc);
  std::vector<std::vector<std::string>> rows;
  for (const HistoryVersion& v : doc.versions) {
    const std::optional<EngineSource>& src = v.llama_source;
    rows.push_back({"<strong>" + E(report::Or(v.release)) + "</strong>",
                    "<code>" + E(src ? src->commit : "?") + "</code>", "<code>" + E(src ? src->build : "?") + "</code>",
                    E(v.kernel_path.value_or("?")), v.reused.value_or(false) ? "reused" : E(Small(v.capture_seconds)),
                    E(Small(v.worker_build_seconds))});
  }
  return VersionTable(
      "Versions",
      "Each version's capture ran in its own process built against that llama.cpp, fed the same "
      "token ids; what follows is what each capture's manifest records.",
      {"Version", "llama.cpp commit", "Build", "Kernel path", "Capture seconds", "Worker build seconds"}, rows);
}

// Per-window series of each step: window midpoints against the flip rate (flips / probes) or the KL mean.
report::Chart WindowChart(const HistoryResult& doc, bool rate) {
  report::Chart c;
  c.id = std::string("history-") + (rate ? "flip_rate" : "kl_mean");
  c.title = rate ? "Flip rate per window, each step" : "KL mean per window, each step";
  c.description = rate ? "Share of probes whose greedy token changed from one version to the next, per window"
                       : "Mean KL(before‖after) per window of each step (log scale)";
  c.x_label = "token position (window middle)";
  c.y_label = rate ? "flip rate" : "KL mean";
  c.y_percent = rate;
  c.log_y = !rate;
  for (const HistoryComparison& s : doc.steps) {
    report::ChartSeries series{StepName(s), {}, {}, {}};
    for (const HistoryWindow& w : s.windows) {
      const double begin = double(w.begin), end = double(w.end);
      const double probes = double(w.probes), flips = double(w.flips);
      const double kl = Fig(w.kl_mean).value_or(0);
      series.x.push_back((begin + end) / 2);
      series.y.push_back(rate ? (probes > 0 ? flips / probes : 0) : kl);
      series.tips.push_back(fmt::format("{} tokens {}-{}: {} flips of {} probes, KL mean {}", series.name, begin, end,
                                        flips, probes, Small(Fig(w.kl_mean))));
    }
    c.series.push_back(std::move(series));
  }
  return c;
}

std::string StepsSection(const HistoryResult& doc) {
  std::string out =
      "<section id=\"steps\"><h2>Each version against the one before</h2><p>A flip is a probe whose greedy token "
      "differs; KL is KL(before‖after) over the stored distributions; a bit-identical row is one whose logits "
      "did not change in a single bit.</p>" +
      StepTable(doc.steps, "history-steps");
  if (!doc.from_first.empty())
    out += "<h3>Each version against the first</h3>" + StepTable(doc.from_first, "history-from-first");
  out += "</section><section id=\"windows\"><h2>Per window</h2>";
  for (const bool rate : {true, false}) {
    report::Chart c = WindowChart(doc, rate);
    out += "<figure>" + report::RenderSvgChart(c) + "<figcaption>" + E(c.description) + ".</figcaption></figure>";
  }
  return out + "</section>";
}

// Whether going from the version before to this one moved the numbers toward exact: the paired
// test's direction and interval (history.json's from_before); a file without it gives the means'
// change and no direction.
std::string MoveCell(const HistoryComparison& before, const HistoryComparison& now) {
  if (std::isnan(before.kl_mean) || std::isnan(now.kl_mean)) return "—";
  const int64_t flips = now.flips - before.flips;
  if (const auto& d = now.from_before; d && !std::isnan(d->ci[0]) && !std::isnan(d->ci[1]))
    return fmt::format("{} ({:+.3g} KL per probe, 95% {:+.3g} to {:+.3g}; {:+} flips)", report::Or(d->direction),
                       Fig(d->mean).value_or(0), d->ci[0], d->ci[1], flips);
  return fmt::format("{:+.3g} KL, {:+} flips", now.kl_mean - before.kl_mean, flips);
}

std::string ExactSection(const HistoryResult& doc) {
  const std::vector<HistoryComparison>& x = doc.to_exact;
  std::string out = "<section id=\"exact\"><h2>Distance to exact</h2>";
  if (x.empty())
    return out +
           "<p>No exact reference in this history (<code>--reference exact</code> adds the FP64 exact "
           "engine's capture of the same tokens).</p></section>";
  out +=
      "<p>Each version against the FP64 exact engine's capture of the same tokens (docs/exact.md): did an "
      "upgrade move the numbers toward the weights' true function or away from it?</p>"
      "<div class=\"table-wrap\"><table class=\"history-exact\"><thead>" +
      HtmlRow({"Version", "Flips against exact", "Flip rate", "KL(exact‖version) mean", "KL max", "Bit-identical rows",
               "From the version before"},
              true) +
      "</thead><tbody>";
  report::Chart c;
  c.id = "history-exact";
  c.title = "Distance to exact, each version";
  c.description = "Mean KL(exact‖version) of each version in order (log scale)";
  c.x_label = "version (order)";
  c.y_label = "KL mean";
  c.log_y = true;
  report::ChartSeries kl{"KL(exact‖version) mean", {}, {}, {}};
  for (size_t i = 0; i < x.size(); ++i) {
    out += HtmlRow({"<strong>" + E(report::Or(x[i].cand)) + "</strong>", E(Count(double(x[i].flips))),
                    E(Percent(Fig(x[i].flip_rate), 2)), E(Small(Fig(x[i].kl_mean))), E(Small(Fig(x[i].kl_max))),
                    BitIdenticalCell(x[i]), i ? E(MoveCell(x[i - 1], x[i])) : "—"});
    kl.x.push_back(double(i + 1));
    kl.y.push_back(Fig(x[i].kl_mean).value_or(0));
    kl.tips.push_back(report::Or(x[i].cand) + ": KL mean " + Small(Fig(x[i].kl_mean)) + ", " +
                      Count(double(x[i].flips)) + " flips against exact");
  }
  c.series.push_back(std::move(kl));
  return out + "</tbody></table></div><figure>" + report::RenderSvgChart(c) + "<figcaption>" + E(c.description) +
         ".</figcaption></figure></section>";
}

// The flips of one step, a row each.
std::string FlipTable(const HistoryComparison& s) {
  std::string out = "<div class=\"table-wrap\"><table class=\"history-flips\"><thead>" +
                    HtmlRow({"Position", "Before", "After", "Before's top-1 probability", "KL", "Class"}, true) +
                    "</thead><tbody>";
  for (const HistoryFlip& f : s.flip_list)
    out += HtmlRow({E(Count(double(f.position))), "<code class=\"t\">" + E(VisibleToken(f.base_text)) + "</code>",
                    "<code class=\"t\">" + E(VisibleToken(f.cand_text)) + "</code>",
                    f.base_prob ? fmt::format("{:.3f}", *f.base_prob) : "—", E(Small(Fig(f.kl))), E(f.klass)});
  return out + "</tbody></table></div>";
}

// The flips of the step that changed most, and the forks followed there when the history has them.
std::string ForksSection(const HistoryResult& doc) {
  std::string out = "<section id=\"forks\"><h2>Forks at the step that changed most</h2>";
  const HistoryComparison* s = doc.ChangedMost();
  if (!s) return out + "<p>No step.</p></section>";
  out += "<p>The step with the most flips (then the largest KL mean): <strong>" + E(StepName(*s)) + "</strong>, " +
         E(Count(double(s->flips))) + " flips.</p>";
  if (!s->flip_list.empty()) out += FlipTable(*s);
  if (!doc.forks && s->flip_list.empty())
    return out + "<p>No greedy choice changed at this step: there is no fork to follow.</p></section>";
  if (!doc.forks && doc.OfConfigurations())
    return out +
           "<p>The run follows forks between the baseline and a variant (its <code>[branch]</code>); this "
           "step is not one of those, so its forks were not followed.</p></section>";
  if (!doc.forks)
    return out +
           "<p>The forks were not followed in this history: <code>flipscope history --forks N</code> (or "
           "<code>forks = N</code> in <code>[history]</code>) follows them, each side's futures decoded by its "
           "own version.</p></section>";
  out += "<p>" + E(doc.forks->how) + "</p>";
  ExperimentResults one;  // the experiment report's branch section over this one pair, nested in this one
  BranchRecord record;
  record.config = StepName(*s);
  record.result = doc.forks->result;
  one.measured.branches = {std::move(record)};
  return out + report::HtmlBranchesSection(one) + "</section>";
}

}  // namespace

std::string RenderHistoryHtml(const HistoryResult& doc) {
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>flipscope history</title>"
      "<style>" +
      std::string(report::PageStyle()) + "</style></head><body><header>";
  const std::string tokens = E(Count(double(doc.n_tokens)));
  if (doc.OfConfigurations())
    out += fmt::format(
        "<h1>History across configurations</h1><p class=\"meta\">Model <code>{}</code> · workload "
        "<code>{}</code> ({} tokens)</p>",
        E(report::Or(doc.model)), E(report::Or(doc.workload)), tokens);
  else
    out += fmt::format(
        "<h1>History across llama.cpp versions</h1><p class=\"meta\">Model <code>{}</code> · "
        "workload <code>{}</code> ({} tokens) · flags <code>{}</code> · llama.cpp CPU build "
        "<code>{}</code></p>",
        E(report::Or(doc.model)), E(report::Or(doc.workload)), tokens, E(doc.flags), E(report::Or(doc.cpu)));
  out += "<nav aria-label=\"Sections\"><ul>";
  for (const auto& [id, title] :
       {std::pair{"versions", "Versions"}, std::pair{"steps", "Steps"}, std::pair{"windows", "Per window"},
        std::pair{"exact", "Exact"}, std::pair{"forks", "Forks"}})
    out += fmt::format("<li><a href=\"#{}\">{}</a></li>", id, title);
  out +=
      "</ul></nav></header><main>" + VersionsSection(doc) + StepsSection(doc) + ExactSection(doc) + ForksSection(doc);
  return out + "</main><footer>Written by flipscope history from history.json.</footer></body></html>\n";
}

}  // namespace flipscope
