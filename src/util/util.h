// util: hashing, atomic files, progress, formatting shared by every stage.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace flipscope {

// Incremental SHA-256 (FIPS 180-4), through OpenSSL's libcrypto, which picks the CPU's SHA
// extensions or vector code at run time (models are hashed at every capture: GBs of them).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(const void* data, size_t n);
  // Finishes and returns the lowercase hex digest; the object must not be updated afterwards.
  std::string HexDigest();

 private:
  void* ctx_;  // EVP_MD_CTX, kept out of this header
};

// SHA-256 hex of a string.
std::string Sha256Hex(std::string_view data);
// SHA-256 hex of a whole file, streamed; error names the file.
Result<std::string> Sha256File(const std::string& path);
// 64-bit xxHash (XXH3) of a byte range: the per-row digest of captures.
uint64_t Digest64(const void* data, size_t n);

// Reads a whole file; error names the file.
Result<std::string> ReadFile(const std::string& path);
// Ok when the folder path is to be written in exists (or path has none); else an error naming
// path: "PATH: cannot create: its folder DIR does not exist" (or "DIR is not a folder").
Status CheckFolderOf(const std::string& path);
// Writes a whole file atomically (temporary file in the same folder, fsync, rename); errors name
// path, never the temporary name.
Status WriteFileAtomic(const std::string& path, std::string_view data);

// A file written under a temporary name and renamed into place only by Commit(); destroyed
// uncommitted, the temporary file is removed, so a final name never holds a partial file.
class AtomicFile {
 public:
  AtomicFile() = default;
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  // Creates PATH.tmp.<pid> (first removing PATH.tmp.* of processes that no longer run); errors
  // name PATH (CheckFolderOf's when its folder is missing), never the temporary name.
  Status Open(const std::string& path);
  // Positional write of n bytes at offset; error on short writes (e.g. a full disk).
  Status WriteAt(uint64_t offset, const void* data, size_t n);
  // fsyncs, renames over the final path and fsyncs the folder.
  Status Commit();
  const std::string& temp_path() const { return tmp_; }

 private:
  int fd_ = -1;
  std::string path_, tmp_;
};

// Writes one status line to stderr (the default Log's line sink).
void StderrLine(std::string_view line);

// Where a library call reports what it is doing, passed in the call's options (as LevelDB's
// info_log): its status lines ("capturing q8 (repeat 1 of 2)") and whether it draws progress
// bars. The default writes lines to stderr and draws bars on a terminal only; Quiet() says nothing.
struct Log {
  std::function<void(std::string_view)> line = StderrLine;  // null: lines are dropped
  bool bars = true;
  // Reports one status line.
  void Info(std::string_view text) const {
    if (line) line(text);
  }
  static Log Quiet() { return {nullptr, false}; }
};

// A progress bar on stderr with items/s and ETA; drawn only when stderr is a terminal (and
// FLIPSCOPE_NO_PROGRESS is unset). Made with a Log it is also one stage of that log, so that a
// piped run is not silent: a line when it starts (only when no bar is drawn, which says it
// already) and a line when it ends, "LABEL: 4096 tok in 12.3 s (333 tok/s)" with its note.
class Progress {
 public:
  Progress(std::string label, uint64_t total, std::string unit = "tok");
  // A stage of log: its bar only when log.bars, its start and end lines through log.line.
  Progress(const Log& log, std::string label, uint64_t total, std::string unit = "tok");
  ~Progress();
  // Sets the amount done; redraws at most 10 times a second.
  void Update(uint64_t done);
  // Text shown after the bar and at the end of the end line (e.g. "3 forks decoded in 4.1 s");
  // drawn with the next Update.
  void Note(std::string note);
  // Clears the bar and, with a log, writes the end line (once); a stage that ended before its
  // total says where it stopped.
  void Finish();
  // Seconds since the stage started.
  double Seconds() const;
  // The end line as Finish writes it (label, amount, seconds, rate, note).
  std::string EndLine() const;

 private:
  Log log_;
  bool logged_ = false;  // made with a log: start and end lines
  std::string label_, unit_, note_;
  uint64_t total_, done_ = 0;
  bool enabled_, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

// A rate for a terminal line: "333" at 100 and above, else one decimal ("2.1").
std::string RateText(double per_second);

// Seconds since an arbitrary epoch, monotonic.
double NowSeconds();
// "1.5 MiB" style byte count.
std::string HumanBytes(double bytes);
// Parses "8GiB", "512MiB", "1.5G", "1000000"; error on anything else.
Result<uint64_t> ParseBytes(std::string_view text);
// Escapes text for HTML element content and attribute values.
std::string HtmlEscape(std::string_view text);
// A token's text with whitespace and control characters made visible, for every page and terminal
// line that prints a token: space "␠", newline "↵", tab "⇥", carriage return "␍", any other
// control character (and DEL) as "\xNN"; other bytes (UTF-8 included) unchanged.
std::string VisibleToken(std::string_view text);
// The current UTC time as ISO 8601.
std::string UtcNowIso();

}  // namespace flipscope
