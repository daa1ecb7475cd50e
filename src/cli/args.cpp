// Command-line errors in the documented form: one line "flipscope: error: ...", naming the flag as
// the user spelt it, what is wrong and what it accepts, exit 1 (CLI11's own messages and exit
// codes are replaced; --help still exits through CLI11).
#include <fmt/format.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "engine/engine.h"

namespace flipscope::cli {

namespace {

// Parses the whole text as a number; false on trailing characters or no digits.
bool ParseNumber(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end && *end == '\0';
}

// What a numeric option's type accepts, in words; "" for text (its description says).
std::string TypeWords(const CLI::Option& o) {
  const std::string t = o.get_type_name();
  if (t.rfind("INT", 0) == 0) return "a whole number";
  if (t.rfind("UINT", 0) == 0) return "a whole number >= 0";
  if (t.rfind("FLOAT", 0) == 0) return "a number";
  return "";
}

// The spelling the user typed for an option: llama.cpp's short form for a knob (-fa, -ctk).
std::string Spelling(const std::string& name) {
  for (const auto& k : KnobTable()) {
    std::string long_flag = k.long_flag;
    long_flag = long_flag.substr(long_flag.find("--"));
    if (long_flag == name && *k.llama_flag) return k.llama_flag;
  }
  return name;
}

// --help of a command with knob flags: llama.cpp's spelling beside the long name ("-fa,--flash-attn").
// CLI11 cannot register a name of one dash and several letters, so the knob options carry their
// long names only and the spellings users type (rewritten before parsing, app.cpp) are shown here.
class KnobSpellingsFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override {
    std::string name = CLI::Formatter::make_option_name(opt, is_positional);
    if (is_positional) return name;
    const std::string spelling = Spelling(name);
    return spelling == name ? name : spelling + "," + name;
  }
};

// The subcommand named on the command line (the first argument that is one), or the app.
const CLI::App* CommandOf(const CLI::App& app, const std::vector<std::string>& args) {
  for (const std::string& a : args)
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
      if (sub->get_name() == a) return sub;
  return &app;
}

// The option an error message is about: the longest option name it mentions.
const CLI::Option* OptionIn(const CLI::App& cmd, const std::string& what) {
  const CLI::Option* best = nullptr;
  size_t best_len = 0;
  for (const CLI::Option* o : cmd.get_options()) {
    for (const std::string& n : o->get_lnames()) {
      const std::string name = "--" + n;
      if (what.find(name) != std::string::npos && name.size() > best_len) best = o, best_len = name.size();
    }
    for (const std::string& n : o->get_snames()) {
      const std::string name = "-" + n;
      if (what.find(name + " ") != std::string::npos && name.size() > best_len) best = o, best_len = name.size();
    }
    const std::string pos = o->get_name(true, false);
    const bool named = what.rfind(pos + " ", 0) == 0 || what.rfind(pos + ":", 0) == 0;
    if (o->get_positional() && named && pos.size() > best_len) best = o, best_len = pos.size();
  }
  return best;
}

}  // namespace

CLI::Validator WholeAtLeast(long long min) {
  return CLI::Validator(
      [min](std::string& s) -> std::string {
        double v = 0;
        if (!ParseNumber(s, &v) || v != double(static_cast<long long>(v)) || v < double(min))
          return fmt::format("must be a whole number >= {}, not '{}'", min, s);
        return "";
      },
      fmt::format("INT >= {}", min));
}

Status FieldsAsFlags(const Status& status, std::initializer_list<std::pair<std::string_view, std::string_view>> flags) {
  std::map<std::string, std::string, std::less<>> names;
  for (const auto& [field, flag] : flags) names.emplace(field, flag);
  return status.WithOptionNames(names);
}

CLI::Validator NumberIn(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        double v = 0;
        if (!ParseNumber(s, &v) || !(v >= lo && v <= hi))
          return hi == INFINITY ? fmt::format("must be a number >= {}, not '{}'", lo, s)
                                : fmt::format("must be a number from {} to {}, not '{}'", lo, hi, s);
        return "";
      },
      hi == INFINITY ? fmt::format("NUMBER >= {}", lo) : fmt::format("NUMBER in [{}, {}]", lo, hi));
}

std::string ArgumentErrorLine(const CLI::App& app, const std::vector<std::string>& args, const CLI::ParseError& e) {
  const std::string what = e.what();
  const CLI::App* cmd = CommandOf(app, args);
  const std::string help = cmd == &app ? "flipscope --help" : fmt::format("flipscope {} --help", cmd->get_name());
  const CLI::Option* opt = OptionIn(*cmd, what);
  if (!opt) opt = OptionIn(app, what);
  if (!opt) return fmt::format("{} (see {})", what, help);
  const std::string name = opt->get_positional()
                               ? "<" + opt->get_name(true, false) + ">"
                               : Spelling(opt->get_name(false, true).substr(0, opt->get_name(false, true).find(',')));
  const std::string type = TypeWords(*opt);
  const std::string accepts = type.empty() ? opt->get_description() : type + ": " + opt->get_description();
  const std::string name_colon = opt->get_name() + ": ";
  std::string wrong;
  if (dynamic_cast<const CLI::ValidationError*>(&e)) {
    // Our validators say what was wrong and what is accepted; CLI11's prefix is the option's name.
    size_t at = what.find(": ");
    return fmt::format("{} {}", name, at == std::string::npos ? what : what.substr(at + 2));
  } else if (dynamic_cast<const CLI::ConversionError*>(&e)) {
    size_t eq = what.find(" = ");
    wrong = eq == std::string::npos ? "cannot read its value" : "cannot read '" + what.substr(eq + 3) + "'";
  } else if (dynamic_cast<const CLI::ArgumentMismatch*>(&e)) {
    wrong = opt->get_expected_min() > 1 ? fmt::format("needs {} values", opt->get_expected_min()) : "needs a value";
    if (opt->get_positional() && opt->get_expected_max() > 1)
      wrong = fmt::format("needs at least {} values", opt->get_expected_min());
  } else if (dynamic_cast<const CLI::RequiredError*>(&e)) {
    wrong = "is required";
  } else {
    wrong = what.rfind(name_colon, 0) == 0 ? what.substr(name_colon.size()) : what;
  }
  return fmt::format("{} {} ({})", name, wrong, accepts);
}

void AddKnobFlags(CLI::App* cmd, std::map<std::string, std::string>& texts) {
  static const Knobs defaults;
  cmd->formatter(std::make_shared<KnobSpellingsFormatter>());
  for (const auto& k : KnobTable()) {
    const KnobValue d = k.get(defaults);
    const std::string shown = KnobText(d);
    auto* opt = cmd->add_option(k.long_flag, texts[k.key], k.help);
    // No default shown for a list (-ts) or an empty name (-dev).
    if (!std::holds_alternative<std::vector<double>>(d) && !shown.empty()) opt->default_str(shown);
  }
}

Status ApplyKnobFlags(const CLI::App* cmd, const std::map<std::string, std::string>& texts, Knobs& knobs) {
  for (const auto& k : KnobTable()) {
    std::string name = k.long_flag;
    name = name.substr(name.find("--"));
    if (cmd->get_option(name)->count() == 0) continue;
    // As llama.cpp spells it (-fa), else the short form (-t), else the long one.
    FS_RETURN_IF_ERROR(SetKnobFromText(knobs, k, texts.at(k.key)).Prefixed(k.ShownFlag()));
  }
  return Status::Ok();
}

}  // namespace flipscope::cli
