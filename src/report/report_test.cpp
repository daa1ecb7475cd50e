// Report stage: Markdown/CSV content, HTML escaping and charts over a hand-shaped results
// document (tests/data/results-sample.json); numbers checked by an independent numpy script.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <set>

#include "report/internal.h"
#include "testing/shell.h"
#include "util/util.h"
#include "support/count_of.h"

namespace flipscope {
namespace {

using fixtures::CountOf;

namespace fs = std::filesystem;
using ::fixtures::RunShell;
using nlohmann::json;

json LoadSample() {
  auto text = ReadFile(std::string(FLIPSCOPE_SOURCE_DIR) + "/tests/data/results-sample.json");
  EXPECT_TRUE(text.ok()) << text.status().message();
  return json::parse(*text);
}

const json& Sample() {
  static const json sample = LoadSample();
  return sample;
}

fs::path FreshDir(const std::string& name) {
  fs::path d = fs::path(FLIPSCOPE_BINARY_DIR) / "report_test" / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Names of the configurations that have comparisons (each is one chart series).
std::vector<std::string> ComparedConfigs(const json& r) {
  std::vector<std::string> out;
  for (const json& c : r["comparisons"])
    if (std::find(out.begin(), out.end(), c["config"]) == out.end()) out.push_back(c["config"]);
  return out;
}

std::string RefusedReason(const json& r) {
  for (const json& c : r["configs"])
    if (c["status"] == "refused") return c["reason"];
  return "";
}

TEST(Report, NumbersMatchAnIndependentComputation) {
  fs::path dir = FreshDir("numbers");
  json r = Sample();
  // A refusal reason with a comma, a quote and a newline exercises the CSV quoting.
  for (json& c : r["configs"])
    if (c["status"] == "refused") c["reason"] = std::string(c["reason"]) + ", \"really\"\nsecond line";
  ASSERT_TRUE(WriteFileAtomic((dir / "results.json").string(), r.dump()).ok());
  ASSERT_TRUE(WriteReport(ExperimentResults::FromJson(r), dir.string()).ok());
  json series = json::object();
  for (const std::string& name : ComparedConfigs(r))
    for (const auto& [field, figure] : std::vector<std::pair<std::string, report::WindowFigure>>{
             {"flip_rate", report::WindowFigure::kFlipRate},
             {"kl_mean", report::WindowFigure::kKlMean},
             {"flip_rate_ci_lo", report::WindowFigure::kFlipRateLo},
             {"flip_rate_ci_hi", report::WindowFigure::kFlipRateHi}})
      for (const auto& p : report::WindowSeries(ExperimentResults::FromJson(r).measured.comparisons, name, figure))
        series[name][field].push_back({p.index, p.value});
  ASSERT_TRUE(WriteFileAtomic((dir / "series.json").string(), series.dump()).ok());
  const std::string check = std::string(FLIPSCOPE_PYTHON) + " " + FLIPSCOPE_SOURCE_DIR +
                            "/tests/ref/check_report_numbers.py " + (dir / "results.json").string() + " ";
  auto [rc, out] = RunShell(check + (dir / "results.csv").string() + " " + (dir / "series.json").string());
  EXPECT_EQ(rc, 0) << out;

  // The check can fail: one changed digit in the CSV and one changed window median are caught.
  std::string csv = *ReadFile((dir / "results.csv").string());
  std::string kl = fmt::format("{}", r["summary"][1]["kl_mean"].get<double>());
  ASSERT_NE(csv.find(kl), std::string::npos);
  csv.replace(csv.find(kl), 1, kl[0] == '9' ? "8" : "9");
  ASSERT_TRUE(WriteFileAtomic((dir / "bad.csv").string(), csv).ok());
  series[ComparedConfigs(r)[1]]["flip_rate"][0][1] = 0.5;
  ASSERT_TRUE(WriteFileAtomic((dir / "bad-series.json").string(), series.dump()).ok());
  auto [rc2, out2] = RunShell(check + (dir / "bad.csv").string() + " " + (dir / "bad-series.json").string());
  EXPECT_EQ(rc2, 1) << out2;
  EXPECT_NE(out2.find("kl_mean"), std::string::npos) << out2;
  EXPECT_NE(out2.find("flip_rate window 0"), std::string::npos) << out2;
}

TEST(Report, MarkdownRanksEscapesAndListsRefused) {
  const json& r = Sample();
  std::string md = RenderMarkdown(ExperimentResults::FromJson(r));
  // The ranking table lists measured configurations in the recipe's order.
  std::vector<size_t> at;
  for (const json& e : r["recipe"]["ranking"]) {
    std::string name = std::regex_replace(std::string(e["config"]), std::regex("_"), "\\_");
    at.push_back(md.find("\n| " + std::to_string(at.size() + 1) + " | " + name));
    EXPECT_NE(at.back(), std::string::npos) << name;
  }
  EXPECT_TRUE(std::is_sorted(at.begin(), at.end()));
  EXPECT_NE(md.find("- **fa-off-kv-q8\\_0** — refused: llama.cpp refused the context: V cache quantization "
                    "requires flash\\_attn\n"),
            std::string::npos);
  // Text is escaped; token and context text sits in code spans, pipes escaped inside tables.
  EXPECT_NE(md.find("# flipscope report: qwen3-8b \\<agent\\> \\& \"tools\"\n"), std::string::npos);
  EXPECT_EQ(md.find("<agent>"), std::string::npos);
  EXPECT_NE(md.find("` 2 ` 0."), std::string::npos);
  EXPECT_NE(md.find("` ql ` 0."), std::string::npos);
  EXPECT_NE(md.find("a \\| b \\| `c`"), std::string::npos) << "pipes in a code span inside a table";
  EXPECT_NE(md.find("## Flip rate per window"), std::string::npos);
  EXPECT_EQ(CountOf(md, "\n| 0 (0–8,192) |"), 2u);  // one row in each per-window table
  EXPECT_NE(md.find("llama-server -m /models/Qwen3-8B-Q4_K_M.gguf"), std::string::npos);
  EXPECT_NE(md.find("#### Position 18,431 (tool call #3): literal\\_mutated"), std::string::npos);
}

TEST(Report, MarkdownRendersBackticksAndEmptyTokensAsCode) {
  json r = Sample();
  json& flips = r["comparisons"][0]["compare"]["flips"];
  flips = json::array({{{"position", 7}, {"span", "x"}, {"base_text", "``a`"}, {"cand_text", ""}, {"context", "|"}}});
  std::string md = RenderMarkdown(ExperimentResults::FromJson(r));
  EXPECT_NE(md.find("``` ``a` ```"), std::string::npos);  // fence longer than the longest backtick run
  EXPECT_NE(md.find("*(empty)*"), std::string::npos);
  EXPECT_NE(md.find("` \\| `"), std::string::npos);
}

TEST(Report, CsvHasOneRowPerConfigurationAndQuotesText) {
  json r = Sample();
  r["configs"][5]["reason"] = "a, \"b\"\nc";
  std::string csv = RenderCsv(ExperimentResults::FromJson(r));
  EXPECT_EQ(csv.rfind("rank,config,status,reason,", 0), 0u);
  EXPECT_EQ(CountOf(csv, "\r\n"), r["configs"].size() + 1);  // header + rows; the field's "\n" is not a row end
  EXPECT_NE(csv.find(",fa-off-kv-q8_0,refused,\"a, \"\"b\"\"\nc\","), std::string::npos) << csv;
  EXPECT_NE(csv.find("\r\n1,threads-4,ok,,"), std::string::npos) << csv;
}

TEST(Report, HtmlEscapesEveryPieceOfData) {
  const json& r = Sample();
  std::string html = RenderHtml(ExperimentResults::FromJson(r));
  // Exactly one script element: the page's own; data never closes or opens one.
  EXPECT_EQ(CountOf(html, "<script"), 1u);
  EXPECT_EQ(CountOf(html, "</script>"), 1u);
  EXPECT_GT(CountOf(html, "&lt;/script&gt;"), 0u);
  EXPECT_EQ(html.find("<agent>"), std::string::npos);
  EXPECT_NE(html.find("qwen3-8b &lt;agent&gt; &amp; &quot;tools&quot;"), std::string::npos);
  // Every flip context shown appears escaped, followed by the marked reference token.
  size_t checked = 0;
  for (const json& c : r["comparisons"])
    for (const json& f : c["compare"]["flips"]) {
      std::string shown = HtmlEscape(std::string(f["context"])) + "<mark title=\"reference token\">" +
                          HtmlEscape(std::string(f["base_text"])) + "</mark>";
      if (html.find(shown) != std::string::npos) ++checked;
    }
  EXPECT_GT(checked, 100u);
  EXPECT_NE(html.find("db.internal -p 543<mark title=\"reference token\">2</mark>"), std::string::npos);
  // No external resource of any kind.
  EXPECT_FALSE(std::regex_search(html, std::regex(R"((src|href)\s*=\s*"(https?:)?//)")));
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
}

TEST(Report, HtmlHasBothChartsWithEverySeriesAndTheFloorBand) {
  const json& r = Sample();
  std::string html = RenderHtml(ExperimentResults::FromJson(r));
  ASSERT_EQ(CountOf(html, "<svg"), 2u);
  size_t second = html.find("<svg", html.find("<svg") + 1);
  std::string flip_svg = html.substr(html.find("<svg"), second - html.find("<svg"));
  std::string kl_svg = html.substr(second, html.find("</svg>", second) - second);
  for (const std::string& svg : {flip_svg, kl_svg}) {
    EXPECT_EQ(CountOf(svg, "class=\"series\""), ComparedConfigs(r).size());
    EXPECT_EQ(svg.find("nan"), std::string::npos);
    EXPECT_EQ(svg.find("inf"), std::string::npos);
    EXPECT_NE(svg.find("role=\"img\""), std::string::npos);
  }
  EXPECT_EQ(CountOf(flip_svg, "class=\"band\""), 1u);
  EXPECT_NE(flip_svg.find("kv-q4_0 · window 4 (32,768–40,000)"), std::string::npos);
  // threads-4 is bit-identical: its zero KL sits on the log axis' bottom edge as hollow markers.
  EXPECT_NE(kl_svg.find("fill=\"#fff\""), std::string::npos);
  EXPECT_NE(kl_svg.find(">1e-"), std::string::npos);
}

TEST(Report, RefusedConfigurationIsShownWithItsReason) {
  const json& r = Sample();
  std::string html = RenderHtml(ExperimentResults::FromJson(r));
  size_t row = html.find("<tr class=\"refused\">");
  ASSERT_NE(row, std::string::npos);
  std::string tr = html.substr(row, html.find("</tr>", row) - row);
  EXPECT_NE(tr.find("fa-off-kv-q8_0"), std::string::npos);
  EXPECT_NE(tr.find(HtmlEscape(RefusedReason(r))), std::string::npos);
  EXPECT_NE(tr.find(">refused<"), std::string::npos);
  std::string term = TerminalSummary(ExperimentResults::FromJson(r), "out/report.html");
  EXPECT_NE(term.find("   -  fa-off-kv-q8_0           refused: " + RefusedReason(r)), std::string::npos) << term;
  EXPECT_NE(term.find("    4  kv-q8_0 *                   0.944%  1.08e-03         0         yes"), std::string::npos)
      << term;
  EXPECT_NE(term.find("repeat floor: 6 flips of 3,390 = 0.177%"), std::string::npos) << term;
  EXPECT_NE(term.find("report: out/report.html"), std::string::npos);
  EXPECT_NE(term.find("recommended (*): kv-q8_0"), std::string::npos);
}

TEST(Report, BranchViewerShowsBothFuturesAndTheFirstDifference) {
  std::string html = RenderHtml(ExperimentResults::FromJson(Sample()));
  EXPECT_EQ(CountOf(html, "<article class=\"branch\">"), 2u);
  EXPECT_EQ(CountOf(html, "<mark class=\"diff\""), 4u);  // the first differing token in each future
  EXPECT_NE(html.find(R"(<span class="tok" title="token 0 · id 1000 · p=0.920 · ql">ql</span>)"), std::string::npos);
  EXPECT_NE(html.find("literal_mutated"), std::string::npos);
  EXPECT_NE(html.find("the config &amp; &lt;restart&gt; it. &lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("agree again from token 1 of"), std::string::npos);
  EXPECT_NE(html.find("do not agree again within"), std::string::npos);
}

TEST(Report, BranchesSayHowTheFuturesWereDecodedAndWhatFreeDecodingGave) {
  json r = Sample();
  json& g = r["branches"][0];
  g["branch_config"]["decoding"] = {{"asked", "grammar"}, {"used", "grammar"}, {"source", "tool_call form"}};
  g["counts"]["invalid_tool_call"] = 0;
  json free = g["counts"];
  free["invalid_tool_call"] = 7;
  free["outcomes"]["damage"] = {{"total", 3}, {"invalid_tool_call", 2}, {"literal_mutated", 1}, {"wrong_command", 0}};
  g["free_counts"] = free;
  const std::string line = report::DecodingText(BranchRecord::FromJson(g));
  EXPECT_NE(line.find("under the tool-call grammar"), std::string::npos) << line;
  EXPECT_NE(line.find("damage 3 (invalid_tool_call 2, literal_mutated 1)"), std::string::npos) << line;
  EXPECT_NE(line.find("invalid_tool_call verdicts 7 free, 0 under the grammar"), std::string::npos) << line;
  EXPECT_NE(RenderHtml(ExperimentResults::FromJson(r)).find("The same forks decoded free"), std::string::npos);
  EXPECT_NE(RenderMarkdown(ExperimentResults::FromJson(r)).find("The same forks decoded free"), std::string::npos);
  // Free futures say why; a group from before decodings were recorded says nothing.
  g.erase("free_counts");
  g["branch_config"]["decoding"] = {{"asked", "auto"}, {"used", "free"}, {"why", "no tools"}};
  EXPECT_EQ(report::DecodingText(BranchRecord::FromJson(g)), "Futures decoded free (unconstrained greedy): no tools.");
  g["branch_config"].erase("decoding");
  EXPECT_EQ(report::DecodingText(BranchRecord::FromJson(g)), "");
}

TEST(Report, DisclosureAndRecipe) {
  std::string html = RenderHtml(ExperimentResults::FromJson(Sample()));
  for (const char* s :
       {"b6710-9b8f4a2", "NVIDIA H200", "AVX512 = 1", "9a8b7c6d5e4f3021", "agent-session &lt;prod&gt;.jsonl",
        "every 32 tokens; 100% inside: tool_calls; 1,695 probes", "40,960 tokens", "KL(base||cand)",
        "none: full-vocabulary logits", "median over repeats", "qwen3 from gguf:tokenizer.chat_template",
        "llama-cli -m /models/Qwen3-8B-Q4_K_M.gguf -c 54784", "<td><code>q4_0</code></td>", "103,563"})
    EXPECT_NE(html.find(s), std::string::npos) << s;
}

// A re-run that took an earlier run's capture says so instead of showing the check's microseconds.
TEST(Report, CaptureTimesSayWhichCapturesWereReused) {
  json r = Sample();
  r["configs"] = json::array({{{"name", "baseline"},
                               {"repeats", 2},
                               {"capture_seconds", {2.2e-06, 211.6}},
                               {"reused", {true, false}},
                               {"captures", {"a", "b"}}}});
  std::string html = RenderHtml(ExperimentResults::FromJson(r));
  EXPECT_NE(html.find("<td>reused, 212 s</td>"), std::string::npos);
  EXPECT_EQ(html.find("2.2e-06"), std::string::npos);
}

TEST(Report, MissingOptionalPartsAreLeftOut) {
  json r = Sample();
  for (const char* key : {"branches", "recipe", "floor", "probe_plan", "settings", "model"}) r.erase(key);
  r["comparisons"][0]["compare"]["windows"][0]["kl_mean"] = nullptr;
  r["configs"][1].erase("engine");
  r["comparisons"][3]["compare"]["truncated"] = true;
  r["comparisons"][3]["compare"]["kl_estimate"] = "tail bucket <estimate>";
  for (const json& doc : {json::object(), json{{"name", "bare"}}, json{{"configs", json::array({{{"name", 3}}})}}, r}) {
    std::string html = RenderHtml(ExperimentResults::FromJson(doc)),
                md = RenderMarkdown(ExperimentResults::FromJson(doc)),
                csv = RenderCsv(ExperimentResults::FromJson(doc));
    EXPECT_NE(html.find("</html>"), std::string::npos);
    EXPECT_NE(html.find("table class=\"ranking\""), std::string::npos);
    EXPECT_FALSE(md.empty());
    EXPECT_EQ(csv.rfind("rank,config", 0), 0u);
    EXPECT_FALSE(TerminalSummary(ExperimentResults::FromJson(doc), "").empty());
  }
  std::string html = RenderHtml(ExperimentResults::FromJson(r));
  EXPECT_NE(html.find("No branch records"), std::string::npos);
  EXPECT_EQ(html.find("id=\"recipe\""), std::string::npos);
  EXPECT_EQ(html.find("href=\"#recipe\""), std::string::npos);
  EXPECT_NE(html.find("top-k (truncated) in 1 of 14 comparisons"), std::string::npos);
  EXPECT_NE(html.find("tail bucket &lt;estimate&gt;"), std::string::npos);
  EXPECT_EQ(CountOf(html, "<svg"), 2u);
}

// Replaces about one node in `rate` with a value of another type, recursively.
void MutateTypes(json& j, std::mt19937& rng, unsigned rate) {
  static const json kinds[] = {nullptr,       1e300,          -1.5, "x<y>",
                               json::array(), json::object(), true, json::array({1, "a"})};
  if (!j.is_structured()) return;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (rng() % rate == 0)
      *it = kinds[rng() % std::size(kinds)];
    else
      MutateTypes(*it, rng, rate);
  }
}

TEST(Report, DocumentsWithWrongTypesRenderWithoutThrowing) {
  for (unsigned seed = 0; seed < 40; ++seed) {
    std::mt19937 rng(seed);
    json r = Sample();
    MutateTypes(r, rng, seed % 2 ? 50 : 400);
    std::string html;
    EXPECT_NO_THROW(html = RenderHtml(ExperimentResults::FromJson(r))) << "seed " << seed;
    EXPECT_NO_THROW(RenderMarkdown(ExperimentResults::FromJson(r))) << "seed " << seed;
    EXPECT_NO_THROW(RenderCsv(ExperimentResults::FromJson(r))) << "seed " << seed;
    EXPECT_NO_THROW(TerminalSummary(ExperimentResults::FromJson(r), "")) << "seed " << seed;
    EXPECT_EQ(CountOf(html, "<script"), 1u) << "seed " << seed;
  }
}

TEST(Report, ReferenceThatRanOnceIsListedWithoutFigures) {
  json r = Sample();
  json cmps = json::array();
  for (const json& c : r["comparisons"])
    if (c["config"] != "baseline") cmps.push_back(c);
  r["comparisons"] = cmps;
  r["summary"].erase(0);  // the baseline's
  r["floor"] = {{"repeats", 1},
                {"flip_rate", nullptr},
                {"bit_identical", nullptr},
                {"note", "the baseline ran once: no repeat floor"}};
  std::string html = RenderHtml(ExperimentResults::FromJson(r));
  size_t row = html.find("<tr class=\"refused\"><td class=\"num\">—</td><td><strong>baseline</strong>");
  ASSERT_NE(row, std::string::npos);
  EXPECT_NE(html.find("the reference configuration ran once", row), std::string::npos);
  EXPECT_NE(html.find("No repeat floor: the baseline ran once: no repeat floor."), std::string::npos);
  EXPECT_EQ(html.find("class=\"band\""), std::string::npos);
  EXPECT_NE(TerminalSummary(ExperimentResults::FromJson(r), "")
                .find("repeat floor: none (the baseline ran once: no repeat floor)"),
            std::string::npos);
}

TEST(Report, RankingFollowsTheRecipeElseFidelity) {
  json r = Sample();
  r["recipe"]["ranking"] = {"kv-q4_0", "baseline"};  // names; the others follow by fidelity
  std::vector<std::string> got;
  for (const auto& row : report::RankedConfigs(ExperimentResults::FromJson(r))) got.push_back(row.name);
  EXPECT_EQ(got, (std::vector<std::string>{"kv-q4_0", "baseline", "threads-4", "fa-off", "kv-q8_0", "fa-off-kv-q8_0"}));
  r.erase("recipe");
  got.clear();
  for (const auto& row : report::RankedConfigs(ExperimentResults::FromJson(r)))
    got.push_back(row.name + ":" + std::to_string(row.rank));
  EXPECT_EQ(got, (std::vector<std::string>{"threads-4:1", "baseline:2", "fa-off:3", "kv-q8_0:4", "kv-q4_0:5",
                                           "fa-off-kv-q8_0:0"}));
}

TEST(Report, WriteReportWritesThreeFilesOrNone) {
  fs::path dir = FreshDir("write");
  ASSERT_TRUE(WriteReport(ExperimentResults::FromJson(Sample()), (dir / "out").string()).ok());
  for (const char* f : {"report.html", "report.md", "results.csv"}) EXPECT_TRUE(fs::is_regular_file(dir / "out" / f));
  EXPECT_EQ(*ReadFile((dir / "out/report.html").string()), RenderHtml(ExperimentResults::FromJson(Sample())));

  ASSERT_TRUE(WriteFileAtomic((dir / "file").string(), "x").ok());
  Status st = WriteReport(ExperimentResults::FromJson(Sample()), (dir / "file/sub").string());
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find((dir / "file/sub").string()), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(dir / "file/sub" / "report.html"));
}

TEST(ReportFormat, NumbersAndTokens) {
  EXPECT_EQ(report::Percent(0.0037), "0.370%");
  EXPECT_EQ(report::Percent(std::nullopt), "—");
  EXPECT_EQ(report::Small(0.0), "0");
  EXPECT_EQ(report::Small(1.234e-5), "1.23e-05");
  EXPECT_EQ(report::Small(0.01534), "0.01534");
  EXPECT_EQ(report::Count(1234567.0), "1,234,567");
  EXPECT_EQ(report::Count(999.0), "999");
}

TEST(ReportSvg, LogAxisKeepsZerosOnTheEdgeAndEscapesText) {
  report::Chart c;
  c.id = "t";
  c.title = "<b>&";
  c.log_y = true;
  c.series.push_back({"s<1>", {0, 1, 2}, {0, 1e-4, 1e-2}, {}});
  std::string svg = report::RenderSvgChart(c);
  EXPECT_NE(svg.find("<title id=\"t-t\">&lt;b&gt;&amp;</title>"), std::string::npos);
  EXPECT_EQ(CountOf(svg, "fill=\"#fff\""), 1u);
  EXPECT_NE(svg.find(">1e-4<"), std::string::npos);
  EXPECT_NE(svg.find(">0</text>"), std::string::npos);  // the extra bottom decade stands for zero
  EXPECT_EQ(svg.find(">1e-5<"), std::string::npos);
  EXPECT_EQ(svg.find("s<1>"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

TEST(ReportSvg, TwelveSeriesAllLookDifferent) {
  report::Chart c;
  c.id = "many";
  for (int i = 0; i < 12; ++i) c.series.push_back({"s" + std::to_string(i), {0, 1}, {0.01 * i, 0.02}, {}});
  std::string svg = report::RenderSvgChart(c);
  // Each legend entry: its line's colour and dash pattern, then its marker's element and shape.
  std::set<std::string> looks;
  size_t at = svg.find("class=\"legend\"");
  ASSERT_NE(at, std::string::npos);
  for (int i = 0; i < 12; ++i) {
    size_t line = svg.find("<line", at);
    ASSERT_NE(line, std::string::npos);
    size_t end = svg.find("/>", line);
    std::string stroke = svg.substr(line, end - line);
    stroke = stroke.substr(stroke.find("stroke="));
    size_t mark = end + 2;
    std::string marker = svg.substr(mark, svg.find(' ', mark) - mark);
    if (marker == "<path") {  // tell paths apart by their shape, not position
      size_t d = svg.find("d=\"M", mark);
      size_t l = svg.find('l', d);
      marker += svg.substr(l, svg.find('"', l) - l);
    }
    looks.insert(stroke + "|" + marker);
    at = end;
  }
  EXPECT_EQ(looks.size(), 12u);
}

}  // namespace
}  // namespace flipscope
