// ServerProcess: a server flipscope starts for a configuration (`launch = "vllm serve ..."`),
// waits for, and stops. The command runs under /bin/sh in a process group of its own, so that
// stopping it reaches every process it started (vLLM's engine cores, tensor-parallel workers).
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

extern char** environ;

#include <fmt/format.h>

#include "engine/http_internal.h"
#include "util/util.h"

namespace flipscope {

Result<int> FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Status::Error("cannot open a socket to find a free port");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  close(fd);
  if (!ok) return Status::Error("cannot find a free port on 127.0.0.1");
  return int(ntohs(a.sin_port));
}

namespace {

// The last non-empty line of a log file (at most 200 characters), for messages.
std::string LastLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  if (last.size() > 200) last = "..." + last.substr(last.size() - 197);
  return last;
}

// "exited with status 1" / "was killed by signal 9".
std::string HowItEnded(int wstatus) {
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) > 128)
    return fmt::format("exited with status {} (its shell's report of signal {})", WEXITSTATUS(wstatus),
                       WEXITSTATUS(wstatus) - 128);
  if (WIFEXITED(wstatus)) return fmt::format("exited with status {}", WEXITSTATUS(wstatus));
  if (WIFSIGNALED(wstatus)) return fmt::format("was killed by signal {}", WTERMSIG(wstatus));
  return "ended";
}

// flipscope's environment with o.env on top, as "KEY=value" strings (made before fork: the child
// of a threaded process may only make async-signal-safe calls).
std::vector<std::string> ServerEnvironment(const LaunchOptions& o) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    if (!o.env.count(kv.substr(0, kv.find('=')))) out.push_back(kv);
  }
  for (const auto& [k, v] : o.env) out.push_back(k + "=" + v);
  return out;
}

// The shell's script: a plain command (no ; & | < > ( ) ` or newline) is exec'd, so that the
// server itself is the process flipscope watches and the one SIGTERM'd if flipscope dies.
std::string Script(const std::string& command) {
  const bool plain = command.find_first_of(";&|<>()`\n") == std::string::npos && command.rfind("exec ", 0) != 0;
  return plain ? "exec " + command : command;
}

// In the child: own process group, the log as stdout and stderr, then the shell.
[[noreturn]] void ExecServer(const char* command, char* const* envp, int log_fd) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGTERM);  // flipscope killed outright: the server does not outlive it
  int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0) dup2(null_fd, 0);
  dup2(log_fd, 1);
  dup2(log_fd, 2);
  const char* argv[] = {"sh", "-c", command, nullptr};
  execve("/bin/sh", const_cast<char* const*>(argv), envp);
  _exit(127);
}

}  // namespace

struct ServerProcess::Impl {
  LaunchOptions opts;
  pid_t pid = -1;
  int wstatus = 0;
  bool ended = false;
  double startup_s = 0;
};

ServerProcess::ServerProcess(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ServerProcess::~ServerProcess() { Stop(); }
int ServerProcess::pid() const { return impl_->pid; }
double ServerProcess::startup_seconds() const { return impl_->startup_s; }

Status ServerProcess::Alive() {
  Impl& s = *impl_;
  if (!s.ended && s.pid > 0 && waitpid(s.pid, &s.wstatus, WNOHANG) == s.pid) s.ended = true;
  if (!s.ended) return Status::Ok();
  std::string last = LastLine(s.opts.log_path);
  return Status::Error(fmt::format("the server (pid {}) {}; its log: {}{}", s.pid, HowItEnded(s.wstatus),
                                   s.opts.log_path, last.empty() ? "" : " (last line: " + last + ")"));
}

namespace {

// Whether a process of group pgid still runs (a zombie does not: an orphaned worker that ended
// waits for init to reap it, holding no memory). Reads /proc/<pid>/stat.
bool GroupRuns(pid_t pgid) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');  // the command name may hold spaces and parentheses
    char state = 0;
    int ppid = 0, pgrp = 0;
    if (close != std::string::npos && std::sscanf(stat.c_str() + close + 1, " %c %d %d", &state, &ppid, &pgrp) == 3 &&
        pgrp == pgid && state != 'Z')
      return true;
  }
  return false;
}

// Reaps the leader when it has ended and waits until no process of its group runs, or the deadline.
bool WaitGroup(pid_t pgid, int* wstatus, bool* ended, double deadline) {
  while (true) {
    if (!*ended && waitpid(pgid, wstatus, WNOHANG) == pgid) *ended = true;
    if (*ended && !GroupRuns(pgid)) return true;
    if (NowSeconds() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

void ServerProcess::Stop() {
  Impl& s = *impl_;
  if (s.pid <= 0) return;
  // The whole group (a server's workers hold GPU memory the next server needs): SIGTERM, time to
  // shut down, then SIGKILL for whatever is left, and a wait until nothing of it runs.
  kill(-s.pid, SIGTERM);
  if (!WaitGroup(s.pid, &s.wstatus, &s.ended, NowSeconds() + s.opts.stop_timeout_s)) {
    kill(-s.pid, SIGKILL);
    WaitGroup(s.pid, &s.wstatus, &s.ended, NowSeconds() + 10);
  }
  s.pid = -1;
}

Result<std::unique_ptr<ServerProcess>> ServerProcess::Start(const LaunchOptions& o) {
  if (o.command.empty()) return Status::InvalidArgument("launch: the command is empty");
  if (o.health.empty() || o.health[0] != '/') return Status::InvalidArgument("health must be a path such as /health");
  int log_fd = open(o.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return Status::Io(o.log_path + ": cannot open the server log");
  const std::string banner = fmt::format("\n==== flipscope {}: {}\n", UtcNowIso(), o.command);
  if (write(log_fd, banner.data(), banner.size()) < 0) { /* the log is best effort */
  }
  auto impl = std::make_unique<Impl>();
  impl->opts = o;
  std::vector<std::string> env = ServerEnvironment(o);
  const std::string script = Script(o.command);
  std::vector<char*> envp;
  for (auto& kv : env) envp.push_back(kv.data());
  envp.push_back(nullptr);
  const double t0 = NowSeconds();
  pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return Status::Error("launch: fork failed");
  }
  if (pid == 0) ExecServer(script.c_str(), envp.data(), log_fd);
  close(log_fd);
  setpgid(pid, pid);  // also here: the group exists before either side goes on
  impl->pid = pid;
  std::unique_ptr<ServerProcess> server(new ServerProcess(std::move(impl)));

  // Poll the health path until it answers 200, the process ends, or the time-out passes.
  HttpOptions probe;
  probe.url = o.url;
  probe.timeout_s = 2;
  probe.retries = 0;
  http::Client client(probe, "");
  while (true) {
    if (Status alive = server->Alive(); !alive.ok())
      return alive.Prefixed("before answering " + client.Where(o.health));
    auto r = client.Get(o.health);
    if (r.ok() && r->status == 200) break;
    if (NowSeconds() - t0 > o.startup_timeout_s) {
      server->Stop();
      return Status::Error(fmt::format("the server did not answer {} within {} s (startup_timeout); its log: {}",
                                       client.Where(o.health), o.startup_timeout_s, o.log_path));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  server->impl_->startup_s = NowSeconds() - t0;
  return server;
}

}  // namespace flipscope
