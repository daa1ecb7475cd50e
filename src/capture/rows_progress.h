// capture/rows_progress.h: how a capture's rows report their progress (inside the capture stage;
// capture_run.cpp's WriteRows uses it). A token count alone says too little where a capture is slow
// for another reason: served replay's decode steps, the exact engine's layers, the forks decoded
// while capturing.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "util/util.h"

namespace flipscope {

// One capture's rows as a stage of its log (util's Progress: a bar on a terminal, a line at the
// start when piped and one at the end): labelled "prefill", "served replay" or "exact (FP64)", its
// note the decode step or layer reached and the forks decoded so far.
class RowsProgress {
 public:
  // written: served replay's per-token flags (empty otherwise); n_layer > 0: the exact engine,
  // whose token counts are token-equivalents of its layers (ExactEngine::Prefill).
  RowsProgress(const Log& log, int64_t n_tokens, std::span<const uint8_t> written, int n_layer);
  // The tokens done, as the engine reports them.
  void Tokens(int64_t done);
  // One more future decoded while capturing, in `seconds`.
  void Forked(double seconds);
  // Ends the stage: ok: every token done; decode_s: served replay's decode steps' own seconds.
  void Finish(bool ok, std::optional<double> decode_s);
  // The served decode steps planned (positions fed alone).
  int64_t DecodeSteps() const { return steps_before_.empty() ? 0 : steps_before_.back(); }

 private:
  std::string Note() const;

  Progress bar_;
  int64_t n_ = 0, done_ = 0, forks_ = 0;
  double fork_s_ = 0;
  int n_layer_ = 0;
  std::vector<int64_t> steps_before_;  // served: decode steps among positions < p, for p in [0, n]
  std::string end_;                    // what the end line adds (served: the decode steps' rate)
};

}  // namespace flipscope
