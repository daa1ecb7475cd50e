// engine/load.h: the load, other sequences sharing the batches with the measured one
// (docs/load.md). Part of the engine stage (engine/engine.h is its interface).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "records/engine_records.h"
#include "util/status.h"

namespace flipscope {

// Real text the fillers are cut from: its name (for the manifest) and its token ids.
struct FillerSource {
  std::string name;
  std::vector<int32_t> tokens;
};

// One request a filler slot runs: the prompt tokens[offset, offset + length) of pool source
// `source`, prefilled `chunk` tokens per batch, then `generate` greedy tokens (0: prefill only).
// A warm job's prompt is prefilled before the measured sequence starts, so it decodes from the
// first batch on.
struct FillerJob {
  int slot = 0, index = 0;  // filler slot 1..N and the job's number within it
  int source = 0, offset = 0, length = 0, generate = 0, chunk = 0;
  bool warm = false;
  // The job as a load record names it (its source by name; nothing done yet).
  FillerJobRecord Record(const std::vector<FillerSource>& pool) const;
};

// Job `index` of filler `slot` under `seed`: a pure function of its arguments, so a load is
// reproducible. A job holds at most max_cells cache cells (prompt + generated); pool non-empty,
// every source at least 2 tokens, max_cells >= 16.
FillerJob PlanFillerJob(uint64_t seed, int slot, int index, const std::vector<FillerSource>& pool, int max_cells);

// Cache cells each of `load` fillers may hold at once, so that they and the measured sequence
// (n_tokens, plus `reserve` cells for forks) fit n_ctx; an error when fewer than 16 are left.
Result<int> FillerCells(int load, int n_ctx, int n_tokens, int reserve);

}  // namespace flipscope
