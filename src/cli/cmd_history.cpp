// `flipscope history -m MODEL -w WORKLOAD --releases 0.3.35,0.3.36 -o OUTDIR [--reference exact] [knobs]`,
// or `--llama-src DIR --commits A,B` in place of --releases
#include <fmt/format.h>

#include <filesystem>

#include "cli/commands.h"
#include "history/history.h"
#include "report/report.h"
#include "util/util.h"

namespace flipscope::cli {

Status WithVersionFlags(const Status& st) {
  return FieldsAsFlags(st,
                       {{"commits", "--commits"},
                        {"releases", "--releases"},
                        {"llama_src", "--llama-src"},
                        {"chat_template", "--chat-template"}});
}

// Runs a history and prints its table and where the files are; explain (when given) rewrites an
// error's field names as the caller's flags.
int RunHistoryCommand(const HistoryRequest& req, Status (*explain)(const Status&)) {
  auto doc = RunHistory(req);
  if (!doc.ok()) return Fail(explain ? explain(doc.status()) : doc.status());
  const std::string html = (std::filesystem::path(req.out_dir) / "history.html").string();
  if (Status st = WriteFileAtomic(html, RenderHistoryHtml(*doc)); !st.ok()) return Fail(st);
  fmt::print("{}", HistoryTerminal(*doc));
  fmt::print("wrote {}/history.json, history.md and history.html\n", req.out_dir);
  return 0;
}

Action DefineHistory(CLI::App* cmd) {
  struct Opts {
    HistoryRequest req;
    std::string reference;
    std::string format{NameOf(WorkloadOptions().format)};
    std::map<std::string, std::string> knob_texts;
    bool quiet = false;
  };
  auto o = std::make_shared<Opts>();
  HistoryRequest& r = o->req;
  AddVersionSessionFlags(cmd, r, o->format);
  cmd->add_option("-o,--output", r.out_dir, "Folder for the captures, history.json and history.md")->required();
  auto* releases =
      cmd->add_option("--releases", r.releases,
                      "llama-cpp-python releases whose vendored llama.cpp is compared, in order (e.g. 0.3.35,0.3.36)");
  releases->delimiter(',');
  cmd->add_option("--llama-src", r.llama_src, "Your llama.cpp git checkout, whose --commits are compared");
  auto* commits = cmd->add_option("--commits", r.commits, "Commits (ids, tags, branches) of --llama-src, in order");
  commits->delimiter(',');
  cmd->add_option("--reference", o->reference, "exact: also compare every release with the FP64 exact engine");
  cmd->add_option("--forks", r.forks,
                  "Follow the forks at the first N flips (where the model writes) of the step that changed most, "
                  "each side's future decoded by its own version")
      ->capture_default_str();
  cmd->add_option("--fork-tokens", r.fork_tokens, "--forks: each future's length in tokens")->capture_default_str();
  cmd->add_flag("-q,--quiet", o->quiet, "No progress bars");
  AddKnobFlags(cmd, o->knob_texts);
  return [o, cmd]() -> int {
    if (o->req.forks < 0) return Fail(Status::InvalidArgument("--forks must be >= 0"));
    if (o->req.fork_tokens < 1) return Fail(Status::InvalidArgument("--fork-tokens must be >= 1"));
    if (!o->reference.empty() && o->reference != "exact")
      return Fail(Status::InvalidArgument("--reference must be exact (the FP64 exact engine, docs/exact.md)"));
    o->req.reference_exact = o->reference == "exact";
    if (o->req.releases.empty() && o->req.commits.empty())
      return Fail(Status::InvalidArgument("give --releases, or --llama-src and --commits"));
    auto format = ParseWorkloadFormat(o->format, "--format");
    if (!format.ok()) return Fail(format.status());
    o->req.workload.format = *format;
    if (Status st = ApplyKnobFlags(cmd, o->knob_texts, o->req.knobs); !st.ok()) return Fail(st);
    o->req.log.bars = !o->quiet;
    return RunHistoryCommand(o->req, WithVersionFlags);
  };
}

}  // namespace flipscope::cli
