// `flipscope compare BASE CAND [CAND ...] [--json|--csv|--md] [--fail-above RATE] [--max-kl X]`
// Exit codes: 0 ok, 1 error, 3 a --fail-above / --max-kl gate was exceeded (docs/compare.md).
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <memory>

#include "capture/capture.h"
#include "cli/commands.h"
#include "compare/compare.h"
#include "engine/engine.h"

namespace flipscope::cli {
namespace {

constexpr int kGateExit = 3;

// Token text from the model file named in the base manifest (its model's path), loaded vocab-only;
// an empty detokenizer when the file is not there (flips then carry ids only).
Detokenizer ModelDetokenizer(const CaptureManifest& manifest) {
  const std::string& path = manifest.model.path;
  if (path.empty()) return {};
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return {};
  auto detok = LoadDetokenizer(path);
  return detok.ok() ? Detokenizer(*detok) : Detokenizer();
}

struct Opts {
  std::vector<std::string> files;
  CompareOptions compare;
  bool json = false, csv = false, md = false, quiet = false, no_text = false;
  std::string fail_above;
  double max_kl = -1;
};

int Run(const Opts& o) {
  if (o.files.size() < 2) return Fail(Status::Error("compare needs a base capture and at least one candidate"));
  if (int(o.json) + int(o.csv) + int(o.md) > 1) return Fail(Status::Error("choose one of --json, --csv, --md"));
  Gate gate;
  if (!o.fail_above.empty()) {
    auto rate = ParseRate(o.fail_above);
    if (!rate.ok()) return Fail(rate.status().Prefixed("--fail-above"));
    gate.max_flip_rate = *rate;
  }
  if (o.max_kl >= 0) gate.max_kl_mean = o.max_kl;

  auto base = CaptureReader::Open(o.files[0]);
  if (!base.ok()) return Fail(base.status());
  CompareOptions options = o.compare;
  options.log.bars = !o.quiet;
  if (!o.no_text) options.detokenize = ModelDetokenizer((*base)->manifest());

  std::vector<Comparison> results;
  for (size_t i = 1; i < o.files.size(); ++i) {
    auto cand = CaptureReader::Open(o.files[i]);
    if (!cand.ok()) return Fail(cand.status());
    auto c = Compare(**base, **cand, options);
    if (!c.ok()) return Fail(c.status());
    results.push_back(std::move(c).value());
  }

  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& c : results) j.push_back(ToJson(c));
    fmt::print("{}\n", (results.size() == 1 ? j[0] : j).dump(2));
  } else if (o.csv) {
    fmt::print("{}", RenderCompareCsv(results));
  } else if (o.md) {
    fmt::print("{}", RenderCompareMarkdown(results));
  } else {
    fmt::print("{}", RenderCompareTable(results));
  }

  int code = 0;
  for (const auto& c : results)
    for (const auto& line : GateViolations(c, gate)) {
      fmt::print(stderr, "flipscope: gate exceeded: {}\n", line);
      code = kGateExit;
    }
  return code;
}

}  // namespace

Action DefineCompare(CLI::App* cmd) {
  auto o = std::make_shared<Opts>();
  cmd->add_option("captures", o->files, "BASE CAND [CAND ...] capture files (.safetensors)")
      ->required()
      ->expected(2, -1);
  cmd->add_option("--window", o->compare.window, "Window size in tokens (window i = positions [i*W, (i+1)*W))")
      ->capture_default_str()
      ->check(WholeAtLeast(1));
  cmd->add_option("--confident", o->compare.confident, "A flip is confident when the base top-1 probability >= P")
      ->capture_default_str()
      ->check(NumberIn(0.0, 1.0));
  cmd->add_option("--threads", o->compare.threads, "Worker threads; 0 = all hardware threads")->capture_default_str();
  cmd->add_flag("--json", o->json, "Print the JSON contract (one object per candidate; an array for several)");
  cmd->add_flag("--csv", o->csv, "Print CSV: one row per window and an 'all' row per candidate");
  cmd->add_flag("--md", o->md, "Print Markdown tables");
  cmd->add_option("--fail-above", o->fail_above, "Exit 3 when a candidate's flip rate exceeds RATE (0.005 or 0.5%)");
  cmd->add_option("--max-kl", o->max_kl, "Exit 3 when a candidate's mean KL(base||cand) exceeds X")
      ->check(NumberIn(0.0, INFINITY));
  cmd->add_flag("--no-text", o->no_text, "Do not load the model's vocabulary: flips show token ids only");
  cmd->add_flag("-q,--quiet", o->quiet, "No progress bar");
  return [o] { return Run(*o); };
}

}  // namespace flipscope::cli
