// The history's comparisons: consecutive versions, each with the first, each with exact; and a
// history over captures made elsewhere (an experiment's configurations).
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "history/internal.h"

namespace flipscope::history {

namespace {
// NaN as null (JSON has no NaN).
nlohmann::json Num(double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); }
}  // namespace

nlohmann::json StepJson(const std::string& kind, const std::string& base, const std::string& cand,
                        const Comparison& c) {
  const OverallStats& o = c.overall;
  nlohmann::json windows = nlohmann::json::array();
  for (const WindowStats& w : c.windows)
    windows.push_back({{"begin", w.begin},
                       {"end", w.end},
                       {"probes", w.probes},
                       {"flips", w.flips},
                       {"kl_mean", w.kl_mean},
                       {"kl_max", w.kl_max}});
  nlohmann::json flips = nlohmann::json::array();
  for (const FlipRecord& f : c.flips)
    flips.push_back({{"position", f.position},
                     {"base_token", f.base_token},
                     {"cand_token", f.cand_token},
                     {"base_text", f.base_text},
                     {"cand_text", f.cand_text},
                     {"base_prob", Num(f.base_prob)},
                     {"kl", f.kl},
                     {"class", f.klass}});
  return {{"kind", kind},
          {"base", base},
          {"cand", cand},
          {"probes", c.probes_compared},
          {"flips", o.flips},
          {"flip_rate", o.flip_rate},
          {"flip_rate_ci", {o.flip_rate_ci.first, o.flip_rate_ci.second}},
          {"confident_flips", o.confident_flips},
          {"bit_identical", c.bit_identical},
          {"kl_mean", o.kl_base_cand.mean},
          {"kl_median", o.kl_base_cand.median},
          {"kl_p99", o.kl_base_cand.p99},
          {"kl_max", o.kl_base_cand.max},
          {"kernel_paths_differ", c.kernel_paths_differ},
          {"windows", windows},
          {"flip_list", flips}};
}

nlohmann::json DirectionJson(const std::map<int32_t, double>& before, const std::map<int32_t, double>& now) {
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
  return {{"probes", d.size()}, {"kl_change_mean", mean}, {"kl_change_ci", {lo, hi}}, {"direction", direction}};
}

Status CompareAll(const HistoryRequest& req, nlohmann::json& doc) {
  CompareOptions opts;
  opts.window = req.window;
  opts.confident = req.confident;
  opts.log = Log::Quiet();
  if (auto d = LoadDetokenizer(req.model_path); d.ok()) opts.detokenize = *d;
  // kind of comparison, base and candidate entries (with "capture"), and their names.
  auto compare = [&](const std::string& kind, const nlohmann::json& b, const nlohmann::json& c,
                     const nlohmann::json& bn, const nlohmann::json& cn) -> Result<nlohmann::json> {
    FS_ASSIGN_OR_RETURN(Comparison cmp,
                        CompareFiles(b["capture"].get<std::string>(), c["capture"].get<std::string>(), opts));
    return StepJson(kind, bn.get<std::string>(), cn.get<std::string>(), cmp);
  };
  const nlohmann::json& v = doc["versions"];
  doc["steps"] = doc["from_first"] = doc["to_exact"] = nlohmann::json::array();
  for (size_t i = 1; i < v.size(); ++i) {
    FS_ASSIGN_OR_RETURN(auto s, compare("step", v[i - 1], v[i], v[i - 1]["release"], v[i]["release"]));
    doc["steps"].push_back(std::move(s));
    if (i < 2) continue;  // the second release's step is already its distance from the first
    FS_ASSIGN_OR_RETURN(auto f, compare("from_first", v[0], v[i], v[0]["release"], v[i]["release"]));
    doc["from_first"].push_back(std::move(f));
  }
  if (doc.contains("exact")) {
    std::vector<std::map<int32_t, double>> kl_of;  // each version's KL(exact||version) per probe position
    for (const auto& e : v) {
      FS_ASSIGN_OR_RETURN(Comparison cmp, CompareFiles(doc["exact"]["capture"].get<std::string>(),
                                                       e["capture"].get<std::string>(), opts));
      nlohmann::json x = StepJson("to_exact", "exact", e["release"].get<std::string>(), cmp);
      kl_of.emplace_back();
      for (const compare::ProbeMetrics& p : cmp.probes) kl_of.back()[p.position] = p.kl_base_cand;
      if (kl_of.size() > 1) x["from_before"] = DirectionJson(kl_of[kl_of.size() - 2], kl_of.back());
      doc["to_exact"].push_back(std::move(x));
    }
  }
  // The step that changed most: the most flips, then the largest mean KL.
  int best = -1;
  for (size_t i = 0; i < doc["steps"].size(); ++i) {
    const auto& s = doc["steps"][i];
    if (best < 0) {
      best = int(i);
      continue;
    }
    const auto& b = doc["steps"][best];
    if (std::pair(s["flips"].get<int64_t>(), s["kl_mean"].get<double>()) >
        std::pair(b["flips"].get<int64_t>(), b["kl_mean"].get<double>()))
      best = int(i);
  }
  doc["changed_most"] = best;
  return Status::Ok();
}

}  // namespace flipscope::history

namespace flipscope {

namespace {
// A version entry of a configurations history: how its capture ran, as its manifest says.
Result<nlohmann::json> CapturedEntry(const CapturedVersion& v) {
  FS_ASSIGN_OR_RETURN(auto reader, CaptureReader::Open(v.capture));
  const CaptureManifest& m = reader->manifest();
  nlohmann::json entry = {{"release", v.name},
                          {"capture", v.capture},
                          {"engine", m.engine.name},
                          {"flags", m.engine.flags},
                          {"kernel_path", m.engine.kernel_path},
                          {"n_tokens", reader->tokens().size()}};
  const EngineRecord& e = m.engine;
  if (!e.llama_cpp.empty()) entry["llama_cpp"] = e.llama_cpp;
  if (e.server_version) {
    entry["server"] = {{"version", *e.server_version}, {"url", e.url}};
    if (e.launch) entry["server"]["launch"] = {{"asked", e.launch->asked}, {"run", e.launch->run}};
  }
  return entry;
}
}  // namespace

Result<nlohmann::json> HistoryOfCaptures(const CapturedHistory& h) {
  if (h.versions.size() < 2)
    return Status::InvalidArgument(
        fmt::format("a history needs at least two configurations ({} given)", h.versions.size()));
  nlohmann::json doc = {{"kind", "configurations"},
                        {"model", h.model_path},
                        {"workload", h.workload_path},
                        {"window", h.window},
                        {"flags", ""},
                        {"cpu", ""},
                        {"versions", nlohmann::json::array()}};
  for (const CapturedVersion& v : h.versions) {
    FS_ASSIGN_OR_RETURN(nlohmann::json entry, CapturedEntry(v));
    doc["versions"].push_back(std::move(entry));
  }
  doc["n_tokens"] = doc["versions"][0]["n_tokens"];
  if (!h.exact_capture.empty()) doc["exact"] = {{"capture", h.exact_capture}};
  HistoryRequest req;  // what the comparisons read of a request
  req.model_path = h.model_path;
  req.window = h.window;
  req.confident = h.confident;
  FS_RETURN_IF_ERROR(history::CompareAll(req, doc));
  if (const int best = doc["changed_most"].get<int>(); best >= 0) {
    const nlohmann::json& step = doc["steps"][size_t(best)];
    for (const FollowedForks& f : h.forks)
      if (f.base == step["base"].get<std::string>() && f.cand == step["cand"].get<std::string>()) {
        doc["forks"] = f.result.ToJson();  // config, records, counts
        doc["forks"]["how"] = fmt::format(
            "Forks followed by the run between {} and {} (its branch stage: each side's futures decoded by its "
            "own configuration).",
            f.base, f.cand);
      }
  }
  const std::filesystem::path out(h.out_dir);
  FS_RETURN_IF_ERROR(WriteFileAtomic((out / "history.json").string(), doc.dump(2) + "\n"));
  FS_RETURN_IF_ERROR(WriteFileAtomic((out / "history.md").string(), HistoryMarkdown(doc)));
  return doc;
}

}  // namespace flipscope
