// capture/pairing.h: two captures side by side (compare, branch, layers): the same workload, the
// shared probes, the flips and the first-N rule of every fork follower. Part of the capture stage
// (capture/capture.h is its interface).
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "capture/capture_file.h"
#include "capture/manifest.h"
#include "checkpoint/model_info.h"
#include "engine/engine.h"
#include "records/records.h"
#include "util/names.h"
#include "util/status.h"
#include "util/util.h"
#include "workload/workload.h"

namespace flipscope {

// ---- Two captures side by side (compare, branch, layers) ----------------------------------------

// The vocabulary size of a capture: its rows' width, else its manifest's model.n_vocab; 0 unknown.
int32_t VocabSize(const CaptureReader& cap);
// Whether two captures scored one workload: the same token ids, the same vocabulary size (where
// both are known) and the same tokenizer (where both manifests record it). Errors name both
// files and the first differing position or the sizes.
Status CheckSameWorkload(const CaptureReader& base, const CaptureReader& cand);

// The rows of the probe positions both captures hold, in position order: base[k] and cand[k]
// are the row indices of the k-th shared position (the one walk over two position lists).
struct ProbePairs {
  std::vector<int64_t> base, cand;
};
ProbePairs PairProbes(std::span<const int32_t> base_positions, std::span<const int32_t> cand_positions);

// A flip between two captures: a position both probe where their greedy tokens differ.
struct Flip {
  int32_t position = 0;
  int32_t base_token = 0, cand_token = 0;
};
// Every flip of two captures' probes (positions and argmax as stored), by position. The first N
// of these are the branch points of every fork follower (`flipscope branch`, an experiment's
// forks over HTTP and while capturing, which take the same first flips as the rows arrive) and
// the flips `flipscope layers` explains.
std::vector<Flip> Flips(std::span<const int32_t> base_positions, std::span<const int32_t> base_argmax,
                        std::span<const int32_t> cand_positions, std::span<const int32_t> cand_argmax);

// Which positions a fork follower may fork at (true: fork there); null: every position.
using ForkFilter = std::function<bool(int32_t position)>;
// Where a fork follower forks (ForkScope, records/modes.h): kAssistant only where a deployed
// model writes the next token (ModelWrites(spans, p + 1)), kAll everywhere.
// The fork filter of `scope` over a transcript's spans (kAll: null).
ForkFilter ForkWhere(std::vector<Span> spans, ForkScope scope);
// The same over a capture's workload; errors name unreadable spans.
Result<ForkFilter> ForkWhere(const CaptureReader& cap, ForkScope scope);

// Which flips a fork follower's max forks go to (branch's pick): kFirst the first max by position;
// kSpread spread over the session, a flip at p taken while fewer than ceil(max * (p + 1) / n_tokens)
// have been, so that every stretch of the session gets its share and a stretch without flips
// leaves its share to the flips after it.
enum class ForkPick { kFirst, kSpread };
template <>
struct Names<ForkPick> {
  static constexpr std::pair<ForkPick, const char*> v[] = {{ForkPick::kFirst, "first"}, {ForkPick::kSpread, "spread"}};
};

// The N-fork rule of every fork follower, for flips met one at a time in position order (forks
// planned while the rows arrive): Take says whether a shared probe is a flip to fork, one where
// `where` allows forks, among at most max such (0 = no limit) chosen by `pick` over a session of
// n_tokens. Flips where `where` does not allow forks are counted (elsewhere()) and never use up
// max. Fed every shared probe in order, it takes the same entries of Flips() as fed Flips() alone.
class FirstFlips {
 public:
  explicit FirstFlips(int max, ForkFilter where = nullptr, ForkPick pick = ForkPick::kFirst, int64_t n_tokens = 0)
      : max_(max), where_(std::move(where)), spread_(pick == ForkPick::kSpread ? n_tokens : 0) {}
  bool Take(int32_t position, int32_t base_token, int32_t cand_token) {
    if (base_token == cand_token) return false;
    if (where_ && !where_(position)) {
      ++elsewhere_;
      return false;
    }
    ++forkable_;
    if (max_ > 0 && taken_ >= Quota(position)) return false;
    ++taken_;
    return true;
  }
  int64_t forkable() const { return forkable_; }    // flips where forks are allowed, taken or not
  int64_t elsewhere() const { return elsewhere_; }  // flips where they are not

 private:
  // How many forks may have been taken up to and including position p.
  int64_t Quota(int32_t p) const {
    if (spread_ <= 0) return max_;
    return std::min<int64_t>(max_, (int64_t(max_) * (int64_t(p) + 1) + spread_ - 1) / spread_);
  }
  int max_;
  ForkFilter where_;
  int64_t spread_;  // the session's length under kSpread; 0 under kFirst
  int64_t taken_ = 0, forkable_ = 0, elsewhere_ = 0;
};
// The first max (0 = all) of Flips(), by the same rule; *available counts them all.
std::vector<Flip> FirstNFlips(std::span<const int32_t> base_positions, std::span<const int32_t> base_argmax,
                              std::span<const int32_t> cand_positions, std::span<const int32_t> cand_argmax, int max,
                              int64_t* available);

}  // namespace flipscope
