// Load: which filler requests share the batches with the measured sequence. A pure function of
// the seed, so a loaded capture can be made again exactly.
#include <fmt/format.h>

#include <algorithm>

#include "engine/engine.h"

namespace flipscope {
namespace {

// splitmix64: a small, fully specified mixer (std:: distributions differ between libraries,
// and the fillers must be the same everywhere).
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Draws of one job: draw k of (seed, slot, index).
struct Draws {
  uint64_t state;
  // A value in [lo, hi] (hi >= lo).
  int Uniform(int lo, int hi) {
    state = Mix(state);
    return lo + int(state % uint64_t(hi - lo + 1));
  }
};

constexpr int kMinCells = 16;

}  // namespace

FillerJob PlanFillerJob(uint64_t seed, int slot, int index, const std::vector<FillerSource>& pool, int max_cells) {
  Draws d{Mix(seed) ^ Mix(uint64_t(slot) << 32 | uint32_t(index))};
  FillerJob j;
  j.slot = slot;
  j.index = index;
  // Even slots' first requests arrived earlier: they are decoding when the measured one starts.
  j.warm = index == 0 && slot % 2 == 0;
  j.source = d.Uniform(0, int(pool.size()) - 1);
  const int src_len = int(pool[size_t(j.source)].tokens.size());
  // Half of the later requests only prefill; the others generate up to a quarter of their cells.
  const bool generates = j.warm || d.Uniform(0, 1) == 1;
  j.generate = generates ? d.Uniform(1, std::max(1, max_cells / 4)) : 0;
  const int hi = std::max(2, std::min(max_cells - j.generate, src_len));
  j.length = d.Uniform(std::max(2, hi / 8), hi);
  j.offset = d.Uniform(0, src_len - j.length);
  j.chunk = d.Uniform(16, 256);
  return j;
}

Result<int> FillerCells(int load, int n_ctx, int n_tokens, int reserve) {
  if (load <= 0) return 0;
  const int left = (n_ctx - n_tokens - reserve) / load;
  if (left < kMinCells)
    return Status::InvalidArgument(fmt::format(
        "--load {}: the context of {} leaves {} cells per filler beside the {} measured tokens; at least {} are "
        "needed (raise -c or lower --load)",
        load, n_ctx, std::max(0, left), n_tokens, kMinCells));
  return left;
}

FillerJobRecord FillerJob::Record(const std::vector<FillerSource>& pool) const {
  return {.slot = slot,
          .job = index,
          .source = pool[size_t(source)].name,
          .offset = offset,
          .length = length,
          .generate = generate,
          .chunk = chunk,
          .warm = warm};
}

}  // namespace flipscope
