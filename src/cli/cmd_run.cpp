// `flipscope run EXPERIMENT.toml -o OUTDIR [--memory 8GiB]` and `flipscope report RESULTS.json -o OUTDIR`
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

void AddReportCommand(CLI::App& app) {
  struct Opts { std::string results, outdir; };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("report", "Render report.html, report.md and results.csv again from a results.json "
                                           "(e.g. one made on another machine)");
  cmd->add_option("results", o->results, "results.json written by flipscope run")->required();
  cmd->add_option("-o,--output", o->outdir, "Folder for the report files")->required();
  cmd->callback([o] {
    auto text = ReadFile(o->results);
    if (!text.ok()) return void(ExitCode() = Fail(text.status()));
    nlohmann::json results = nlohmann::json::parse(*text, nullptr, false);
    if (results.is_discarded() || !results.is_object() || !results.contains("configs") ||
        !results["configs"].is_array())
      return void(ExitCode() = Fail(Status::Error(o->results + ": not a results.json written by flipscope run")));
    std::error_code ec;
    std::filesystem::create_directories(o->outdir, ec);
    if (ec) return void(ExitCode() = Fail(Status::Error(o->outdir + ": " + ec.message())));
    if (Status st = WriteReport(results, o->outdir); !st.ok()) return void(ExitCode() = Fail(st));
    fmt::print("report: {}\n", (std::filesystem::path(o->outdir) / "report.html").string());
  });
}

}  // namespace flipscope::cli
