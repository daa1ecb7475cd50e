// `flipscope history -m MODEL -w WORKLOAD --releases 0.3.35,0.3.36 -o OUTDIR [--reference exact] [knobs]`,
// or `--llama-src DIR --commits A,B` in place of --releases
#include <fmt/format.h>

#include <filesystem>

#include "cli/commands.h"
#include "history/history.h"
#include "report/report.h"
#include "util/util.h"

namespace flipscope::cli {

// Runs a history and prints its table and where the files are.
int RunHistoryCommand(const HistoryRequest& req) {
  auto doc = RunHistory(req);
  if (!doc.ok()) return Fail(doc.status());
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
  cmd->add_option("-m,--model", r.model_path, "GGUF model file")->required();
  cmd->add_option("-w,--workload", r.workload_path, "Chat JSON/JSONL, plain text or token ids")->required();
  cmd->add_option("-o,--output", r.out_dir, "Folder for the captures, history.json and history.md")->required();
  auto* releases = cmd->add_option(
      "--releases", r.releases,
      "llama-cpp-python releases whose vendored llama.cpp is compared, in order (e.g. 0.3.35,0.3.36)");
  releases->delimiter(',');
  cmd->add_option("--llama-src", r.llama_src, "Your llama.cpp git checkout, whose --commits are compared");
  auto* commits = cmd->add_option("--commits", r.commits, "Commits (ids, tags, branches) of --llama-src, in order");
  commits->delimiter(',');
  cmd->add_option("--max-tokens", r.max_tokens, "Only the workload's first N tokens")->check(WholeAtLeast(2));
  cmd->add_option("--reference", o->reference, "exact: also compare every release with the FP64 exact engine");
  cmd->add_option("--format", o->format, "Workload format: auto, chat, jsonl, text, tokens")->capture_default_str();
  cmd->add_option("--chat-template", r.workload.chat_template,
                  "Jinja template FILE or llama.cpp template NAME (default: the model's embedded one)");
  cmd->add_option("--stride", r.plan.stride, "Store every N-th position")->default_val(32)->check(WholeAtLeast(1));
  cmd->add_option("--full", r.plan.full, "Also store every position of: tool_calls and/or ranges A-B,...");
  cmd->add_option("--window", r.window, "Window size in tokens")->default_val(8192)->check(WholeAtLeast(1));
  cmd->add_option("--cpu", r.worker.cpu,
                  "CPU code of every release's llama.cpp build: portable (ggml's x86-64 set) or native (this "
                  "machine's); default: the one this binary's llama.cpp was built with")
      ->check(CLI::IsMember({"portable", "native"}));
  cmd->add_flag("-q,--quiet", o->quiet, "No progress bars");
  AddKnobFlags(cmd, o->knob_texts);
  return [o, cmd]() -> int {
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
    return RunHistoryCommand(o->req);
  };
}

}  // namespace flipscope::cli
