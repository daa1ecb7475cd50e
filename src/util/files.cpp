// Whole-file reads and atomic writes (temporary name, fsync, rename).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/util.h"

namespace flipscope {
namespace {
std::string Errno(const std::string& path, const char* what) {
  return path + ": " + what + ": " + std::strerror(errno);
}

// Removes PATH.tmp.<pid> files whose writer no longer runs on this machine (killed, or out of
// power): a re-run of an interrupted multi-gigabyte capture must not leave its space taken. A
// writer that is still running keeps its file (kill(pid, 0) succeeds or says EPERM).
void RemoveStaleTemps(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  const std::string prefix = p.filename().string() + ".tmp.";
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string pid = name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : "";
    if (pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (::kill(pid_t(std::stol(pid)), 0) != 0 && errno == ESRCH) {
      std::error_code rm;
      fs::remove(it->path(), rm);
    }
  }
}
}  // namespace

Result<std::string> ReadFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return Status::Io(path + ": is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Io(Errno(path, "cannot open"));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::Io(path + ": read error");
  return ss.str();
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

Status CheckFolderOf(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) return Status::Ok();
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return Status::Ok();
  if (fs::exists(dir, ec)) return Status::Io(path + ": cannot create: " + dir.string() + " is not a folder");
  return Status::Io(path + ": cannot create: its folder " + dir.string() + " does not exist");
}

Status AtomicFile::Open(const std::string& path) {
  path_ = path;
  // The temporary name is this writer's own business: every error names the final path.
  FS_RETURN_IF_ERROR(CheckFolderOf(path));
  RemoveStaleTemps(path);
  tmp_ = path + ".tmp." + std::to_string(::getpid());
  fd_ = ::open(tmp_.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (fd_ < 0) return Status::Io(Errno(path_, "cannot create"));
  return Status::Ok();
}

Status AtomicFile::WriteAt(uint64_t offset, const void* data, size_t n) {
  auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::pwrite(fd_, p, n, off_t(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::Io(Errno(path_, "write failed"));
    }
    if (w == 0) return Status::Io(path_ + ": write failed: no space written");
    p += w;
    n -= size_t(w);
    offset += uint64_t(w);
  }
  return Status::Ok();
}

Status AtomicFile::Commit() {
  if (::fsync(fd_) != 0) return Status::Io(Errno(path_, "fsync failed"));
  if (::close(fd_) != 0) {
    fd_ = -1;
    ::unlink(tmp_.c_str());
    return Status::Io(Errno(path_, "close failed"));
  }
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    ::unlink(tmp_.c_str());
    return Status::Io(Errno(path_, "rename failed"));
  }
  std::string dir = std::filesystem::path(path_).parent_path().string();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

Status WriteFileAtomic(const std::string& path, std::string_view data) {
  AtomicFile f;
  FS_RETURN_IF_ERROR(f.Open(path));
  FS_RETURN_IF_ERROR(f.WriteAt(0, data.data(), data.size()));
  return f.Commit();
}

}  // namespace flipscope
