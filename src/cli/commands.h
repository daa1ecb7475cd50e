// cli: one subcommand per stage. Each Define* registers its flags on the subcommand main made for
// it and returns its action; main's command table names them. Actions print one clear line on
// error and return the exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "util/status.h"

namespace flipscope {
struct HistoryRequest;
}  // namespace flipscope

namespace flipscope::cli {

// Prints "flipscope: error: <message>" to stderr and returns exit code 1.
int Fail(const Status& status);
// 0 on success, else Fail(status).
int Done(const Status& status);

// Libraries name the field a bad value came from (max_flips, api), marked with OptionName; the
// command line says the flag that sets it. The status with each marked field found in `flags`
// written as its flag ("max_flips must be >= 0" -> "--max-flips must be >= 0"); no other text
// changes, and the status keeps its code (invalid argument, refused, I/O).
Status FieldsAsFlags(const Status& status, std::initializer_list<std::pair<std::string_view, std::string_view>> flags);

// Validators whose failure says what is accepted: a whole number >= min; a number in [lo, hi].
CLI::Validator WholeAtLeast(long long min);
CLI::Validator NumberIn(double lo, double hi);
// One line for a command-line error: the flag as the user spelt it (-fa, not --flash-attn), what
// is wrong and what it accepts (args: the command line as parsed, for the subcommand's name).
std::string ArgumentErrorLine(const CLI::App& app, const std::vector<std::string>& args, const CLI::ParseError& e);

// Registers every numerics knob of KnobTable() under its flags; texts receives what was given.
// The command's --help lists llama.cpp's spelling beside each knob's flag (-fa,--flash-attn).
void AddKnobFlags(CLI::App* cmd, std::map<std::string, std::string>& texts);
// Applies the knob flags that were given; the error names the flag as the user wrote it.
Status ApplyKnobFlags(const CLI::App* cmd, const std::map<std::string, std::string>& texts, Knobs& knobs);

// The flags `history` and `bisect` share, registered into a request with their fields (model and
// workload paths, workload options, probe plan, max_tokens, window, worker): the model, the workload
// and its format (format receives --format's text, parsed by the caller), the probe plan, the window,
// the short range and every version's CPU code.
template <class Request>
void AddVersionSessionFlags(CLI::App* cmd, Request& r, std::string& format) {
  cmd->add_option("-m,--model", r.model_path, "GGUF model file")->required();
  cmd->add_option("-w,--workload", r.workload_path, "Chat JSON/JSONL, plain text or token ids")->required();
  cmd->add_option("--max-tokens", r.max_tokens, "Only the workload's first N tokens (a short range: quicker steps)")
      ->check(WholeAtLeast(2));
  cmd->add_option("--format", format, "Workload format: auto, chat, jsonl, text, tokens")->capture_default_str();
  cmd->add_option("--chat-template", r.workload.chat_template,
                  "Jinja template FILE or llama.cpp template NAME (default: the model's embedded one)");
  cmd->add_option("--stride", r.plan.stride, "Store every N-th position")->default_val(32)->check(WholeAtLeast(1));
  cmd->add_option("--full", r.plan.full, "Also store every position of: tool_calls and/or ranges A-B,...");
  cmd->add_option("--window", r.window, "Window size in tokens")->default_val(8192)->check(WholeAtLeast(1));
  cmd->add_option("--cpu", r.worker.cpu,
                  "CPU code of every version's llama.cpp build: portable (ggml's x86-64 set) or native (this "
                  "machine's); default: the one this binary's llama.cpp was built with")
      ->check(CLI::IsMember({"portable", "native"}));
}

// What a subcommand does once its flags are parsed; returns the process exit code.
using Action = std::function<int()>;

// One subcommand: its name, its --help line and what registers its flags.
struct Command {
  const char* name;
  const char* help;
  Action (*define)(CLI::App* cmd);
};
// Parses argv (llama.cpp's flag spellings accepted) against the commands and runs the one given;
// --version calls version. Returns the exit code.
int RunCommands(int argc, char** argv, CLI::App& app, std::span<const Command> commands,
                const std::function<void()>& version);

Action DefineInfo(CLI::App* cmd);
Action DefineCapture(CLI::App* cmd);
Action DefineInspect(CLI::App* cmd);
Action DefineCompare(CLI::App* cmd);
Action DefineBranch(CLI::App* cmd);
Action DefineLayers(CLI::App* cmd);
Action DefineRun(CLI::App* cmd);
Action DefineReport(CLI::App* cmd);
Action DefineTensors(CLI::App* cmd);
Action DefineDoctor(CLI::App* cmd);
Action DefineHistory(CLI::App* cmd);
Action DefineBisect(CLI::App* cmd);

// Runs a history (flipscope history, or flipscope run over a file with [history]) and prints it.
int RunHistoryCommand(const HistoryRequest& req, Status (*explain)(const Status&) = nullptr);
// A version-history error's fields as `flipscope history` / `bisect` spell them (--llama-src, ...).
Status WithVersionFlags(const Status& st);

}  // namespace flipscope::cli
