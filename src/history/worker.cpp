// Capture workers: one flipscope per llama-cpp-python release, built by scripts/build-worker.sh
// and run as a child process (a process links one llama.cpp, so each release runs in its own).
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "history/history.h"

namespace flipscope {

namespace fs = std::filesystem;

namespace {
// s in single quotes for sh, with embedded quotes escaped.
std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The last non-empty line of text (the script's one-line error), trimmed.
std::string LastLine(const std::string& text) {
  size_t end = text.find_last_not_of("\n\r ");
  if (end == std::string::npos) return "";
  size_t begin = text.rfind('\n', end);
  return text.substr(begin == std::string::npos ? 0 : begin + 1, end - (begin == std::string::npos ? 0 : begin + 1) + 1);
}
}  // namespace

Result<int> RunProcess(const std::vector<std::string>& argv, const std::string& log_path) {
  int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Io(log_path + ": cannot open for writing");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    return Status::Error(argv[0] + ": cannot start (fork failed)");
  }
  if (pid == 0) {
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return Status::Error(argv[0] + ": lost the child process");
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

std::string MainBuildCpu() {
  static const std::regex mode(R"(cpu=(\w+))");
  std::smatch m;
  const std::string build = LlamaSource().build;
  return std::regex_search(build, m, mode) ? m[1].str() : "native";
}

namespace {
// This binary's own worker (flipscope-worker beside it) when release and cpu are those it was
// built with; "" otherwise.
std::string OwnWorker(const Release& release, const std::string& cpu) {
  if (LlamaSource().release != "llama-cpp-python " + release.ToString() || cpu != MainBuildCpu()) return "";
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  fs::path w = exe.parent_path() / "flipscope-worker";
  return fs::is_regular_file(w, ec) ? w.string() : "";
}

// What a build script printed and how it ended.
struct ScriptRun {
  int code = -1;
  std::string out, err_line;  // stdout; the last line of stderr, "[setup] error: " taken off
  bool built = false;         // it built something (else the worker was already built)
};

// Runs `env bash script args...` and collects its stdout, exit code and last stderr line. A
// build takes minutes: each "[setup]" line it writes on stderr (a step begun) is said at once
// through log, as "WHO: line (N s)" with the seconds since the script started.
Result<ScriptRun> RunScript(const std::string& env, const std::string& script, const std::vector<std::string>& args,
                            const Log& log, const std::string& who) {
  const std::string out_path =
      (fs::temp_directory_path() / fmt::format("flipscope-worker-{}.out", ::getpid())).string();
  std::string cmd = env + " bash " + ShellQuote(script);
  for (const auto& a : args) cmd += " " + ShellQuote(a);
  cmd += " 2>&1 >" + ShellQuote(out_path);  // stderr into the pipe, stdout (the binary's path) into the file
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return Status::Error("cannot run " + script);
  ScriptRun r;
  std::string err_text;
  const double t0 = NowSeconds();
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), pipe)) {
    err_text += buf;
    const std::string line = LastLine(buf);
    if (line.rfind("[setup] ", 0) == 0 && line.rfind("[setup] error: ", 0) != 0)
      log.Info(fmt::format("{}: {} ({:.0f} s)", who, line.substr(8), NowSeconds() - t0));
  }
  int status = ::pclose(pipe);
  auto out = ReadFile(out_path);
  std::error_code ec;
  fs::remove(out_path, ec);
  r.out = out.ok() ? *out : "";
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err_line = LastLine(err_text);
  if (r.err_line.rfind("[setup] error: ", 0) == 0) r.err_line = r.err_line.substr(15);
  r.built = err_text.find("building the capture worker") != std::string::npos;
  return r;
}

// The build script of the workers, in the tree workers are built from.
Result<std::string> WorkerScript(const WorkerOptions& options) {
  const std::string script = (fs::path(options.tree) / "scripts" / "build-worker.sh").string();
  if (!fs::is_regular_file(script))
    return Status::Error(script + ": not found (the flipscope source tree that workers are built from)");
  return script;
}

// A number of seconds a build script left in a file; 0 when there is none.
double SecondsIn(const fs::path& path) {
  auto text = ReadFile(path.string());
  return text.ok() ? std::atof(text->c_str()) : 0;
}
}  // namespace

Result<Worker> PrepareWorker(const Release& release, const WorkerOptions& options) {
  const std::string cpu = options.cpu.empty() ? MainBuildCpu() : options.cpu;
  if (std::string own = OwnWorker(release, cpu); !own.empty()) {
    options.log.Info(fmt::format("llama-cpp-python {}: this build's own worker {}", release.ToString(), own));
    Worker w;
    w.release = release;
    w.binary = own;
    return w;
  }
  FS_ASSIGN_OR_RETURN(std::string script, WorkerScript(options));
  options.log.Info(fmt::format("llama-cpp-python {}: preparing its capture worker", release.ToString()));
  double t0 = NowSeconds();
  const std::string who = "llama-cpp-python " + release.ToString();
  FS_ASSIGN_OR_RETURN(ScriptRun run, RunScript("FLIPSCOPE_LLAMA_CPU=" + ShellQuote(cpu), script,
                                               {release.ToString(), options.tree}, options.log, who));
  const std::string& line = run.err_line;
  if (run.code == 3)  // the tree does not compile against this release's llama.cpp
    return Status::Refused(
        fmt::format("{} (supported: {} to {})", line, OldestSupported().ToString(), NewestSupported().ToString()));
  if (run.code != 0)
    return Status::Error(fmt::format("llama-cpp-python {}: building its worker failed: {}", release.ToString(),
                                     line.empty() ? "exit " + std::to_string(run.code) : line));
  Worker w;
  w.release = release;
  w.binary = LastLine(run.out);
  w.build_log = (fs::path(w.binary).parent_path().parent_path() / "build.log").string();
  w.build_seconds = run.built ? NowSeconds() - t0 : 0;
  if (!fs::is_regular_file(w.binary))
    return Status::Error(fmt::format("llama-cpp-python {}: {} printed no worker binary", release.ToString(), script));
  if (run.built) options.log.Info(fmt::format("{}: worker built in {:.0f} s", who, w.build_seconds));
  return w;
}

Result<Worker> PrepareCommitWorker(const std::string& repo, const std::string& sha, const WorkerOptions& options) {
  const std::string cpu = options.cpu.empty() ? MainBuildCpu() : options.cpu;
  FS_ASSIGN_OR_RETURN(std::string script, WorkerScript(options));
  FS_ASSIGN_OR_RETURN(std::string tree, CheckoutCommit(repo, sha));
  const fs::path dir = fs::path(tree).parent_path();
  // Every commit is built beside its worktree, under one base folder: ccache, told that base,
  // sees the same relative paths for every commit, so a file one commit did not change is a hit.
  // NOHASHDIR: the build folder's own name (the commit) stays out of the hash of debug builds.
  const std::string env = fmt::format(
      "FLIPSCOPE_LLAMA_CPU={} FLIPSCOPE_WORKER_DIR={} FLIPSCOPE_LLAMA_BUILD_DIR={} CCACHE_BASEDIR={} "
      "CCACHE_NOHASHDIR=1",
      ShellQuote(cpu), ShellQuote((dir / "worker").string()), ShellQuote((dir / "llama").string()),
      ShellQuote(CommitCacheDir(repo)));
  options.log.Info(fmt::format("llama.cpp {}: preparing its capture worker in {}", sha.substr(0, 12), dir.string()));
  double t0 = NowSeconds();
  const std::string who = "llama.cpp " + sha.substr(0, 12);
  FS_ASSIGN_OR_RETURN(ScriptRun run, RunScript(env, script, {tree, options.tree}, options.log, who));
  Worker w;
  w.commit = sha;
  w.build_log = (dir / "worker" / "build.log").string();
  w.build_seconds = run.built ? NowSeconds() - t0 : 0;
  w.llama_build_seconds = run.built ? SecondsIn(dir / "worker" / ".flipscope-llama-seconds") : 0;
  if (run.code == 3 || run.code == 4) {  // a build that fails: the caller decides (bisect skips it)
    w.error = run.err_line;
    return w;
  }
  if (run.code != 0)
    return Status::Error(fmt::format("llama.cpp {}: building its worker failed: {}", sha.substr(0, 12),
                                     run.err_line.empty() ? "exit " + std::to_string(run.code) : run.err_line));
  w.binary = LastLine(run.out);
  if (!fs::is_regular_file(w.binary))
    return Status::Error(fmt::format("llama.cpp {}: {} printed no worker binary", sha.substr(0, 12), script));
  if (run.built) options.log.Info(fmt::format("{}: worker built in {:.0f} s", who, w.build_seconds));
  return w;
}

}  // namespace flipscope
