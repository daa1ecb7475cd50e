// Capture workers: one flipscope per llama-cpp-python release, built by scripts/build-worker.sh
// and run as a child process (a process links one llama.cpp, so each release runs in its own).
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
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
  const std::string build = LlamaSource().value("build", "");
  return std::regex_search(build, m, mode) ? m[1].str() : "native";
}

namespace {
// This binary's own worker (flipscope-worker beside it) when release and cpu are those it was
// built with; "" otherwise.
std::string OwnWorker(const Release& release, const std::string& cpu) {
  if (LlamaSource().value("release", "") != "llama-cpp-python " + release.ToString() || cpu != MainBuildCpu())
    return "";
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  fs::path w = exe.parent_path() / "flipscope-worker";
  return fs::is_regular_file(w, ec) ? w.string() : "";
}
}  // namespace

Result<Worker> PrepareWorker(const Release& release, const WorkerOptions& options) {
  const std::string cpu = options.cpu.empty() ? MainBuildCpu() : options.cpu;
  if (std::string own = OwnWorker(release, cpu); !own.empty()) {
    options.log.Info(fmt::format("llama-cpp-python {}: this build's own worker {}", release.ToString(), own));
    return Worker{release, own, "", 0};
  }
  const std::string script = (fs::path(options.tree) / "scripts" / "build-worker.sh").string();
  if (!fs::is_regular_file(script))
    return Status::Error(script + ": not found (the flipscope source tree that workers are built from)");
  const std::string err_path = (fs::temp_directory_path() / fmt::format("flipscope-worker-{}.err", ::getpid())).string();
  const std::string cmd = fmt::format("FLIPSCOPE_LLAMA_CPU={} bash {} {} {} 2>{}", ShellQuote(cpu),
                                      ShellQuote(script), release.ToString(), ShellQuote(options.tree),
                                      ShellQuote(err_path));
  options.log.Info(fmt::format("llama-cpp-python {}: preparing its capture worker", release.ToString()));
  double t0 = NowSeconds();
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return Status::Error("cannot run " + script);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
  int status = ::pclose(pipe);
  auto err_text = ReadFile(err_path);
  std::string err = err_text.ok() ? *err_text : "";
  std::error_code ec;
  fs::remove(err_path, ec);
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::string line = LastLine(err);
  if (line.rfind("[setup] error: ", 0) == 0) line = line.substr(15);
  if (code == 3)  // the tree does not compile against this release's llama.cpp
    return Status::Refused(fmt::format("{} (supported: {} to {})", line, OldestSupported().ToString(),
                                       NewestSupported().ToString()));
  if (code != 0)
    return Status::Error(fmt::format("llama-cpp-python {}: building its worker failed: {}", release.ToString(),
                                     line.empty() ? "exit " + std::to_string(code) : line));
  Worker w;
  w.release = release;
  w.binary = LastLine(out);
  w.build_log = (fs::path(w.binary).parent_path().parent_path() / "build.log").string();
  w.build_seconds = err.find("building the capture worker") != std::string::npos ? NowSeconds() - t0 : 0;
  if (!fs::is_regular_file(w.binary))
    return Status::Error(fmt::format("llama-cpp-python {}: {} printed no worker binary", release.ToString(), script));
  return w;
}

}  // namespace flipscope
