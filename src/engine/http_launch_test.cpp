// ServerProcess against real processes: Python's http.server as the server (GET / answers 200),
// shell commands that exit, hang or ignore SIGTERM.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "engine/engine.h"
#include "util/util.h"

using namespace flipscope;
namespace fs = std::filesystem;

namespace {

// Options for `command` (where {port} is a free port) with health "/" and a log in a fresh folder.
LaunchOptions Options(const std::string& name, const std::string& command) {
  fs::path dir = fs::temp_directory_path() / ("flipscope-launch-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto port = FreePort();
  EXPECT_TRUE(port.ok());
  LaunchOptions o;
  o.command = command;
  for (size_t at = o.command.find("{port}"); at != std::string::npos; at = o.command.find("{port}"))
    o.command.replace(at, 6, std::to_string(*port));
  o.url = fmt::format("http://127.0.0.1:{}", *port);
  o.health = "/";
  o.startup_timeout_s = 20;
  o.log_path = (dir / "server.log").string();
  return o;
}

// Whether any process of group pgid still runs: /proc/*/stat with that process group, not a
// zombie (an orphaned child that ended waits for init to reap it, and kill(-pgid, 0) counts it).
bool GroupAlive(int pgid) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');  // the command name may hold spaces and parentheses
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0, pgrp = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %d %d", &state, &ppid, &pgrp) == 3 && pgrp == pgid && state != 'Z')
      return true;
  }
  return false;
}

}  // namespace

TEST(ServerProcess, StartsWaitsForHealthAndStopsTheWholeGroup) {
  // The shell stays the group leader and the server is its child: stopping must reach both.
  LaunchOptions o = Options("ok", "echo \"FOO=$FOO\"; python3 -m http.server {port} --bind 127.0.0.1; true");
  o.env["FOO"] = "bar";
  auto s = ServerProcess::Start(o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const int pid = (*s)->pid();
  EXPECT_TRUE((*s)->Alive().ok());
  EXPECT_TRUE(GroupAlive(pid));
  (*s)->Stop();
  EXPECT_FALSE(GroupAlive(pid));
  auto log = ReadFile(o.log_path);
  ASSERT_TRUE(log.ok());
  EXPECT_NE(log->find("FOO=bar"), std::string::npos) << *log;  // env reached the command, output the log
  EXPECT_NE(log->find(o.command), std::string::npos);          // the banner names the command
}

TEST(ServerProcess, ACommandThatExitsSaysHowAndShowsItsLastLine) {
  LaunchOptions o = Options("exit", "echo 'error: unknown flag --kv-cache-dtyp' >&2; exit 3");
  auto s = ServerProcess::Start(o);
  ASSERT_FALSE(s.ok());
  const std::string m = s.status().message();
  EXPECT_NE(m.find("before answering " + o.url + "/: the server (pid "), std::string::npos) << m;
  EXPECT_NE(m.find("exited with status 3"), std::string::npos) << m;
  EXPECT_NE(m.find("error: unknown flag --kv-cache-dtyp"), std::string::npos) << m;
  EXPECT_NE(m.find(o.log_path), std::string::npos) << m;
}

TEST(ServerProcess, NoHealthyAnswerInTimeIsAnErrorAndTheProcessIsStopped) {
  LaunchOptions o = Options("hang", "echo started; exec sleep 30");
  o.startup_timeout_s = 0.5;
  const double t0 = NowSeconds();
  auto s = ServerProcess::Start(o);
  ASSERT_FALSE(s.ok());
  EXPECT_LT(NowSeconds() - t0, 10);
  EXPECT_NE(s.status().message().find("did not answer " + o.url + "/ within 0.5 s"), std::string::npos)
      << s.status().message();
  // The command ran (its output is in the log) and was stopped at the time-out.
  auto log = ReadFile(o.log_path);
  ASSERT_TRUE(log.ok());
  EXPECT_NE(log->find("started"), std::string::npos);
}

TEST(ServerProcess, ASigtermIgnoringServerIsKilledAfterTheStopTimeout) {
  LaunchOptions o = Options("term", "trap '' TERM; exec python3 -m http.server {port} --bind 127.0.0.1");
  o.stop_timeout_s = 0.5;
  auto s = ServerProcess::Start(o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const int pid = (*s)->pid();
  const double t0 = NowSeconds();
  (*s)->Stop();
  EXPECT_GE(NowSeconds() - t0, 0.5);  // it waited for SIGTERM to work, then killed
  EXPECT_FALSE(GroupAlive(pid));
}

TEST(ServerProcess, ADeathIsReportedWithTheSignal) {
  LaunchOptions o = Options("death", "exec python3 -m http.server {port} --bind 127.0.0.1");
  auto s = ServerProcess::Start(o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  kill((*s)->pid(), SIGKILL);
  for (int i = 0; i < 100 && (*s)->Alive().ok(); ++i) usleep(20000);
  const Status alive = (*s)->Alive();
  ASSERT_FALSE(alive.ok());
  EXPECT_NE(alive.message().find("was killed by signal 9"), std::string::npos) << alive.message();
}
