// engine/server.h: a server flipscope starts for a configuration (ServerProcess) and a free port
// for it. Part of the engine stage (engine/engine.h is its interface).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "util/status.h"

namespace flipscope {

// How to start a server and know it is up (docs/engines.md, "Servers flipscope starts").
struct LaunchOptions {
  std::string command;                     // run as /bin/sh -c COMMAND in a process group of its own
  std::map<std::string, std::string> env;  // set on top of flipscope's environment
  std::string url;                         // base URL where it answers
  std::string health = "/health";          // GET path that answers 200 once the server is ready
  double startup_timeout_s = 600;          // the longest wait for the health check
  double stop_timeout_s = 10;              // after SIGTERM to the group, SIGKILL follows this late
  std::string log_path;                    // its stdout and stderr (appended)
};

// A running server started from LaunchOptions; destroying it stops it.
class ServerProcess {
 public:
  // Starts the command and waits until GET url+health answers 200. Errors say whether the
  // process ended first (how, and its log's last line) or the time-out passed (it is then stopped).
  static Result<std::unique_ptr<ServerProcess>> Start(const LaunchOptions& opts);
  ~ServerProcess();
  // Ok while the process runs; else an error saying how it ended and where its log is.
  Status Alive();
  // SIGTERM to the process group, SIGKILL after stop_timeout_s, then waits (at most 10 s more)
  // until no process of the group runs; idempotent.
  void Stop();
  int pid() const;
  // Seconds from the start to the first healthy answer.
  double startup_seconds() const;
  struct Impl;

 private:
  explicit ServerProcess(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A TCP port on 127.0.0.1 that was free a moment ago (for `{port}` in a launch command).
Result<int> FreePort();

}  // namespace flipscope
