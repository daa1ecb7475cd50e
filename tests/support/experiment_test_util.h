// What the experiment stage's tests share: a folder with a tiny model, a text workload and an
// experiment file.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "experiment/experiment.h"
#include "testing/tiny_model.h"

namespace flipscope::fixtures {

// Writes tiny.gguf, work.txt and exp.toml (model, workload, window = 64, then body) into a fresh
// temporary folder named after `name`; returns exp.toml's path.
inline std::string MakeExperiment(const std::string& name, const std::string& body) {
  namespace fs = std::filesystem;
  fs::path dir = TempPath("exp-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  EXPECT_TRUE(WriteTinyModel((dir / "tiny.gguf").string()).ok());
  std::ofstream w(dir / "work.txt");
  for (int i = 0; i < 6; ++i) w << "show interface port " << (5432 + i) << " on the switch and the router. ";
  w.close();
  std::ofstream(dir / "exp.toml") << "model = \"tiny.gguf\"\nworkload = \"work.txt\"\nwindow = 64\n" << body;
  return (dir / "exp.toml").string();
}

// Runs the experiment and hands back its results as results.json holds them (the tests check the file's form).
inline Result<nlohmann::json> RunToJson(const Experiment& exp, const RunOptions& opts) {
  auto r = RunExperiment(exp, opts);
  if (!r.ok()) return r.status();
  return r->ToJson();
}

// Runs the headless-Chromium report checker (tests/ref/check_report_chromium.py) on
// outdir/report.html: every chart laid out with its lines, nothing fetched. Returns its exit
// status; its output is in outdir/chromium.log.
inline int CheckReportInChromium(const std::string& outdir) {
  namespace fs = std::filesystem;
  const std::string cmd = std::string(FLIPSCOPE_PYTHON) + " " + FLIPSCOPE_SOURCE_DIR +
                          "/tests/ref/check_report_chromium.py " + (fs::path(outdir) / "report.html").string() + " > " +
                          (fs::path(outdir) / "chromium.log").string() + " 2>&1";
  return std::system(cmd.c_str());
}

}  // namespace flipscope::fixtures
