// `flipscope run EXPERIMENT.toml -o OUTDIR [--memory 8GiB]`
#include <fmt/format.h>

#include <filesystem>

#include "cli/commands.h"
#include "experiment/experiment.h"
#include "report/report.h"
#include "util/util.h"

namespace flipscope::cli {

void AddRunCommand(CLI::App& app) {
  struct Opts { std::string file, outdir, memory; bool quiet = false; };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("run", "Run an experiment file: captures, comparisons, branches, report and recipe");
  cmd->add_option("experiment", o->file, "Experiment file (TOML)")->required();
  cmd->add_option("-o,--output", o->outdir, "Results folder")->required();
  cmd->add_option("--memory", o->memory, "Memory budget for the recipe, e.g. 8GiB");
  cmd->add_flag("-q,--quiet", o->quiet, "No progress bars");
  cmd->callback([o] {
    auto exp = ParseExperiment(o->file);
    if (!exp.ok()) return void(ExitCode() = Fail(exp.status()));
    RunOptions ro;
    ro.outdir = o->outdir;
    ro.progress = !o->quiet;
    if (!o->memory.empty()) {
      auto b = ParseBytes(o->memory);
      if (!b.ok()) return void(ExitCode() = Fail(b.status().Prefixed("--memory")));
      ro.memory_budget = *b;
    }
    double t0 = NowSeconds();
    auto results = RunExperiment(*exp, ro);
    if (!results.ok()) return void(ExitCode() = Fail(results.status()));
    std::string html = (std::filesystem::path(o->outdir) / "report.html").string();
    fmt::print("{}", TerminalSummary(*results, html));
    fmt::print("finished in {:.0f} s\n", NowSeconds() - t0);
  });
}

}  // namespace flipscope::cli
