// The history's comparisons: consecutive versions, each with the first, each with exact; and a
// history over captures made elsewhere (an experiment's configurations).
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "history/internal.h"

namespace flipscope::history {

HistoryComparison ComparisonOf(const std::string& kind, const std::string& base, const std::string& cand,
                               const Comparison& c) {
  const OverallStats& o = c.overall;
  HistoryComparison s;
  s.kind = kind, s.base = base, s.cand = cand;
  s.probes = c.probes_compared, s.flips = o.flips, s.confident_flips = o.confident_flips;
  s.bit_identical = c.bit_identical;
  s.flip_rate = o.flip_rate, s.flip_rate_ci = {o.flip_rate_ci.first, o.flip_rate_ci.second};
  s.kl_mean = o.kl_base_cand.mean, s.kl_median = o.kl_base_cand.median;
  s.kl_p99 = o.kl_base_cand.p99, s.kl_max = o.kl_base_cand.max;
  s.kernel_paths_differ = c.kernel_paths_differ;
  for (const WindowStats& w : c.windows) s.windows.push_back({w.begin, w.end, w.probes, w.flips, w.kl_mean, w.kl_max});
  for (const FlipRecord& f : c.flips)
    s.flip_list.push_back({f.position, f.base_token, f.cand_token, f.base_text, f.cand_text,
                           std::isnan(f.base_prob) ? std::nullopt : std::optional<double>(f.base_prob), f.kl, f.klass});
  return s;
}

KlDirection DirectionOf(const std::map<int32_t, double>& before, const std::map<int32_t, double>& now) {
  std::vector<double> d;  // now - before, per probe both hold
  for (const auto& [pos, kl] : now)
    if (auto it = before.find(pos); it != before.end()) d.push_back(kl - it->second);
  const double n = double(d.size());
  double mean = 0, var = 0;
  for (double x : d) mean += x;
  mean = n > 0 ? mean / n : 0;
  for (double x : d) var += (x - mean) * (x - mean);
  const double se = n > 1 ? std::sqrt(var / (n - 1) / n) : 0;
  const double lo = mean - 1.96 * se, hi = mean + 1.96 * se;
  const std::string direction = (se == 0 && mean == 0) ? "no change"
                                : hi < 0               ? "toward exact"
                                : lo > 0               ? "away from exact"
                                                       : "no clear direction";
  return {int64_t(d.size()), mean, {lo, hi}, direction};
}

Status CompareAll(const HistoryRequest& req, HistoryResult& doc) {
  CompareOptions opts;
  opts.window = req.window;
  opts.confident = req.confident;
  opts.log = Log::Quiet();
  if (auto d = LoadDetokenizer(req.model_path); d.ok()) opts.detokenize = *d;
  auto compare = [&](const std::string& kind, const HistoryVersion& b,
                     const HistoryVersion& c) -> Result<HistoryComparison> {
    FS_ASSIGN_OR_RETURN(Comparison cmp, CompareFiles(b.capture, c.capture, opts));
    return ComparisonOf(kind, b.release, c.release, cmp);
  };
  const std::vector<HistoryVersion>& v = doc.versions;
  doc.steps.clear(), doc.from_first.clear(), doc.to_exact.clear();
  for (size_t i = 1; i < v.size(); ++i) {
    FS_ASSIGN_OR_RETURN(HistoryComparison s, compare("step", v[i - 1], v[i]));
    doc.steps.push_back(std::move(s));
    if (i < 2) continue;  // the second release's step is already its distance from the first
    FS_ASSIGN_OR_RETURN(HistoryComparison f, compare("from_first", v[0], v[i]));
    doc.from_first.push_back(std::move(f));
  }
  if (doc.exact) {
    std::vector<std::map<int32_t, double>> kl_of;  // each version's KL(exact||version) per probe position
    for (const HistoryVersion& e : v) {
      FS_ASSIGN_OR_RETURN(Comparison cmp, CompareFiles(doc.exact->capture, e.capture, opts));
      HistoryComparison x = ComparisonOf("to_exact", "exact", e.release, cmp);
      kl_of.emplace_back();
      for (const compare::ProbeMetrics& p : cmp.probes) kl_of.back()[p.position] = p.kl_base_cand;
      if (kl_of.size() > 1) x.from_before = DirectionOf(kl_of[kl_of.size() - 2], kl_of.back());
      doc.to_exact.push_back(std::move(x));
    }
  }
  // The step that changed most: the most flips, then the largest mean KL.
  doc.changed_most = -1;
  for (size_t i = 0; i < doc.steps.size(); ++i) {
    const HistoryComparison& s = doc.steps[i];
    const HistoryComparison* b = doc.ChangedMost();
    if (!b || std::pair(s.flips, s.kl_mean) > std::pair(b->flips, b->kl_mean)) doc.changed_most = int64_t(i);
  }
  return Status::Ok();
}

}  // namespace flipscope::history

namespace flipscope {

namespace {
// A version entry of a configurations history: how its capture ran, as its manifest says.
Result<HistoryVersion> CapturedEntry(const CapturedVersion& c) {
  FS_ASSIGN_OR_RETURN(auto reader, CaptureReader::Open(c.capture));
  const EngineRecord& e = reader->manifest().engine;
  HistoryVersion v;
  v.release = c.name, v.capture = c.capture;
  v.engine = e.name, v.flags = e.flags, v.kernel_path = e.kernel_path;
  v.n_tokens = int64_t(reader->tokens().size());
  if (!e.llama_cpp.empty()) v.llama_cpp = e.llama_cpp;
  if (e.server_version) v.server = HistoryServer{*e.server_version, e.url, e.launch};
  return v;
}
}  // namespace

Result<HistoryResult> HistoryOfCaptures(const CapturedHistory& h) {
  if (h.versions.size() < 2)
    return Status::InvalidArgument(
        fmt::format("a history needs at least two configurations ({} given)", h.versions.size()));
  HistoryResult doc;
  doc.kind = "configurations";
  doc.model = h.model_path, doc.workload = h.workload_path, doc.window = h.window;
  for (const CapturedVersion& c : h.versions) {
    FS_ASSIGN_OR_RETURN(HistoryVersion v, CapturedEntry(c));
    doc.versions.push_back(std::move(v));
  }
  doc.n_tokens = doc.versions[0].n_tokens.value_or(0);
  if (!h.exact_capture.empty()) doc.exact = HistoryExact{h.exact_capture};
  HistoryRequest req;  // what the comparisons read of a request
  req.model_path = h.model_path;
  req.window = h.window;
  req.confident = h.confident;
  FS_RETURN_IF_ERROR(history::CompareAll(req, doc));
  if (const HistoryComparison* step = doc.ChangedMost())
    for (const FollowedForks& f : h.forks)
      if (f.base == step->base && f.cand == step->cand)
        doc.forks = HistoryForks{
            f.result, fmt::format("Forks followed by the run between {} and {} (its branch stage: each side's futures "
                                  "decoded by its own configuration).",
                                  f.base, f.cand)};
  const std::filesystem::path out(h.out_dir);
  FS_RETURN_IF_ERROR(WriteFileAtomic((out / "history.json").string(), doc.ToJson().dump(2) + "\n"));
  FS_RETURN_IF_ERROR(WriteFileAtomic((out / "history.md").string(), HistoryMarkdown(doc)));
  return doc;
}

}  // namespace flipscope
