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

using json = nlohmann::json;

std::string SidecarPath(const std::string& capture) { return capture + ".forks.json"; }

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
      f.extend, CallExtension(base0, s.options.max_tokens, s.options.max_call_tokens, decoding.used == "grammar"));
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
      f.extend, CallExtension(base0, s.options.max_tokens, s.options.max_call_tokens, decoding.used == "grammar"));
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

Status WriteDecoded(const std::string& capture, const std::string& base0, const DecodedFutures& d) {
  FS_ASSIGN_OR_RETURN(auto cap, CaptureReader::Open(capture));
  FS_ASSIGN_OR_RETURN(auto base, CaptureReader::Open(base0));
  json futures = json::array();
  for (const auto& [pos, f] : d.at) {
    auto rep = d.reproduced.find(pos);
    futures.push_back({{"position", pos},
                       {"tokens", f.tokens},
                       {"probs", f.probs},
                       {"seconds", f.seconds},
                       {"stop", FutureStopName(f.stop)},
                       {"decoding", f.decoding},
                       {"first_masked", f.first_masked},
                       {"reproduced", rep != d.reproduced.end() && rep->second}});
  }
  json doc = {{"format", "flipscope.forks"},
              {"capture", capture},
              {"capture_created", cap->manifest().created},
              {"base", base0},
              {"base_created", base->manifest().created},
              {"max_tokens", d.max_tokens},
              {"max_call_tokens", d.max_call_tokens},
              {"decoding", d.decoding},
              {"futures", futures}};
  return WriteFileAtomic(SidecarPath(capture), doc.dump());
}

std::optional<DecodedFutures> ReadDecoded(const std::string& capture, const std::string& base0) {
  auto text = ReadFile(SidecarPath(capture));
  if (!text.ok()) return std::nullopt;
  auto cap = CaptureReader::Open(capture);
  auto base = CaptureReader::Open(base0);
  if (!cap.ok() || !base.ok()) return std::nullopt;
  try {
    json doc = json::parse(*text);
    // Stale when either capture was made again since.
    if (doc.at("format") != "flipscope.forks" || doc.at("capture_created") != (*cap)->manifest().created ||
        doc.at("base_created") != (*base)->manifest().created)
      return std::nullopt;
    DecodedFutures d;
    d.source = capture;
    d.max_tokens = doc.at("max_tokens").get<int>();
    d.max_call_tokens = doc.value("max_call_tokens", 0);      // older sidecars: no extension
    d.decoding = doc.value("decoding", std::string("free"));  // older sidecars: free futures
    for (const json& f : doc.at("futures")) {
      int32_t pos = f.at("position").get<int32_t>();
      Future fut;
      fut.tokens = f.at("tokens").get<std::vector<int32_t>>();
      fut.probs = f.at("probs").get<std::vector<float>>();
      fut.seconds = f.at("seconds").get<double>();
      // Older sidecars lack how each future stopped, which the judge needs: not reused.
      auto stop = FutureStopFromName(f.at("stop").get<std::string>());
      if (!stop) return std::nullopt;
      fut.stop = *stop;
      fut.decoding = f.value("decoding", std::string("free"));
      fut.first_masked = f.value("first_masked", false);
      d.at[pos] = std::move(fut);
      d.reproduced[pos] = f.at("reproduced").get<bool>();
    }
    return d;
  } catch (const json::exception&) {
    return std::nullopt;  // unreadable: the branch stage runs the pass instead
  }
}

}  // namespace flipscope
