// fuzz: what the libFuzzer targets in this folder share. Each target feeds one parser of outside
// data; docs/reliability.md lists them, their seed corpora and what they found.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "util/status.h"

namespace flipscope::fuzz {

// Writes the input to a per-process file ending in suffix and returns its path: the parsers under
// test open files (and map them), exactly as they do for users. /dev/shm keeps it off the disk.
inline std::string InputFile(const uint8_t* data, size_t size, const std::string& suffix) {
  static const std::string dir = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
  const std::string path = dir + "/flipscope-fuzz-" + std::to_string(::getpid()) + suffix;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), std::streamsize(size));
  return path;
}

// The CLI's error contract: one line that starts with the file's name. A parser that breaks it
// aborts the run, so the fuzzer reports it like a crash.
inline void ExpectOneLineError(const Status& s, const std::string& path) {
  if (s.ok()) return;
  const std::string& m = s.message();
  if (m.rfind(path, 0) != 0 || m.find('\n') != std::string::npos) {
    std::fprintf(stderr, "error does not name %s on one line: %s\n", path.c_str(), m.c_str());
    std::abort();
  }
}

// Reads the first and last byte of every tensor a checkpoint lists: each must lie inside the
// mapping (ASan reports it otherwise).
template <typename Checkpoint>
void TouchEveryTensor(const Checkpoint& ckpt) {
  volatile uint8_t sink = 0;
  for (const auto& t : ckpt.tensors)
    if (t.bytes > 0) sink = sink ^ ckpt.Data(t)[0] ^ ckpt.Data(t)[t.bytes - 1];
}

}  // namespace flipscope::fuzz
