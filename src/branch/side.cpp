// One side's pass: the teacher-forced run that re-creates the capture's rows and decodes a
// future at every branch point.
#include <fmt/format.h>

#include <algorithm>

#include "branch/branch.h"
#include "util/util.h"

namespace flipscope {

namespace {

// Per probe of in, the index of the branch point it is, or -1; an error when the inputs do not
// fit together (one first token and digest each, ascending points that are probes).
Result<std::vector<int64_t>> PointOfProbe(const SideInputs& in) {
  const size_t n_points = in.points.size();
  if (in.firsts.size() != n_points) return Status::Error("one first token per branch point is needed");
  if (!in.probe_digests.empty() && in.probe_digests.size() != in.probes.size())
    return Status::Error("one digest per probe is needed");
  std::vector<int64_t> point_of_probe(in.probes.size(), -1);
  for (size_t i = 0; i < n_points; ++i) {
    if (i > 0 && in.points[i] <= in.points[i - 1]) return Status::Error("branch points must be ascending");
    auto it = std::lower_bound(in.probes.begin(), in.probes.end(), in.points[i]);
    if (it == in.probes.end() || *it != in.points[i])
      return Status::Error(fmt::format("branch point {} is not a probe position of the capture", in.points[i]));
    point_of_probe[size_t(it - in.probes.begin())] = int64_t(i);
  }
  return point_of_probe;
}

// A pass of n_points futures, none decoded yet (free, not reproduced until shown).
SidePass EmptyPass(size_t n_points) {
  SidePass out;
  out.tokens.resize(n_points);
  out.probs.resize(n_points);
  out.stops.resize(n_points);
  out.decodings.assign(n_points, FutureDecoding::kFree);
  out.first_masked.assign(n_points, false);
  out.reproduced.assign(n_points, false);
  return out;
}

}  // namespace

Result<SidePass> RunSide(LlamaEngine& engine, const SideInputs& in) {
  const size_t n_points = in.points.size();
  // Which point (if any) each probe row is, so the row check can be recorded per point.
  FS_ASSIGN_OR_RETURN(const std::vector<int64_t> point_of_probe, PointOfProbe(in));
  SidePass out = EmptyPass(n_points);
  FS_RETURN_IF_ERROR(engine.SetGrammar(in.grammar));
  out.forked = in.allow_fork && engine.CanFork();
  const double t0 = NowSeconds();

  RowSink check_row = [&](const Row& r) -> Status {
    if (in.probe_digests.empty()) return Status::Ok();
    bool same = Digest64(r.logits.data(), r.logits.size_bytes()) == in.probe_digests[size_t(r.index)];
    ++out.rows_checked;
    out.rows_reproduced += same;
    if (int64_t pt = point_of_probe[size_t(r.index)]; pt >= 0) out.reproduced[size_t(pt)] = same;
    return Status::Ok();
  };
  auto keep = [&](size_t i, const Future& f) {
    out.tokens[i] = f.tokens;
    out.probs[i] = f.probs;
    out.stops[i] = f.stop;
    out.decodings[i] = f.decoding;
    out.first_masked[i] = f.first_masked;
    return Status::Ok();
  };
  const bool bar_on = !in.progress_label.empty();
  Progress bar(in.progress_label, out.forked ? uint64_t(in.tokens.size()) : uint64_t(n_points),
               out.forked ? "tok" : "branch");
  ProgressFn on_tokens = [&](int64_t done) {
    if (bar_on && out.forked) bar.Update(uint64_t(done));
  };

  if (out.forked) {
    std::vector<ForkRequest> forks(n_points);
    for (size_t i = 0; i < n_points; ++i) forks[i] = {in.points[i], in.firsts[i]};
    FS_RETURN_IF_ERROR(engine.Prefill({.tokens = in.tokens,
                                       .probes = in.probes,
                                       .sink = check_row,
                                       .forks = forks,
                                       .max_tokens = in.max_tokens,
                                       .fork_sink = keep,
                                       .progress = on_tokens,
                                       .extend = in.extend}));
  } else {
    // Without forking: one plain pass for the row check, then every branch re-prefills its prefix.
    FS_RETURN_IF_ERROR(engine.Prefill(in.tokens, in.probes, check_row, on_tokens));
    for (size_t i = 0; i < n_points; ++i) {
      auto f = engine.DecodeFresh(in.tokens.first(size_t(in.points[i]) + 1), in.firsts[i], in.max_tokens, in.extend);
      if (!f.ok()) return f.status().Prefixed(fmt::format("branch at position {}", in.points[i]));
      FS_RETURN_IF_ERROR(keep(i, *f));
      if (bar_on) bar.Update(i + 1);
    }
  }
  bar.Finish();
  out.seconds = NowSeconds() - t0;
  return out;
}

std::optional<SidePass> SideFromDecoded(const DecodedFutures& d, const std::vector<int32_t>& points,
                                        const std::vector<int32_t>& firsts, int max_tokens, int max_call_tokens,
                                        FutureDecoding decoding) {
  // The same rule, or the futures are not those this run would decode: cutting a future back to
  // a smaller budget would drop the tokens its call extension decoded, and then nobody could tell
  // a cut call from an ended one.
  if (d.max_tokens != max_tokens || d.max_call_tokens != max_call_tokens || d.decoding != decoding) return std::nullopt;
  SidePass out;
  out.decoded_during = d.source;
  for (size_t i = 0; i < points.size(); ++i) {
    auto it = d.at.find(points[i]);
    if (it == d.at.end() || it->second.tokens.empty()) return std::nullopt;
    const Future& f = it->second;
    if ((f.tokens[0] != firsts[i] && !f.first_masked) || f.probs.size() != f.tokens.size()) return std::nullopt;
    out.tokens.push_back(f.tokens);
    out.probs.push_back(f.probs);
    out.stops.push_back(f.stop);
    out.decodings.push_back(f.decoding);
    out.first_masked.push_back(f.first_masked);
    auto r = d.reproduced.find(points[i]);
    out.reproduced.push_back(r != d.reproduced.end() && r->second);
    out.seconds += f.seconds;
  }
  return out;
}

}  // namespace flipscope
