// A llama.cpp git checkout as a source of versions: resolving commits, checking them out into the
// cache (git worktree add --detach) and reading what a commit changed.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "history/history.h"
#include "history/internal.h"

namespace flipscope {

namespace fs = std::filesystem;

namespace history {

Result<GitOutput> RunGit(const std::string& repo, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"git", "-C", repo};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargs;
  for (auto& a : argv) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return Status::Error("git: cannot make a pipe");
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]), ::close(out_pipe[1]);
    return Status::Error("git: cannot make a pipe");
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    return Status::Error("git: cannot start (fork failed)");
  }
  if (pid == 0) {
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::execvp("git", cargs.data());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  GitOutput r;
  // git writes little on stderr; reading stdout to its end first cannot block on a full stderr
  // pipe for the commands used here (a few lines of error at most).
  char buf[8192];
  for (ssize_t n; (n = ::read(out_pipe[0], buf, sizeof buf)) != 0;)
    if (n > 0)
      r.out.append(buf, size_t(n));
    else if (errno != EINTR)
      break;
  for (ssize_t n; (n = ::read(err_pipe[0], buf, sizeof buf)) != 0;)
    if (n > 0)
      r.err.append(buf, size_t(n));
    else if (errno != EINTR)
      break;
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return Status::Error("git: lost the child process");
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (r.code == 127 && r.out.empty()) return Status::Error("git: not found on PATH");
  return r;
}

}  // namespace history

std::vector<std::string> ParseChangedFiles(std::string_view text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    size_t j = text.find('\n', i);
    if (j == std::string_view::npos) j = text.size();
    std::string_view line = text.substr(i, j - i);
    while (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty()) out.emplace_back(line);
    i = j + 1;
  }
  return out;
}

Result<std::string> ResolveCommit(const std::string& repo, const std::string& rev) {
  FS_ASSIGN_OR_RETURN(auto top, history::RunGit(repo, {"rev-parse", "--show-toplevel"}));
  if (top.code != 0) return Status::InvalidArgument(fmt::format("{} {}: not a git checkout", OptionName("llama_src"), repo));
  // A revision that begins with a dash would be read as one of git's options.
  if (rev.empty() || rev[0] == '-') return Status::InvalidArgument(fmt::format("{}: no commit '{}'", repo, rev));
  FS_ASSIGN_OR_RETURN(
      auto r, history::RunGit(repo, {"rev-parse", "--verify", "--quiet", "--end-of-options", rev + "^{commit}"}));
  std::string sha = r.out.substr(0, r.out.find('\n'));
  if (r.code != 0 || sha.empty()) return Status::InvalidArgument(fmt::format("{}: no commit '{}'", repo, rev));
  return sha;
}

Result<bool> IsAncestor(const std::string& repo, const std::string& a, const std::string& b) {
  FS_ASSIGN_OR_RETURN(auto r, history::RunGit(repo, {"merge-base", "--is-ancestor", a, b}));
  if (r.code > 1) return Status::Error(fmt::format("git merge-base --is-ancestor in {}: {}", repo, r.err));
  return r.code == 0;
}

std::string CommitCacheDir(const std::string& repo) {
  const char* env = std::getenv("FLIPSCOPE_CACHE");
  const char* home = std::getenv("HOME");
  fs::path cache = env && *env ? fs::path(env) : fs::path(home ? home : "/tmp") / ".cache" / "flipscope";
  std::error_code ec;
  fs::path abs = fs::weakly_canonical(repo, ec);
  return (cache / "commits" / Sha256Hex(abs.string()).substr(0, 12)).string();
}

Result<std::string> CheckoutCommit(const std::string& repo, const std::string& sha) {
  const fs::path tree = fs::path(CommitCacheDir(repo)) / sha / "tree";
  std::error_code ec;
  if (fs::exists(tree / ".git", ec)) {
    FS_ASSIGN_OR_RETURN(auto head, history::RunGit(tree.string(), {"rev-parse", "HEAD"}));
    if (head.code == 0 && head.out.substr(0, head.out.find('\n')) == sha) return tree.string();
    return Status::Error(fmt::format("{}: holds another commit than {}; remove it (git worktree prune)", tree.string(),
                                     sha.substr(0, 12)));
  }
  fs::create_directories(tree.parent_path(), ec);
  // A worktree folder removed by hand is still registered; prune forgets it so it can be added again.
  (void)history::RunGit(repo, {"worktree", "prune"});
  FS_ASSIGN_OR_RETURN(auto r, history::RunGit(repo, {"worktree", "add", "--detach", "--force", tree.string(), sha}));
  if (r.code != 0)
    return Status::Error(
        fmt::format("git worktree add {} {}: {}", tree.string(), sha.substr(0, 12), r.err.substr(0, r.err.find('\n'))));
  return tree.string();
}

}  // namespace flipscope
