// `flipscope run EXPERIMENT.toml -o OUTDIR [--memory 8GiB] [--dry-run]` and `flipscope report RESULTS.json -o OUTDIR`
#include <fmt/format.h>

#include <filesystem>

#include "cli/commands.h"
#include "experiment/experiment.h"
#include "history/history.h"
#include "report/report.h"
#include "results/experiment_results.h"
#include "util/util.h"

namespace flipscope::cli {

namespace {
// The history request of an experiment file with [history]: its baseline over the releases or commits.
HistoryRequest HistoryOf(const Experiment& exp, const std::string& outdir, bool bars) {
  HistoryRequest r;
  r.model_path = exp.model;
  r.workload_path = exp.workload;
  r.workload = exp.workload_options;
  r.plan = exp.plan;
  r.knobs = exp.baseline.knobs;
  r.releases = exp.history.releases;
  r.llama_src = exp.history.llama_src;
  r.commits = exp.history.commits;
  r.max_tokens = exp.history.max_tokens;
  r.forks = exp.history.forks;
  if (exp.history.fork_tokens > 0) r.fork_tokens = exp.history.fork_tokens;
  r.reference_exact = exp.reference_exact;
  r.window = exp.window;
  r.confident = exp.confident;
  r.out_dir = outdir;
  r.worker.cpu = exp.history.cpu;
  r.log.bars = bars;
  return r;
}
// [history] configs: the history over the named configurations' first captures (and the exact
// reference's), written beside results.json as history.json, history.md and history.html.
Status WriteConfigHistory(const Experiment& exp, const ExperimentResults& r, const std::string& outdir) {
  CapturedHistory h;
  h.model_path = exp.model;
  h.workload_path = exp.workload;
  h.window = exp.window;
  h.confident = exp.confident;
  h.out_dir = outdir;
  for (const std::string& name : exp.history.configs) {
    const ConfigEntry* c = r.measured.Config(name);
    if (!c || !c->Ok() || c->captures.empty())
      return Status::Error(fmt::format("[history] configs: '{}' has no capture ({})", name,
                                       c && c->reason ? *c->reason : "it did not run"));
    h.versions.push_back({name, c->captures.front()});
  }
  if (r.measured.branches)  // the run's forks: the baseline against each variant
    for (const BranchRecord& b : *r.measured.branches) h.forks.push_back({exp.baseline.name, b.config, b.result});
  if (r.reference && r.reference->capture.Ok() && !r.reference->capture.captures.empty())
    h.exact_capture = r.reference->capture.captures.front();
  FS_ASSIGN_OR_RETURN(HistoryResult doc, HistoryOfCaptures(h));
  FS_RETURN_IF_ERROR(
      WriteFileAtomic((std::filesystem::path(outdir) / "history.html").string(), RenderHistoryHtml(doc)));
  fmt::print("{}", HistoryTerminal(doc));
  fmt::print("history: {}/history.json, history.md and history.html\n", outdir);
  return Status::Ok();
}
}  // namespace

Action DefineRun(CLI::App* cmd) {
  struct Opts {
    std::string file, outdir, memory;
    bool quiet = false, verify_recipe = false, dry_run = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("experiment", o->file, "Experiment file (TOML)")->required();
  cmd->add_option("-o,--output", o->outdir, "Results folder")->required();
  cmd->add_option("--memory", o->memory, "Memory budget for the recipe (weights and KV cache together), e.g. 8GiB");
  cmd->add_flag("-q,--quiet", o->quiet, "No progress bars");
  cmd->add_flag("--dry-run", o->dry_run,
                "Print what the run would compute (captures to make, served decode steps, forks, the time they "
                "take here) and exit");
  cmd->add_flag("--verify-recipe", o->verify_recipe,
                "Start the recommended llama-server command and check its greedy tokens against the capture");
  return [o]() -> int {
    auto exp = ParseExperiment(o->file);
    if (!exp.ok()) return Fail(exp.status());
    if (o->dry_run && !exp->sessions.empty()) {
      // A suite: each session's plan, in its own results folder.
      for (const SessionSpec& s : exp->sessions) {
        Experiment one = *exp;
        one.sessions.clear();
        one.workload = s.workload;
        auto plan = PlanRun(one, (std::filesystem::path(o->outdir) / "sessions" / s.name).string());
        if (!plan.ok()) return Fail(plan.status().Prefixed("session '" + s.name + "'"));
        fmt::print("session {}:\n{}", s.name, PlanText(*plan));
      }
      return 0;
    }
    if (o->dry_run) {
      auto plan = PlanRun(*exp, o->outdir);
      if (!plan.ok()) return Fail(plan.status());
      fmt::print("{}", PlanText(*plan));
      return 0;
    }
    if (exp->history.enabled && exp->history.configs.empty())
      return RunHistoryCommand(HistoryOf(*exp, o->outdir, !o->quiet));
    RunOptions ro;
    ro.outdir = o->outdir;
    ro.log.bars = !o->quiet;
    ro.verify_recipe = o->verify_recipe;
    if (!o->memory.empty()) {
      auto b = ParseBytes(o->memory);
      if (!b.ok()) return Fail(b.status().Prefixed("--memory"));
      ro.memory_budget = *b;
    }
    double t0 = NowSeconds();
    if (!exp->sessions.empty()) {
      auto suite = RunSuite(*exp, ro);
      if (!suite.ok()) return Fail(suite.status());
      fmt::print("{}", SuiteSummary(*suite, (std::filesystem::path(o->outdir) / "report.html").string()));
      fmt::print("finished in {:.0f} s\n", NowSeconds() - t0);
      return 0;
    }
    auto results = RunExperiment(*exp, ro);
    if (!results.ok()) return Fail(results.status());
    std::string html = (std::filesystem::path(o->outdir) / "report.html").string();
    fmt::print("{}", TerminalSummary(*results, html));
    if (!exp->history.configs.empty())
      if (Status st = WriteConfigHistory(*exp, *results, o->outdir); !st.ok()) return Fail(st);
    fmt::print("finished in {:.0f} s\n", NowSeconds() - t0);
    // A recipe that was asked to be proven and was not fails the run (its report is written).
    if (const auto& recipe = results->recipe;
        recipe && recipe->verification && recipe->verification->status != "matched")
      return Fail(Status::Error("--verify-recipe: " + RecipeVerificationText(*recipe)));
    return 0;
  };
}

Action DefineReport(CLI::App* cmd) {
  struct Opts {
    std::string results, outdir;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("results", o->results, "results.json written by flipscope run")->required();
  cmd->add_option("-o,--output", o->outdir, "Folder for the report files")->required();
  return [o]() -> int {
    auto results = ReadResultsFile(o->results);
    if (!results.ok()) return Fail(results.status());
    std::error_code ec;
    std::filesystem::create_directories(o->outdir, ec);
    if (ec) return Fail(Status::Error(o->outdir + ": " + ec.message()));
    if (Status st = WriteReport(*results, o->outdir); !st.ok()) return Fail(st);
    fmt::print("report: {}\n", (std::filesystem::path(o->outdir) / "report.html").string());
    return 0;
  };
}

}  // namespace flipscope::cli
