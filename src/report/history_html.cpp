// The history page (history.html): one workload over several llama.cpp versions, from the
// history stage's history.json (docs/history.md): the versions as recorded by their captures,
// each step's flips, KL and bit-identical rows with a per-window chart, each version's distance
// to exact, and the forks followed at the flips of the step that changed most.
#include <fmt/format.h>

#include "report/internal.h"
#include "util/util.h"

namespace flipscope {

using nlohmann::json;
using report::Count;
using report::HtmlRow;
using report::Num;
using report::Percent;
using report::Small;
using report::Str;
using report::Sub;

namespace {

std::string E(std::string_view s) { return HtmlEscape(s); }

// A json array to iterate over whatever the document holds (empty when absent or not an array).
const json& List(const json& j, std::string_view key) {
  static const json kEmpty = json::array();
  const json& v = Sub(j, key);
  return v.is_array() ? v : kEmpty;
}

std::string StepName(const json& s) { return Str(s, "base", "?") + " → " + Str(s, "cand", "?"); }

// "3 of 134" bit-identical rows, with the whole step's verdict when every row matched.
std::string BitIdenticalCell(const json& s) {
  const auto bit = Num(s, "bit_identical"), probes = Num(s, "probes");
  std::string cell = E(Count(bit)) + " of " + E(Count(probes));
  if (bit && probes && *bit == *probes) cell += " <span class=\"badge rec\">bit for bit</span>";
  return cell;
}

// One row per comparison: flips (rate and interval), KL, bit-identical rows.
std::string StepTable(const json& steps, const std::string& cls) {
  std::string out = "<div class=\"table-wrap\"><table class=\"" + cls + "\"><thead>" +
                    HtmlRow({"Step", "Probes", "Flips", "Flip rate (95% CI)", "Confident flips", "KL mean", "KL p99",
                             "KL max", "Bit-identical rows"},
                            true) +
                    "</thead><tbody>";
  for (const json& s : steps) {
    const json& ci = Sub(s, "flip_rate_ci");
    const std::string interval =
        ci.is_array() && ci.size() == 2 && ci[0].is_number() && ci[1].is_number()
            ? fmt::format(" ({} to {})", Percent(ci[0].get<double>(), 2), Percent(ci[1].get<double>(), 2))
            : "";
    out += HtmlRow({E(StepName(s)), E(Count(Num(s, "probes"))), E(Count(Num(s, "flips"))),
                    E(Percent(Num(s, "flip_rate"), 2) + interval), E(Count(Num(s, "confident_flips"))),
                    E(Small(Num(s, "kl_mean"))), E(Small(Num(s, "kl_p99"))), E(Small(Num(s, "kl_max"))),
                    BitIdenticalCell(s)});
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
std::string ConfigurationsSection(const json& doc) {
  std::vector<std::vector<std::string>> rows;
  for (const json& v : List(doc, "versions"))
    rows.push_back({"<strong>" + E(Str(v, "release", "?")) + "</strong>", E(Str(v, "engine", "?")),
                    "<code>" + E(Str(v, "flags")) + "</code>", E(Str(Sub(v, "server"), "version", "—")),
                    E(Str(v, "llama_cpp", "—")), E(Str(v, "kernel_path", "—"))});
  return VersionTable("Configurations",
                      "Each configuration as its capture recorded it, in the order given; every capture is of the "
                      "same token ids.",
                      {"Configuration", "Engine", "Ran with", "Server version", "llama.cpp", "Kernel path"}, rows);
}

// The versions as their captures recorded them: release, llama.cpp commit, build, kernel path, times.
std::string VersionsSection(const json& doc) {
  if (Str(doc, "kind") == "configurations") return ConfigurationsSection(doc);
  std::vector<std::vector<std::string>> rows;
  for (const json& v : List(doc, "versions")) {
    const json& src = Sub(v, "llama_source");
    const bool reused = Sub(v, "reused") == true;
    rows.push_back({"<strong>" + E(Str(v, "release", "?")) + "</strong>",
                    "<code>" + E(Str(src, "commit", "?")) + "</code>", "<code>" + E(Str(src, "build", "?")) + "</code>",
                    E(Str(v, "kernel_path", "?")), reused ? "reused" : E(Small(Num(v, "capture_seconds"))),
                    E(Small(Num(v, "worker_build_seconds")))});
  }
  return VersionTable(
      "Versions",
      "Each version's capture ran in its own process built against that llama.cpp, fed the same "
      "token ids; what follows is what each capture's manifest records.",
      {"Version", "llama.cpp commit", "Build", "Kernel path", "Capture seconds", "Worker build seconds"}, rows);
}

// Per-window series of each step: window midpoints against field (flip_rate is flips / probes).
report::Chart WindowChart(const json& doc, const std::string& field) {
  report::Chart c;
  const bool rate = field == "flip_rate";
  c.id = "history-" + field;
  c.title = rate ? "Flip rate per window, each step" : "KL mean per window, each step";
  c.description = rate ? "Share of probes whose greedy token changed from one version to the next, per window"
                       : "Mean KL(before‖after) per window of each step (log scale)";
  c.x_label = "token position (window middle)";
  c.y_label = rate ? "flip rate" : "KL mean";
  c.y_percent = rate;
  c.log_y = !rate;
  for (const json& s : List(doc, "steps")) {
    report::ChartSeries series{StepName(s), {}, {}, {}};
    for (const json& w : List(s, "windows")) {
      const double begin = Num(w, "begin").value_or(0), end = Num(w, "end").value_or(begin);
      const double probes = Num(w, "probes").value_or(0), flips = Num(w, "flips").value_or(0);
      const double y = rate ? (probes > 0 ? flips / probes : 0) : Num(w, "kl_mean").value_or(0);
      series.x.push_back((begin + end) / 2);
      series.y.push_back(y);
      series.tips.push_back(fmt::format("{} tokens {}-{}: {} flips of {} probes, KL mean {}", series.name, begin, end,
                                        flips, probes, Small(Num(w, "kl_mean"))));
    }
    c.series.push_back(std::move(series));
  }
  return c;
}

std::string StepsSection(const json& doc) {
  std::string out =
      "<section id=\"steps\"><h2>Each version against the one before</h2><p>A flip is a probe whose greedy token "
      "differs; KL is KL(before‖after) over the stored distributions; a bit-identical row is one whose logits "
      "did not change in a single bit.</p>" +
      StepTable(List(doc, "steps"), "history-steps");
  if (!List(doc, "from_first").empty())
    out += "<h3>Each version against the first</h3>" + StepTable(List(doc, "from_first"), "history-from-first");
  out += "</section><section id=\"windows\"><h2>Per window</h2>";
  for (const char* field : {"flip_rate", "kl_mean"}) {
    report::Chart c = WindowChart(doc, field);
    out += "<figure>" + report::RenderSvgChart(c) + "<figcaption>" + E(c.description) + ".</figcaption></figure>";
  }
  return out + "</section>";
}

// Whether going from the version before to this one moved the numbers toward exact: the paired
// test's direction and interval (history.json's from_before); a file without it gives the means'
// change and no direction.
std::string MoveCell(const json& before, const json& now) {
  const auto a = Num(before, "kl_mean"), b = Num(now, "kl_mean");
  if (!a || !b) return "—";
  const int64_t flips = int64_t(Num(now, "flips").value_or(0) - Num(before, "flips").value_or(0));
  const json& d = Sub(now, "from_before");
  const json& ci = Sub(d, "kl_change_ci");
  if (d.is_object() && ci.is_array() && ci.size() == 2 && ci[0].is_number() && ci[1].is_number())
    return fmt::format("{} ({:+.3g} KL per probe, 95% {:+.3g} to {:+.3g}; {:+} flips)", Str(d, "direction", "?"),
                       Num(d, "kl_change_mean").value_or(0), ci[0].get<double>(), ci[1].get<double>(), flips);
  return fmt::format("{:+.3g} KL, {:+} flips", *b - *a, flips);
}

std::string ExactSection(const json& doc) {
  const json& x = List(doc, "to_exact");
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
    out += HtmlRow({"<strong>" + E(Str(x[i], "cand", "?")) + "</strong>", E(Count(Num(x[i], "flips"))),
                    E(Percent(Num(x[i], "flip_rate"), 2)), E(Small(Num(x[i], "kl_mean"))),
                    E(Small(Num(x[i], "kl_max"))), BitIdenticalCell(x[i]), i ? E(MoveCell(x[i - 1], x[i])) : "—"});
    kl.x.push_back(double(i + 1));
    kl.y.push_back(Num(x[i], "kl_mean").value_or(0));
    kl.tips.push_back(Str(x[i], "cand", "?") + ": KL mean " + Small(Num(x[i], "kl_mean")) + ", " +
                      Count(Num(x[i], "flips")) + " flips against exact");
  }
  c.series.push_back(std::move(kl));
  return out + "</tbody></table></div><figure>" + report::RenderSvgChart(c) + "<figcaption>" + E(c.description) +
         ".</figcaption></figure></section>";
}

// The flips of the step that changed most, and the forks followed there when the history has them.
std::string ForksSection(const json& doc) {
  std::string out = "<section id=\"forks\"><h2>Forks at the step that changed most</h2>";
  const auto best = Num(doc, "changed_most");
  const json& steps = List(doc, "steps");
  if (!best || *best < 0 || size_t(*best) >= steps.size()) return out + "<p>No step.</p></section>";
  const json& s = steps[size_t(*best)];
  out += "<p>The step with the most flips (then the largest KL mean): <strong>" + E(StepName(s)) + "</strong>, " +
         E(Count(Num(s, "flips"))) + " flips.</p>";
  if (!List(s, "flip_list").empty()) {
    out += "<div class=\"table-wrap\"><table class=\"history-flips\"><thead>" +
           HtmlRow({"Position", "Before", "After", "Before's top-1 probability", "KL", "Class"}, true) +
           "</thead><tbody>";
    for (const json& f : List(s, "flip_list"))
      out += HtmlRow({E(Count(Num(f, "position"))),
                      "<code class=\"t\">" + E(VisibleToken(Str(f, "base_text"))) + "</code>",
                      "<code class=\"t\">" + E(VisibleToken(Str(f, "cand_text"))) + "</code>",
                      Num(f, "base_prob") ? fmt::format("{:.3f}", *Num(f, "base_prob")) : "—", E(Small(Num(f, "kl"))),
                      E(Str(f, "class"))});
    out += "</tbody></table></div>";
  }
  const json& forks = Sub(doc, "forks");
  if (!forks.is_object() && List(s, "flip_list").empty())
    return out + "<p>No greedy choice changed at this step: there is no fork to follow.</p></section>";
  if (!forks.is_object() && Str(doc, "kind") == "configurations")
    return out +
           "<p>The run follows forks between the baseline and a variant (its <code>[branch]</code>); this "
           "step is not one of those, so its forks were not followed.</p></section>";
  if (!forks.is_object())
    return out +
           "<p>The forks were not followed in this history: <code>flipscope history --forks N</code> (or "
           "<code>forks = N</code> in <code>[history]</code>) follows them, each side's futures decoded by its "
           "own version.</p></section>";
  out += "<p>" + E(Str(forks, "how")) + "</p>";
  ExperimentResults one;  // the experiment report's branch section over this one pair, nested in this one
  one.measured.branches = {BranchRecord::FromJson({{"config", StepName(s)},
                                                   {"counts", Sub(forks, "counts")},
                                                   {"records", Sub(forks, "records")},
                                                   {"branch_config", Sub(forks, "config")}})};
  return out + report::HtmlBranchesSection(one) + "</section>";
}

}  // namespace

std::string RenderHistoryHtml(const json& doc) {
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>flipscope history</title>"
      "<style>" +
      std::string(report::PageStyle()) + "</style></head><body><header>";
  if (Str(doc, "kind") == "configurations")
    out += fmt::format(
        "<h1>History across configurations</h1><p class=\"meta\">Model <code>{}</code> · workload "
        "<code>{}</code> ({} tokens)</p>",
        E(Str(doc, "model", "?")), E(Str(doc, "workload", "?")), E(Count(Num(doc, "n_tokens"))));
  else
    out += fmt::format(
        "<h1>History across llama.cpp versions</h1><p class=\"meta\">Model <code>{}</code> · "
        "workload <code>{}</code> ({} tokens) · flags <code>{}</code> · llama.cpp CPU build "
        "<code>{}</code></p>",
        E(Str(doc, "model", "?")), E(Str(doc, "workload", "?")), E(Count(Num(doc, "n_tokens"))), E(Str(doc, "flags")),
        E(Str(doc, "cpu", "?")));
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
