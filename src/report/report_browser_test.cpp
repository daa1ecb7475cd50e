// The HTML report in a real browser: headless Chromium opens report.html from disk with every
// network path closed (tests/ref/check_report_chromium.py), and must find the ranking table and
// the charts, no console error and no network request. The checker is shown to fail on a page
// that does load something or logs an error.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "report/internal.h"
#include "util/util.h"

namespace flipscope {
namespace {

namespace fs = std::filesystem;

// Runs the checker on an HTML file; returns its exit status and output.
std::pair<int, std::string> CheckInChromium(const fs::path& html, const std::string& extra = "") {
  std::string cmd = std::string(FLIPSCOPE_PYTHON) + " " + FLIPSCOPE_SOURCE_DIR +
                    "/tests/ref/check_report_chromium.py " + html.string() + " " + extra + " 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, "popen failed"};
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

fs::path BrowserDir(const std::string& name) {
  fs::path d = fs::path(FLIPSCOPE_BINARY_DIR) / "report_browser_test" / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(ReportBrowser, SampleReportRendersOfflineWithoutErrors) {
  auto text = ReadFile(std::string(FLIPSCOPE_SOURCE_DIR) + "/tests/data/results-sample.json");
  ASSERT_TRUE(text.ok()) << text.status().message();
  fs::path dir = BrowserDir("sample");
  ASSERT_TRUE(WriteReport(ExperimentResults::FromJson(nlohmann::json::parse(*text)), dir.string()).ok());
  auto [rc, out] = CheckInChromium(dir / "report.html", "--screenshot " + (dir / "report.png").string());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"ranking_rows\": 6"), std::string::npos) << out;
  EXPECT_NE(out.find("\"branches\": 2"), std::string::npos) << out;
  EXPECT_GT(fs::file_size(dir / "report.png"), 20000u);
}

// A future whose first token the grammar put in place of the side's own choice is marked where
// it is shown, titled with the choice it replaced, and laid out.
TEST(ReportBrowser, FirstMaskedTokenIsMarked) {
  auto text = ReadFile(std::string(FLIPSCOPE_SOURCE_DIR) + "/tests/data/results-sample.json");
  ASSERT_TRUE(text.ok()) << text.status().message();
  nlohmann::json r = nlohmann::json::parse(*text);
  nlohmann::json& rec = r["branches"][0]["records"][0];
  ASSERT_TRUE(rec.is_object());
  rec["cand_future"]["decoding"] = "grammar";
  rec["cand_future"]["first_masked"] = true;
  rec["base_future"]["decoding"] = "grammar";
  rec["base_future"]["first_masked"] = false;
  fs::path dir = BrowserDir("masked");
  ASSERT_TRUE(WriteReport(ExperimentResults::FromJson(r), dir.string()).ok());
  auto [rc, out] = CheckInChromium(dir / "report.html");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"title\": \"first masked: the grammar rejected this configuration's own choice"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("\"masked_marks\": []"), std::string::npos) << out;
  EXPECT_NE(out.find("\"visible\": true"), std::string::npos) << out;
}

// The history page (history.html) of a real two-release history (tests/data/history-sample.json,
// docs/history.md): its step table, the per-window and exact charts laid out, every section.
TEST(ReportBrowser, HistoryPageRendersOfflineWithoutErrors) {
  auto text = ReadFile(std::string(FLIPSCOPE_SOURCE_DIR) + "/tests/data/history-sample.json");
  ASSERT_TRUE(text.ok()) << text.status().message();
  const nlohmann::json doc = nlohmann::json::parse(*text);
  fs::path dir = BrowserDir("history");
  ASSERT_TRUE(WriteFileAtomic((dir / "history.html").string(), RenderHistoryHtml(HistoryResult::FromJson(doc))).ok());
  auto [rc, out] =
      CheckInChromium(dir / "history.html", "--page history --screenshot " + (dir / "history.png").string());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find(fmt::format("\"history_rows\": {}", doc["steps"].size())), std::string::npos) << out;
  EXPECT_NE(out.find(fmt::format("\"exact_rows\": {}", doc["to_exact"].size())), std::string::npos) << out;
  for (const char* id : {"versions", "steps", "windows", "exact", "forks"})
    EXPECT_NE(out.find(std::string("\"") + id + "\""), std::string::npos) << id << "\n" << out;
  EXPECT_GT(fs::file_size(dir / "history.png"), 20000u);
}

// The report's checker on a history page: the experiment report's table and sections are missing.
TEST(ReportBrowser, HistoryPageIsNotAReport) {
  auto text = ReadFile(std::string(FLIPSCOPE_SOURCE_DIR) + "/tests/data/history-sample.json");
  ASSERT_TRUE(text.ok()) << text.status().message();
  fs::path dir = BrowserDir("history-as-report");
  ASSERT_TRUE(WriteFileAtomic((dir / "history.html").string(),
                              RenderHistoryHtml(HistoryResult::FromJson(nlohmann::json::parse(*text))))
                  .ok());
  auto [rc, out] = CheckInChromium(dir / "history.html");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("no rows in table.ranking"), std::string::npos) << out;
}

TEST(ReportBrowser, CheckerCatchesNetworkRequestsAndConsoleErrors) {
  fs::path dir = BrowserDir("bad");
  ASSERT_TRUE(WriteFileAtomic((dir / "bad.html").string(),
                              "<!DOCTYPE html><html><head><title>bad</title></head><body>"
                              "<img src=\"http://example.invalid/pixel.png\" alt=\"\">"
                              "<script>console.error('boom'); fetch('https://example.invalid/x').catch(() => {});"
                              "undefinedFunction();</script></body></html>")
                  .ok());
  auto [rc, out] = CheckInChromium(dir / "bad.html");
  EXPECT_EQ(rc, 1) << out;
  for (const char* s : {"network request attempted: http://example.invalid/pixel.png",
                        "network request attempted: https://example.invalid/x", "console error: boom",
                        "exception: ReferenceError: undefinedFunction is not defined", "no rows in table.ranking",
                        "elements that load resources"})
    EXPECT_NE(out.find(s), std::string::npos) << s << "\n" << out;
}

}  // namespace
}  // namespace flipscope
