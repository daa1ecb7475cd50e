// runtime: the process-wide llama.cpp state every stage shares — backend initialisation, the log
// routed to a buffer (shown only with --verbose, kept for error messages), and token text. The
// engine, workload and checkpoint stages depend on this, not on each other.
#pragma once

#include <cstdint>
#include <string>

struct llama_vocab;

namespace flipscope {

// Routes llama.cpp's log to a buffer (kept for error messages) and shows it only when verbose;
// initialises the backends once per process.
void InitLlamaLogging(bool verbose);
// Initialises the backends and routes the log once, keeping the verbosity already chosen.
void EnsureLlamaInit();
// The last error/warning lines llama.cpp logged (for error messages), then clears them.
std::string TakeLlamaLogTail();
// Every line logged since the previous call (at most the last 512 KiB), then clears it: what a
// caller reads facts from that llama.cpp reports only in its log.
std::string TakeLlamaLogAll();
// Version string of the linked llama.cpp ("b<number>-<commit>") and ggml's version.
std::string LlamaVersion();
std::string GgmlVersion();
// The text of one token, special tokens rendered, however long the piece is.
std::string TokenPiece(const llama_vocab* vocab, int32_t token);

}  // namespace flipscope
