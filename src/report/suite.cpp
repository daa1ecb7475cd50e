// The suite's report (report.md, report.html in the suite's folder): the pooled figures with
// both intervals, the recipe on them and where a session ranks otherwise, one table per
// configuration with a row per session and its concentration flag, flips and KL by kind of text,
// and the flip rate per window of token depth, every session on one chart.
#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <set>

#include "report/internal.h"
#include "report/report.h"
#include "util/util.h"

namespace flipscope {

using namespace report;

namespace {

std::string Ci(const Interval& i) { return Percent(i[0], 2) + " – " + Percent(i[1], 2); }
std::string Rate(const std::optional<PooledFigure>& f) {
  return f ? Percent(f->value, 2) + " [" + Ci(f->ci) + "]" : "—";
}

// A configuration's concentration flag as a sentence; "" when none.
std::string FlagText(const SuiteConfig& c) {
  if (!c.concentration) return "";
  return fmt::format("Concentrated: session {} holds {:.0f}% of its {}.", c.concentration->session,
                     100 * c.concentration->share, c.concentration->of);
}

// Every table of the report, in order, with its title (the Markdown and the page show the same).
struct Titled {
  std::string id, title, note;
  TextTable table;
};

TextTable PooledTable(const SuiteResults& s) {
  TextTable t{{"#", "Configuration", "Flip rate (clustered 95%)", "Naive 95% (probes independent)", "KL mean [95%]",
               "Damage rate [95%]", "Above floor", "Flag"}};
  for (const SuiteConfig& c : s.configs) {
    if (c.config == s.baseline) continue;
    const RecipeRankingRow* r = s.recipe ? s.recipe->Row(c.config) : nullptr;
    const std::string rank = r && r->tie_group ? std::to_string(*r->tie_group) : "—";
    if (c.status != "ok") {
      t.rows.push_back({rank, c.config, c.status + ": " + c.reason, "", "", "", "", ""});
      continue;
    }
    const std::string kl =
        c.kl_mean ? Small(c.kl_mean->value) + " [" + Small(c.kl_mean->ci[0]) + ", " + Small(c.kl_mean->ci[1]) + "]"
                  : "—";
    const std::string* why = s.recipe ? s.recipe->NotRankedWhy(c.config) : nullptr;
    const std::string flag = FlagText(c) + (why ? (FlagText(c).empty() ? "" : " ") + ("Not ranked: " + *why) : "");
    t.rows.push_back({rank, c.config, Rate(c.flip_rate),
                      c.flip_rate && c.flip_rate->naive_ci ? Ci(*c.flip_rate->naive_ci) : "—", kl, Rate(c.damage_rate),
                      c.above_floor ? "yes" : "no", flag});
  }
  return t;
}

TextTable SessionTable(const SuiteConfig& c) {
  TextTable t{{"Session", "Flips", "Probes", "Flip rate", "KL mean", "Damage", "Above floor", "Own rank"}};
  for (const SuiteSessionRow& r : c.sessions)
    t.rows.push_back({r.session, Count(double(r.flips)), Count(double(r.probes)), Percent(r.flip_rate, 2),
                      Small(r.kl_mean),
                      r.followed ? fmt::format("{} of {} forks", r.damage.value_or(0), *r.followed) : "—",
                      r.above_floor ? "yes" : "no", r.rank ? std::to_string(*r.rank) : "—"});
  return t;
}

TextTable KindTable(const SuiteConfig& c) {
  TextTable t{{"Kind of text", "Session", "Flips", "Probes", "Flip rate", "KL mean"}};
  for (const KindRow& k : c.kinds)
    t.rows.push_back({k.kind, k.session.empty() ? "all (pooled)" : k.session, Count(double(k.flips)),
                      Count(double(k.probes)), Percent(k.flip_rate, 2), Small(k.kl_mean)});
  return t;
}

// The flip rate per window of token depth: a row per window, a column per session and the pooled.
TextTable DepthTable(const SuiteResults& s, const SuiteConfig& c) {
  TextTable t{{"Token depth"}};
  for (const SuiteSession& x : s.sessions) t.header.push_back(x.name);
  t.header.push_back("pooled");
  std::map<int64_t, std::vector<std::string>> rows;
  for (const DepthRow& d : c.depth) {
    std::vector<std::string>& r = rows[d.begin];
    if (r.empty()) r.assign(t.header.size(), "—"), r[0] = fmt::format("{}–{}", d.begin, d.end);
    size_t col = t.header.size() - 1;
    for (size_t i = 0; i < s.sessions.size(); ++i)
      if (s.sessions[i].name == d.session) col = i + 1;
    r[col] = fmt::format("{} ({} of {})", Percent(d.flip_rate, 2), d.flips, d.probes);
  }
  for (auto& [begin, r] : rows) t.rows.push_back(r);
  return t;
}

std::vector<Titled> Tables(const SuiteResults& s) {
  std::vector<Titled> out;
  std::string floor = s.floor ? fmt::format("Repeat floor pooled over the sessions: {} (naive {}).", Rate(s.floor),
                                            s.floor->naive_ci ? Ci(*s.floor->naive_ci) : "—")
                              : "The baseline ran once: no repeat floor.";
  out.push_back({"pooled", "Pooled over the sessions",
                 fmt::format("{} Intervals: bootstrap over sessions and over blocks of {} probes inside each ({} "
                             "replicates), widened by Student's t for few sessions (docs/compare.md).",
                             floor, s.block, s.replicates),
                 PooledTable(s)});
  for (const SuiteConfig& c : s.configs) {
    if (c.config == s.baseline || c.sessions.empty()) continue;
    out.push_back({"sessions-" + c.config, c.config + ": per session", FlagText(c), SessionTable(c)});
    out.push_back({"kinds-" + c.config, c.config + ": by kind of text", "", KindTable(c)});
    out.push_back({"depth-" + c.config, c.config + ": by token depth",
                   fmt::format("Flip rate per window of {} token positions, every session aligned by depth.", s.window),
                   DepthTable(s, c)});
  }
  return out;
}

// The recipe in lines; markdown: the recommendation in bold (the terminal and the page's <pre>
// show it plain).
std::string RecipeLines(const SuiteResults& s, bool markdown) {
  if (!s.recipe) return "";
  const std::string strong = markdown ? "**" : "";
  std::string out = fmt::format("Recommended on the pooled figures: {}{}{} — {}\n\n", strong, s.recipe->recommended,
                                strong, s.recipe->reason);
  if (s.recipe->basis) out += "Rests on: " + s.recipe->basis->rests_on + "\n\n";
  if (s.recipe->not_ranked && !s.recipe->not_ranked->empty()) {
    for (const RecipeNotRanked& n : *s.recipe->not_ranked)
      out += fmt::format("- Not ranked: {}, {}\n", n.config, n.reason);
    out += "\n";
  }
  if (s.rank_differences.empty()) return out + "No session would rank the configurations differently.\n";
  for (const RankDifference& d : s.rank_differences)
    out += fmt::format("- Session {} ranks differently: recommends {}{}{}\n", d.session, d.recommended,
                       d.reversed.empty() ? "" : "; ", fmt::format("{}", fmt::join(d.reversed, ", ")));
  return out;
}

// The flip rate per window of token depth of one configuration, one series per session and the pooled.
Chart DepthChart(const SuiteConfig& c, size_t index) {
  Chart ch;
  ch.id = fmt::format("depth{}", index);
  ch.title = c.config + ": flip rate by token depth";
  ch.description = "Flip rate per window of token positions, every session aligned by depth; pooled is all sessions.";
  ch.x_label = "token depth (window start)";
  ch.y_label = "flip rate";
  ch.y_percent = true;
  std::map<std::string, ChartSeries> by;
  for (const DepthRow& d : c.depth) {
    ChartSeries& se = by[d.session.empty() ? "pooled" : d.session];
    se.name = d.session.empty() ? "pooled" : d.session;
    se.x.push_back(double(d.begin));
    se.y.push_back(d.flip_rate);
    se.tips.push_back(fmt::format("{}: {} of {} probes flip at {}–{}", se.name, d.flips, d.probes, d.begin, d.end));
  }
  for (auto& [name, se] : by) ch.series.push_back(se);
  return ch;
}

std::string MdTable(const TextTable& t) {
  std::string out = "| " + fmt::format("{}", fmt::join(t.header, " | ")) + " |\n|";
  for (size_t i = 0; i < t.header.size(); ++i) out += "---|";
  out += "\n";
  for (const auto& r : t.rows) out += "| " + fmt::format("{}", fmt::join(r, " | ")) + " |\n";
  return out;
}

std::string HtmlTable(const TextTable& t, const std::string& cls) {
  auto row = [](const std::vector<std::string>& cells, bool header) {
    std::vector<std::string> e;
    for (const auto& c : cells) e.push_back(HtmlEscape(c));
    return HtmlRow(e, header);
  };
  std::string out = "<table class=\"" + HtmlEscape(cls) + "\">" + row(t.header, true);
  for (const auto& r : t.rows) out += row(r, false);
  return out + "</table>";
}

// The matrix's cells: matrix_cells are its variants, the baseline's own cell comes on top.
std::string MatrixLine(const SuiteResults& s) {
  const size_t cells = s.matrix_cells.size() + (s.matrix_baseline_cell.empty() ? 0 : 1);
  size_t refused = 0;
  for (const std::string& c : s.matrix_cells)
    if (const SuiteConfig* sc = s.Config(c); sc && sc->status != "ok") ++refused;
  return fmt::format("Matrix: {} cells{}{}.", cells,
                     s.matrix_baseline_cell.empty() ? "" : ", " + s.matrix_baseline_cell + " the baseline",
                     refused ? fmt::format(", {} refused", refused) : "");
}

std::string SessionsLine(const SuiteResults& s) {
  std::vector<std::string> parts;
  for (const SuiteSession& x : s.sessions)
    parts.push_back(fmt::format("{} ({} tokens{})", x.name, Count(double(x.tokens)),
                                x.weight == 1 ? "" : fmt::format(", weight {}", x.weight)));
  return fmt::format("{} sessions: {}.", s.sessions.size(), fmt::join(parts, ", "));
}

}  // namespace

std::string RenderSuiteMarkdown(const SuiteResults& s) {
  std::string out =
      "# " + s.name + "\n\n" + SessionsLine(s) + " Each session's own report: sessions/NAME/report.md.\n\n";
  if (!s.matrix_cells.empty()) out += MatrixLine(s) + "\n\n";
  out += RecipeLines(s, true) + "\n";
  for (const Titled& t : Tables(s))
    out += "## " + t.title + "\n\n" + (t.note.empty() ? "" : t.note + "\n\n") + MdTable(t.table) + "\n";
  return out;
}

std::string RenderSuiteHtml(const SuiteResults& s) {
  std::string out = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>flipscope suite report: " +
                    HtmlEscape(s.name) + "</title><style>" + PageStyle() + "</style></head><body>";
  out += "<h1>" + HtmlEscape(s.name) + "</h1><p id=\"sessions\">" + HtmlEscape(SessionsLine(s)) + "</p>";
  if (!s.matrix_cells.empty()) out += "<p id=\"matrix\">" + HtmlEscape(MatrixLine(s)) + "</p>";
  std::string recipe = RecipeLines(s, false);
  out += "<main><section id=\"recipe\"><h2>Recipe</h2><pre>" + HtmlEscape(recipe) + "</pre></section>";
  // Each table's class is its kind (suite-pooled, suite-sessions, suite-kinds, suite-depth).
  for (const Titled& t : Tables(s))
    out += "<section id=\"" + HtmlEscape(t.id) + "\"><h2>" + HtmlEscape(t.title) + "</h2>" +
           (t.note.empty() ? "" : "<p class=\"note\">" + HtmlEscape(t.note) + "</p>") +
           HtmlTable(t.table, "suite-" + t.id.substr(0, t.id.find('-'))) + "</section>";
  out += "<section id=\"depth\"><h2>Flip rate by token depth</h2>";
  for (size_t i = 0; i < s.configs.size(); ++i)
    if (!s.configs[i].depth.empty()) out += RenderSvgChart(DepthChart(s.configs[i], i));
  return out + "</section></main></body></html>\n";
}

std::string SuiteSummary(const SuiteResults& s, const std::string& html_path) {
  std::string out = SessionsLine(s) + "\n";
  for (const SuiteConfig& c : s.configs) {
    if (c.config == s.baseline) continue;
    out += fmt::format("  {:<24} {}{}\n", c.config,
                       c.status == "ok" ? "flip rate " + Rate(c.flip_rate) : c.status + ": " + c.reason,
                       c.concentration ? "  (" + FlagText(c) + ")" : "");
  }
  return out + RecipeLines(s, false) + "report: " + html_path + "\n";
}

Status WriteSuiteReport(const SuiteResults& suite, const std::string& outdir) {
  const std::filesystem::path dir(outdir);
  FS_RETURN_IF_ERROR(WriteFileAtomic((dir / "report.md").string(), RenderSuiteMarkdown(suite)));
  return WriteFileAtomic((dir / "report.html").string(), RenderSuiteHtml(suite));
}

}  // namespace flipscope
