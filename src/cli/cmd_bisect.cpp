// `flipscope bisect --llama-src DIR --good G --bad B --criterion C -m MODEL -w WORKLOAD -o OUTDIR [knobs]`
#include <fmt/format.h>

#include "cli/commands.h"
#include "history/history.h"

namespace flipscope::cli {

Action DefineBisect(CLI::App* cmd) {
  struct Opts {
    BisectRequest req;
    std::string criterion = "not-bit-identical";
    std::string format{NameOf(WorkloadOptions().format)};
    std::map<std::string, std::string> knob_texts;
    bool quiet = false;
  };
  auto o = std::make_shared<Opts>();
  BisectRequest& r = o->req;
  cmd->add_option("--llama-src", r.llama_src, "Your llama.cpp git checkout")->required();
  cmd->add_option("--good", r.good, "A commit (id, tag, branch) whose numbers are the reference")->required();
  cmd->add_option("--bad", r.bad, "A later commit whose numbers differ from good's")->required();
  cmd->add_option("--criterion", o->criterion,
                  "What makes a commit bad against good: not-bit-identical, flips>N or kl>X (mean KL)")
      ->capture_default_str();
  AddVersionSessionFlags(cmd, r, o->format);
  cmd->add_option("-o,--output", r.out_dir, "Folder for bisect.json, the captures and the logs (a rerun resumes)")
      ->required();
  cmd->add_flag("-q,--quiet", o->quiet, "No progress bars");
  AddKnobFlags(cmd, o->knob_texts);
  return [o, cmd]() -> int {
    auto criterion = ParseBisectCriterion(o->criterion);
    if (!criterion.ok()) return Fail(criterion.status());
    o->req.criterion = *criterion;
    auto format = ParseWorkloadFormat(o->format, "--format");
    if (!format.ok()) return Fail(format.status());
    o->req.workload.format = *format;
    if (Status st = ApplyKnobFlags(cmd, o->knob_texts, o->req.knobs); !st.ok()) return Fail(st);
    o->req.log.bars = !o->quiet;
    auto doc = RunBisect(o->req);
    if (!doc.ok()) return Fail(WithVersionFlags(doc.status()));
    fmt::print("{}", BisectTerminal(*doc));
    fmt::print("wrote {}/bisect.json\n", o->req.out_dir);
    return 0;
  };
}

}  // namespace flipscope::cli
