// The report of a 100K-token session in a real browser: a results document stretched from the
// sample to at least 100,000 tokens with every fork followed (bench/scale_results.py: its windows,
// flips and 1,200 branch records laid end to end, counts recomputed) renders into one
// self-contained page of bounded size, which headless Chromium opens offline without errors and
// loads and lays out in under 3 s (median of 5 loads, bench/report_load.py). Prints the render's
// time and memory and the page's figures (docs/performance.md, "The report at 100K tokens").
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>

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

constexpr int kRecords = 1200;  // every fork of a variant flipping ~1% of 100K tokens followed
// 16 records in full, 200 summary rows, the flips (200 at most per configuration), the charts
// and tables: 0.26 MiB for this document. The same page with all 1,200 records in full is 2.4 MB
// and took Chromium 7-9 s (2.9 s of CPU) to load on the 2-core machine under load; the bound
// leaves room for longer texts but not for the records in full.
constexpr double kMaxHtmlMiB = 1;
constexpr double kMaxReadySeconds = 3;

TEST(ReportScale, HundredThousandTokenReportLoadsInChromiumWithinThreeSeconds) {
  const fs::path dir = fs::path(FLIPSCOPE_BINARY_DIR) / "report_scale_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string src = FLIPSCOPE_SOURCE_DIR, py = FLIPSCOPE_PYTHON;
  // FLIPSCOPE_SCALE_RESULTS names another document to stretch (a real experiment's results.json,
  // its own records laid end to end) for the figures in docs/performance.md.
  const char* other = std::getenv("FLIPSCOPE_SCALE_RESULTS");
  const std::string from =
      other ? std::string(other) : src + "/tests/data/results-sample.json --records " + std::to_string(kRecords);
  auto [rc, made] = RunShell(py + " " + src + "/bench/scale_results.py " + from + " --tokens 100000 -o " +
                             (dir / "results.json").string());
  ASSERT_EQ(rc, 0) << made;
  auto text = ReadFile((dir / "results.json").string());
  ASSERT_TRUE(text.ok()) << text.status().message();
  const json r = json::parse(*text);
  ASSERT_GE(r["workload"]["n_tokens"].get<int>(), 100000);
  if (!other) {
    ASSERT_EQ(r["branches"][0]["records"].size(), size_t(kRecords));
  }

  const std::clock_t c0 = std::clock();
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(WriteReport(ExperimentResults::FromJson(r), dir.string()).ok());
  const double render_cpu = double(std::clock() - c0) / CLOCKS_PER_SEC;
  const double render_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const fs::path html = dir / "report.html";
  const double mib = double(fs::file_size(html)) / (1 << 20);
  std::printf(
      "results.json %.1f MiB; render %.2f s wall, %.2f s CPU; process peak RSS %.0f MiB; report.html %.2f MiB\n",
      double(text->size()) / (1 << 20), render_wall, render_cpu, double(u.ru_maxrss) / 1024, mib);
  if (!other) {
    EXPECT_LT(mib, kMaxHtmlMiB);
  }
  auto page = ReadFile(html.string());
  ASSERT_TRUE(page.ok());
  size_t full = 0;  // the first 16 records of each configuration in full
  for (const json& g : r["branches"]) full += std::min<size_t>(16, g["records"].size());
  EXPECT_EQ(CountOf(*page, "<article class=\"branch\">"), full);
  EXPECT_NE(page->find("more branch records are listed in results.json"), std::string::npos);

  // Offline, no console error, the ranking and charts present (the report checker; it also prints
  // the page with every <details> open, which takes minutes on a loaded machine).
  auto [crc, checked] = RunShell(py + " " + src + "/tests/ref/check_report_chromium.py --timeout 300 " + html.string());
  EXPECT_EQ(crc, 0) << checked;

  auto [lrc, load] = RunShell(py + " " + src + "/bench/report_load.py --runs 5 " + html.string());
  ASSERT_EQ(lrc, 0) << load;
  std::printf("%s", load.c_str());
  const json m = json::parse(load.substr(load.find('{')));
  EXPECT_LT(m["ready_s_median"].get<double>(), kMaxReadySeconds) << load;
}

}  // namespace
}  // namespace flipscope
