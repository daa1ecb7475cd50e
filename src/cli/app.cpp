// What every flipscope executable's main shares: the one-line error, llama.cpp's flag spellings,
// and parsing a table of subcommands.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "engine/engine.h"

namespace flipscope::cli {

int Fail(const Status& status) {
  fmt::print(stderr, "flipscope: error: {}\n", status.message());
  return 1;
}
int Done(const Status& status) { return status.ok() ? 0 : Fail(status); }

namespace {
// llama.cpp spells some flags as one dash and several letters (-fa, -ctk); CLI11 reads those as
// bundled short flags, so they are rewritten to their long names before parsing.
std::vector<std::string> LlamaStyleArgs(int argc, char** argv) {
  std::vector<std::pair<std::string, std::string>> spellings;
  for (const auto& k : flipscope::KnobTable()) {
    std::string long_flag = k.long_flag;
    if (*k.llama_flag) spellings.emplace_back(k.llama_flag, long_flag.substr(long_flag.find("--")));
  }
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-nr" || a == "--no-repack") {  // llama.cpp's switch for --repack off
      out.push_back("--repack");
      out.push_back("off");
      continue;
    }
    for (auto& [s, l] : spellings) {
      if (a == s)
        a = l;
      else if (a.rfind(s + "=", 0) == 0)
        a = l + a.substr(s.size());
    }
    out.push_back(a);
  }
  std::reverse(out.begin(), out.end());  // CLI11 takes arguments in reverse order
  return out;
}
}  // namespace

int RunCommands(int argc, char** argv, CLI::App& app, std::span<const Command> commands,
                const std::function<void()>& version) {
  app.require_subcommand(0, 1);
  bool show_version = false, verbose = false;
  app.add_flag("--version", show_version, "Print flipscope's, llama.cpp's and ggml's versions and the backends");
  app.add_flag("-v,--verbose", verbose, "Show llama.cpp's log");
  app.parse_complete_callback([&] { flipscope::InitLlamaLogging(verbose); });
  std::vector<std::pair<CLI::App*, Action>> actions;
  for (const Command& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    actions.emplace_back(sub, c.define(sub));
  }
  const std::vector<std::string> args = LlamaStyleArgs(argc, argv);
  try {
    std::vector<std::string> consumed = args;  // CLI11 takes the arguments out of the vector it parses
    app.parse(consumed);
  } catch (const CLI::Success& e) {  // --help: CLI11 prints it
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return Fail(flipscope::Status::InvalidArgument(ArgumentErrorLine(app, args, e)));
  }
  if (show_version) {
    version();
    return 0;
  }
  for (auto& [sub, action] : actions)
    if (sub->parsed()) return action();
  fmt::print("{}", app.help());
  return 0;
}

}  // namespace flipscope::cli
