// Branch following during the captures: a branched variant forks where its first repeat's greedy
// token differs from the baseline's, the baseline's second repeat forks at those points from the
// baseline's own token, and each capture's futures are kept beside it (CAPTURE.forks.json), so
// the branch stage needs no teacher-forced pass of its own.
#include <fmt/format.h>

#include <memory>

#include "experiment/steps.h"
#include "util/util.h"

namespace flipscope {
namespace {

// What a planner compares against: the baseline r0's probe positions, greedy tokens and digests.
struct BaseRows {
  std::vector<int32_t> positions, argmax;
  std::vector<uint64_t> digest;
  std::string created;
};

Result<std::shared_ptr<BaseRows>> ReadBaseRows(const std::string& base0) {
  FS_ASSIGN_OR_RETURN(auto r, CaptureReader::Open(base0));
  auto b = std::make_shared<BaseRows>();
  b->positions.assign(r->positions().begin(), r->positions().end());
  b->argmax.assign(r->argmax().begin(), r->argmax().end());
  b->digest.assign(r->digest().begin(), r->digest().end());
  b->created = r->manifest().created;
  return b;
}

// The baseline's row for a probe of the capture being made, or -1 when the probe plans differ.
int64_t BaseIndex(const BaseRows& b, const Row& r) {
  if (r.index < int64_t(b.positions.size()) && b.positions[size_t(r.index)] == r.position) return r.index;
  return -1;
}

}  // namespace

Result<CaptureForks> VariantForks(const std::string& base0, const BranchSettings& s,
                                  std::shared_ptr<DecodedFutures> out) {
  FS_ASSIGN_OR_RETURN(auto base, ReadBaseRows(base0));
  out->max_tokens = s.options.max_tokens;
  out->max_call_tokens = s.options.max_call_tokens;
  FS_ASSIGN_OR_RETURN(auto base_cap, CaptureReader::Open(base0));
  FS_ASSIGN_OR_RETURN(ForkFilter where, ForkWhere(*base_cap, s.options.fork_where));
  FS_ASSIGN_OR_RETURN(ForkDecoding decoding, ResolveDecoding(base0, s.options.decoding));
  // The branch stage's N-fork rule, counting only the flips where forks are allowed.
  auto rule = std::make_shared<FirstFlips>(s.options.max_branches, std::move(where), s.options.pick,
                                           int64_t(base_cap->tokens().size()));
  CaptureForks f;
  f.max_tokens = s.options.max_tokens;
  FS_ASSIGN_OR_RETURN(
      f.extend, CallExtension(base0, s.options.max_tokens, s.options.max_call_tokens, decoding.used == FutureDecoding::kGrammar));
  out->decoding = decoding.used;
  f.grammar = std::move(decoding.grammar);
  f.plan = [base, rule](const Row& r) -> int32_t {
    const int64_t i = BaseIndex(*base, r);
    return i >= 0 && rule->Take(r.position, base->argmax[size_t(i)], r.argmax) ? r.argmax : -1;
  };
  f.sink = [out](const ForkRequest& fr, const Future& fut) {
    out->at[fr.position] = fut;
    out->reproduced[fr.position] = true;  // the capture's own row
    return Status::Ok();
  };
  return f;
}

Result<CaptureForks> BaselineForks(const std::string& base0, const std::set<int32_t>& points, const BranchSettings& s,
                                   std::shared_ptr<DecodedFutures> out) {
  FS_ASSIGN_OR_RETURN(auto base, ReadBaseRows(base0));
  out->max_tokens = s.options.max_tokens;
  out->max_call_tokens = s.options.max_call_tokens;
  // The same decoding as the variant's futures (and the branch stage's): one resolution, one rule.
  FS_ASSIGN_OR_RETURN(ForkDecoding decoding, ResolveDecoding(base0, s.options.decoding));
  CaptureForks f;
  f.max_tokens = s.options.max_tokens;
  FS_ASSIGN_OR_RETURN(
      f.extend, CallExtension(base0, s.options.max_tokens, s.options.max_call_tokens, decoding.used == FutureDecoding::kGrammar));
  out->decoding = decoding.used;
  f.grammar = std::move(decoding.grammar);
  f.plan = [base, points, out](const Row& r) -> int32_t {
    int64_t i = BaseIndex(*base, r);
    if (i < 0 || !points.count(r.position)) return -1;
    // The future starts from r0's token (the one the flip compared); whether this repeat's row
    // is r0's row says whether the fork's cache is the one r0 had.
    out->reproduced[r.position] = Digest64(r.logits.data(), r.logits.size_bytes()) == base->digest[size_t(i)];
    return base->argmax[size_t(i)];
  };
  f.sink = [out](const ForkRequest& fr, const Future& fut) {
    out->at[fr.position] = fut;
    return Status::Ok();
  };
  return f;
}

}  // namespace flipscope
