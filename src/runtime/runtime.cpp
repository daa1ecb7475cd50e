// The process-wide llama.cpp state: backends, the routed log, token text.
#include "runtime/runtime.h"

#include <fmt/format.h>
#include <ggml-backend.h>
#include <llama.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <mutex>

// Defined in llama.cpp's common library (build-info.cpp), set from the build's commit.
extern int LLAMA_BUILD_NUMBER;
extern char const* LLAMA_COMMIT;

namespace flipscope {
namespace {

std::mutex g_log_mu;
std::deque<std::string> g_log_tail;
std::string g_log_all;  // every line since the last TakeLlamaLogAll()
bool g_log_verbose = false;

void LogCallback(ggml_log_level level, const char* text, void*) {
  std::lock_guard<std::mutex> lock(g_log_mu);
  if (g_log_verbose) fputs(text, stderr);
  g_log_all += text;
  if (g_log_all.size() > (1u << 20)) g_log_all.erase(0, g_log_all.size() - (1u << 19));
  if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN) {
    std::string line(text);
    while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
    if (line.empty()) return;
    g_log_tail.push_back(line);
    if (g_log_tail.size() > 4) g_log_tail.pop_front();
  }
}

}  // namespace

void InitLlamaLogging(bool verbose) {
  g_log_verbose = verbose;
  llama_log_set(LogCallback, nullptr);
  static std::once_flag once;
  std::call_once(once, [] {
    llama_backend_init();
    ggml_backend_load_all();
  });
}

void EnsureLlamaInit() { InitLlamaLogging(g_log_verbose); }

std::string TakeLlamaLogTail() {
  std::lock_guard<std::mutex> lock(g_log_mu);
  std::string s;
  for (auto& l : g_log_tail) s += (s.empty() ? "" : "; ") + l;
  g_log_tail.clear();
  return s;
}

std::string TakeLlamaLogAll() {
  std::lock_guard<std::mutex> lock(g_log_mu);
  std::string s;
  s.swap(g_log_all);
  return s;
}

std::string LlamaVersion() { return fmt::format("b{}-{}", LLAMA_BUILD_NUMBER, LLAMA_COMMIT); }

std::string GgmlVersion() { return fmt::format("{} ({})", ggml_version(), ggml_commit()); }

std::string TokenPiece(const llama_vocab* vocab, int32_t token) {
  std::string buf(64, '\0');
  int32_t n = llama_token_to_piece(vocab, token, buf.data(), int32_t(buf.size()), 0, true);
  if (n < 0) {  // the piece is longer than the buffer: -n is its length
    buf.resize(size_t(-n));
    n = llama_token_to_piece(vocab, token, buf.data(), int32_t(buf.size()), 0, true);
  }
  buf.resize(size_t(std::max(n, 0)));
  return buf;
}

}  // namespace flipscope
