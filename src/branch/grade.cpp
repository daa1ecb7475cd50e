// Graded failures: what makes one failing future worse than another: calls
// that a reviewer accepts as the transcript's or that only inspect (loops: runaway.cpp; facts prose invents:
// facts.cpp).

#include <algorithm>
#include <array>
#include <cctype>
#include <set>
#include <span>

#include "branch/chars.h"
#include "branch/verdict.h"
#include "util/names.h"

namespace flipscope {
namespace {

using branch_chars::Lower;

// Shell programs that only filter or page what a command prints.
constexpr std::array<std::string_view, 12> kOutputFilters = {"head", "tail", "grep", "egrep", "less",   "more",
                                                             "wc",   "sort", "cut",  "jq",    "column", "uniq"};
// Commands (first word) and SQL statements that only inspect.
constexpr std::array<std::string_view, 40> kReadOnlyVerbs = {
    "show", "get", "list", "status", "describe",      "cat",        "ls",         "ps",        "ss",     "netstat",
    "ping", "dig", "df",   "du",     "head",          "tail",       "grep",       "which",     "whoami", "uptime",
    "free", "id",  "env",  "stat",   "find",          "ip",         "journalctl", "systemctl", "select", "explain",
    "\\d",  "\\l", "\\dt", "\\du",   "pg_lsclusters", "pg_isready", "traceroute", "nslookup",  "top",    "lsof"};
// Words that change state even under a read-only program (`ip route add`, `systemctl restart`).
constexpr std::array<std::string_view, 24> kWriteWords = {
    "add",    "del",     "delete", "set",   "restart", "stop",     "start",  "reload",
    "enable", "disable", "kill",   "mask",  "drop",    "truncate", "update", "insert",
    "rm",     "mv",      "write",  "apply", "reboot",  "flush",    "-exec",  "promote"};
// Function-name prefixes of tools that only read.
constexpr std::array<std::string_view, 12> kReadOnlyTools = {"get_",   "list_",   "show_", "check_",
                                                             "read_",  "search_", "find_", "describe_",
                                                             "query_", "lookup_", "view_", "inspect_"};

// Whether a tool's name says it runs the test suite (run_tests, test, run-unit-tests,
// execute_test_suite): a word naming tests and no word but running's. A test run reads the code
// and writes nothing the session depends on; write_test or delete_tests change the code.
bool RunsTestsByName(std::string_view name) {
  static constexpr std::string_view kTestWords[] = {"test", "tests", "pytest", "unittest", "spec", "specs"};
  static constexpr std::string_view kRunWords[] = {"run", "runs", "exec", "execute", "all", "suite", "unit", "one"};
  bool test = false;
  for (size_t a = 0; a <= name.size();) {
    const size_t b = std::min(name.find_first_of("_-", a), name.size());
    const std::string_view w = name.substr(a, b - a);
    if (std::find(std::begin(kTestWords), std::end(kTestWords), w) != std::end(kTestWords))
      test = true;
    else if (std::find(std::begin(kRunWords), std::end(kRunWords), w) == std::end(kRunWords))
      return false;
    a = b + 1;
  }
  return test;
}

// Whether a command's words (lower case, sudo dropped) run a test suite: pytest, python -m pytest
// or unittest, or a build tool's test target (npm test, go test, cargo test, make test, ctest).
bool RunsTestSuite(const std::vector<std::string>& words) {
  if (words.empty()) return false;
  static constexpr std::string_view kRunners[] = {"pytest", "ctest", "tox", "jest", "rspec", "nosetests"};
  if (std::find(std::begin(kRunners), std::end(kRunners), words[0]) != std::end(kRunners)) return true;
  if (words.size() >= 3 && words[0].rfind("python", 0) == 0 && words[1] == "-m" &&
      (words[2] == "pytest" || words[2] == "unittest"))
    return true;
  static constexpr std::string_view kBuildTools[] = {"npm", "yarn", "pnpm", "go", "cargo", "make", "mvn", "gradle"};
  return words.size() >= 2 &&
         std::find(std::begin(kBuildTools), std::end(kBuildTools), words[0]) != std::end(kBuildTools) &&
         (words[1] == "test" || words[1] == "check");
}

std::vector<std::string> ShellWords(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    size_t j = i;
    while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

bool ReadOnlyCommand(std::string_view cmd);

// A command's words, with the separators `|`, `&&` and `;` as words of their own.
std::vector<std::string> CommandWords(std::string_view cmd) {
  std::string spaced;
  for (size_t i = 0; i < cmd.size(); ++i) {
    if (cmd.compare(i, 2, "&&") == 0) {
      spaced += " && ", ++i;
    } else if (cmd[i] == ';' || cmd[i] == '|') {
      spaced += std::string(" ") + cmd[i] + " ";
    } else {
      spaced += cmd[i];
    }
  }
  return ShellWords(spaced);
}

// A command with its whitespace collapsed and its trailing output filters (`| head -40`) dropped.
std::vector<std::string> NormalCommand(std::string_view cmd) {
  std::vector<std::string> words = CommandWords(cmd);
  for (;;) {
    auto sep = std::find(words.rbegin(), words.rend(), "|");
    if (sep == words.rend() || sep == words.rbegin() ||
        std::find(kOutputFilters.begin(), kOutputFilters.end(), *(sep - 1)) == kOutputFilters.end())
      break;
    words.erase(std::prev(sep.base()), words.end());
  }
  return words;
}

std::string Joined(std::span<const std::string> words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// Whether `longer` is `shorter` and then only commands that inspect, after `&&` or `;`
// (`sudo mount /mnt/x && df -h /mnt/x` for `sudo mount /mnt/x`): the same action, its result
// shown. Two commands that go on differently after the same head are not (`git show --stat c &&
// pytest` for `git show --stat c && git show c -- tax.py`): the part after the head is the action.
bool ShowsMore(const std::vector<std::string>& longer, const std::vector<std::string>& shorter) {
  if (longer.size() <= shorter.size() + 1 || !std::equal(shorter.begin(), shorter.end(), longer.begin())) return false;
  const std::string& sep = longer[shorter.size()];
  return (sep == "&&" || sep == ";") && ReadOnlyCommand(Joined(std::span(longer).subspan(shorter.size() + 1)));
}

bool EquivalentCommands(std::string_view a, std::string_view b) {
  const std::vector<std::string> na = NormalCommand(a), nb = NormalCommand(b);
  return na == nb || ShowsMore(na, nb) || ShowsMore(nb, na);
}

// Arguments equal once every string is normalized as a command.
bool SameAfterNormalising(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_string() && b.is_string()) return EquivalentCommands(a.get<std::string>(), b.get<std::string>());
  if (a.type() != b.type() || a.size() != b.size()) return a == b;
  if (a.is_object()) {
    for (auto& [k, v] : a.items())
      if (!b.contains(k) || !SameAfterNormalising(v, b[k])) return false;
    return true;
  }
  if (a.is_array()) {
    for (size_t i = 0; i < a.size(); ++i)
      if (!SameAfterNormalising(a[i], b[i])) return false;
    return true;
  }
  return a == b;
}

// SQL that changes state even inside a SELECT (SELECT pg_drop_replication_slot(...)).
constexpr std::array<std::string_view, 16> kSqlWrites = {
    "drop",   "delete",    "insert", "update",  "alter",  "create",     "truncate", "grant",
    "revoke", "terminate", "cancel", "promote", "reload", "switch_wal", "vacuum",   "checkpoint"};

// Whether an SQL statement only reads: it starts with SELECT, SHOW, EXPLAIN, TABLE or a psql
// describe command, and nothing in it names a change.
bool ReadOnlySql(std::string_view sql) {
  const std::string low = Lower(sql);
  std::vector<std::string> words = ShellWords(low);
  if (words.empty()) return false;
  static constexpr std::string_view kReads[] = {"select", "show", "explain", "table", "\\d", "\\l", "\\dt", "\\du"};
  if (std::find(std::begin(kReads), std::end(kReads), words[0]) == std::end(kReads)) return false;
  return std::none_of(kSqlWrites.begin(), kSqlWrites.end(),
                      [&](std::string_view w) { return low.find(w) != std::string::npos; });
}

// Whether one command of a pipeline or list only inspects: its program (after sudo) or SQL verb
// reads, or it asks for help or the version, and no word of it changes state.
bool ReadOnlySegment(std::string_view cmd) {
  std::vector<std::string> words = ShellWords(Lower(cmd));
  if (!words.empty() && words[0] == "sudo") words.erase(words.begin());
  if (words.empty()) return false;
  // ip's options come before its object (ip -4 addr, ip -br link).
  if (words[0] == "ip")
    words.erase(std::remove_if(words.begin() + 1, words.end(), [](const std::string& w) { return w[0] == '-'; }),
                words.end());
  for (const std::string& w : words)
    if (std::find(kWriteWords.begin(), kWriteWords.end(), w) != kWriteWords.end()) return false;
  // Help or the version: --help anywhere; -h or -v only alone, since many programs give them
  // other meanings (`psql -h HOST`, `df -h`, `grep -v`).
  for (const std::string& w : words)
    if (w == "--help" || w == "--version" || (words.size() == 2 && (w == "-h" || w == "-v"))) return true;
  // psql -c "SELECT ...": the statement decides.
  const std::string low = Lower(cmd);
  for (std::string_view flag : {" -c ", " --command "})
    if (const size_t at = low.find(flag); words[0] == "psql" && at != std::string::npos) {
      std::string sql(cmd.substr(at + flag.size()));
      std::erase(sql, '"'), std::erase(sql, '\'');
      return ReadOnlySql(sql);
    }
  if (RunsTestSuite(words)) return true;
  // A program whose subcommand decides (git log, ufw status, docker ps, ip route, kubectl get).
  static constexpr std::string_view kBySubcommand[] = {"git", "ufw", "docker", "kubectl", "ip", "apt", "pip", "npm"};
  static constexpr std::string_view kReadSubcommands[] = {
      "status", "log",  "show",    "diff", "list",  "ls",     "get",  "describe", "ps",    "route",
      "addr",   "link", "inspect", "top",  "blame", "branch", "info", "search",   "freeze"};
  if (words.size() >= 2 &&
      std::find(std::begin(kBySubcommand), std::end(kBySubcommand), words[0]) != std::end(kBySubcommand)) {
    if (std::find(std::begin(kReadSubcommands), std::end(kReadSubcommands), words[1]) == std::end(kReadSubcommands))
      return false;
    // ip names an object, then its verb: `ip route` and `ip route show` read, `ip route 10.0.0.0/8
    // via ...` (no verb, or another) asks for a change.
    static constexpr std::string_view kIpReads[] = {"show", "list", "lst", "get"};
    return words[0] != "ip" || words.size() == 2 || words[2][0] == '-' ||
           std::find(std::begin(kIpReads), std::end(kIpReads), words[2]) != std::end(kIpReads);
  }
  if (std::find(kReadOnlyVerbs.begin(), kReadOnlyVerbs.end(), words[0]) != kReadOnlyVerbs.end()) return true;
  // sed and awk print what they read unless told to edit the file in place (sed -i, -i.bak,
  // --in-place; awk -i inplace); a redirection writes.
  if (words[0] == "sed" || words[0] == "awk" || words[0] == "gawk") {
    const bool in_place = std::any_of(words.begin() + 1, words.end(), [](const std::string& w) {
      return w.rfind("-i", 0) == 0 || w.rfind("--in-place", 0) == 0 ||
             (w.size() > 1 && w[0] == '-' && w[1] != '-' && w.find('i') != std::string::npos);
    });
    return !in_place && std::string_view(cmd).find('>') == std::string_view::npos;
  }
  // A data file named as the program (a log's path): not executable, it runs nothing and fails.
  static constexpr std::string_view kDataFiles[] = {".log", ".conf", ".txt", ".json", ".yaml", ".yml", ".csv", ".md"};
  if (words[0].find('/') != std::string::npos && std::any_of(std::begin(kDataFiles), std::end(kDataFiles),
                                                             [&](std::string_view e) { return words[0].ends_with(e); }))
    return true;
  // mount alone (or -l, -t TYPE) lists what is mounted; with a device, a directory or -a it mounts.
  if (words[0] == "mount") {
    if (words.size() == 2) return words[1] == "-l";
    return words.size() == 1 || (words.size() == 3 && words[1] == "-t");
  }
  // A program named like a read-only tool (show_lan_capability, get-status).
  std::string program = words[0];
  std::replace(program.begin(), program.end(), '-', '_');
  return std::any_of(kReadOnlyTools.begin(), kReadOnlyTools.end(),
                     [&](std::string_view p) { return program.size() > p.size() && program.rfind(p, 0) == 0; });
}

// Whether a command string only inspects: every command of it, split at `|`, `&&`, `||` and `;`
// outside quotes, does (`ls /mnt; mount /dev/sdb1 /mnt` mounts).
bool ReadOnlyCommand(std::string_view cmd) {
  std::vector<std::string> segments(1);
  char quote = 0;
  for (size_t i = 0; i < cmd.size(); ++i) {
    const char c = cmd[i];
    if (quote) {
      quote = c == quote ? 0 : quote;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '|' || c == ';' || (c == '&' && i + 1 < cmd.size() && cmd[i + 1] == '&')) {
      i += (i + 1 < cmd.size() && cmd[i + 1] == c) ? 1 : 0;  // && and ||
      segments.emplace_back();
      continue;
    }
    segments.back() += c;
  }
  return std::all_of(segments.begin(), segments.end(), [](const std::string& seg) { return ReadOnlySegment(seg); });
}

}  // namespace

template <>
struct Names<Grade> {
  static constexpr std::pair<Grade, const char*> v[] = {{Grade::kNone, "none"},
                                                        {Grade::kEquivalentCall, "equivalent_call"},
                                                        {Grade::kHarmlessCall, "harmless_call"},
                                                        {Grade::kInventedFact, "invented_fact"},
                                                        {Grade::kWrongCommand, "wrong_command"},
                                                        {Grade::kLiteralMutated, "literal_mutated"},
                                                        {Grade::kInvalidToolCall, "invalid_tool_call"},
                                                        {Grade::kRunaway, "runaway"}};
};

const char* GradeName(Grade g) { return NameOf(g).data(); }

// Failures and grades are listed in the same order, the grades with equivalent_call before the
// first failure: a failure's grade is the next one up.
static_assert(int(Grade::kHarmlessCall) == int(Failure::kHarmlessCall) + 1 &&
              int(Grade::kRunaway) == int(Failure::kRunaway) + 1);
Grade GradeOf(const SideJudgement& s) {
  if (s.failure == Failure::kNone) return s.equivalent_call ? Grade::kEquivalentCall : Grade::kNone;
  return Grade(int(s.failure) + 1);
}

bool EquivalentCalls(const nlohmann::json& call, const nlohmann::json& ref) {
  if (!call.is_object() || !ref.is_object() ||
      call.value("name", nlohmann::json()) != ref.value("name", nlohmann::json()))
    return false;
  return SameAfterNormalising(call.value("arguments", nlohmann::json::object()),
                              ref.value("arguments", nlohmann::json::object()));
}

bool IsReadOnlyCall(const nlohmann::json& call) {
  if (!call.is_object() || !call.contains("name") || !call["name"].is_string()) return false;
  const std::string name = Lower(call["name"].get<std::string>());
  for (std::string_view p : kReadOnlyTools)
    if (name.rfind(p, 0) == 0) return true;
  if (RunsTestsByName(name)) return true;
  // A command-running tool: every string argument that is a command must only inspect.
  bool any_command = false;
  const nlohmann::json args = call.value("arguments", nlohmann::json::object());
  for (auto& [k, v] : args.items()) {
    if (!v.is_string() || (k != "command" && k != "cmd" && k != "query" && k != "sql")) continue;
    any_command = true;
    const bool sql = k == "query" || k == "sql";
    if (!(sql ? ReadOnlySql(v.get<std::string>()) : ReadOnlyCommand(v.get<std::string>()))) return false;
  }
  return any_command;
}

}  // namespace flipscope
