// history.json to JSON and back (history_result.h).
#include "results/history_result.h"

#include <cmath>
#include <limits>

#include "util/read.h"

namespace flipscope {

using nlohmann::json;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A figure: the number at key, NaN when absent or null (JSON has no NaN: it is written as null).
double Figure(const json& j, const char* key) { return read::Num(j, key).value_or(kNaN); }
int64_t Whole(const json& j, const char* key) { return read::Get<int64_t>(j, key, 0); }
std::array<double, 2> Pair(const json& j, const char* key) {
  const auto v = read::Interval2(j, key);
  return v ? *v : std::array<double, 2>{kNaN, kNaN};
}
json WindowToJson(const HistoryWindow& w) {
  return {{"begin", w.begin}, {"end", w.end},         {"probes", w.probes},
          {"flips", w.flips}, {"kl_mean", w.kl_mean}, {"kl_max", w.kl_max}};
}
HistoryWindow WindowFromJson(const json& j) {
  return {Whole(j, "begin"), Whole(j, "end"),      Whole(j, "probes"),
          Whole(j, "flips"), Figure(j, "kl_mean"), Figure(j, "kl_max")};
}

json FlipToJson(const HistoryFlip& f) {
  return {{"position", f.position},
          {"base_token", f.base_token},
          {"cand_token", f.cand_token},
          {"base_text", f.base_text},
          {"cand_text", f.cand_text},
          {"base_prob", read::OrNull(f.base_prob)},
          {"kl", f.kl},
          {"class", f.klass}};
}
HistoryFlip FlipFromJson(const json& j) {
  return {Whole(j, "position"),      Whole(j, "base_token"),    Whole(j, "cand_token"),
          read::Str(j, "base_text"), read::Str(j, "cand_text"), read::Opt<double>(j, "base_prob"),
          Figure(j, "kl"),           read::Str(j, "class")};
}

// The keys a comparison's type owns (any other is kept in extra).
constexpr std::initializer_list<const char*> kComparisonKeys = {"kind",          "base",
                                                                "cand",          "probes",
                                                                "flips",         "flip_rate",
                                                                "flip_rate_ci",  "confident_flips",
                                                                "bit_identical", "kl_mean",
                                                                "kl_median",     "kl_p99",
                                                                "kl_max",        "kernel_paths_differ",
                                                                "windows",       "flip_list",
                                                                "from_before"};

}  // namespace

json ToJson(const HistoryComparison& c) {
  json j = c.extra;
  j.update({{"kind", c.kind},
            {"base", c.base},
            {"cand", c.cand},
            {"probes", c.probes},
            {"flips", c.flips},
            {"flip_rate", c.flip_rate},
            {"flip_rate_ci", c.flip_rate_ci},
            {"confident_flips", c.confident_flips},
            {"bit_identical", c.bit_identical},
            {"kl_mean", c.kl_mean},
            {"kl_median", c.kl_median},
            {"kl_p99", c.kl_p99},
            {"kl_max", c.kl_max},
            {"kernel_paths_differ", c.kernel_paths_differ},
            {"windows", read::ArrayOf(c.windows, WindowToJson)},
            {"flip_list", read::ArrayOf(c.flip_list, FlipToJson)}});
  if (const auto& d = c.from_before)
    j["from_before"] = {
        {"probes", d->probes}, {"kl_change_mean", d->mean}, {"kl_change_ci", d->ci}, {"direction", d->direction}};
  return j;
}
HistoryComparison HistoryComparisonFromJson(const json& j) {
  HistoryComparison c;
  c.extra = read::Without(j, kComparisonKeys);
  c.kind = read::Str(j, "kind"), c.base = read::Str(j, "base"), c.cand = read::Str(j, "cand");
  c.probes = Whole(j, "probes"), c.flips = Whole(j, "flips");
  c.confident_flips = Whole(j, "confident_flips"), c.bit_identical = Whole(j, "bit_identical");
  c.flip_rate = Figure(j, "flip_rate"), c.flip_rate_ci = Pair(j, "flip_rate_ci");
  c.kl_mean = Figure(j, "kl_mean"), c.kl_median = Figure(j, "kl_median");
  c.kl_p99 = Figure(j, "kl_p99"), c.kl_max = Figure(j, "kl_max");
  c.kernel_paths_differ = read::Get(j, "kernel_paths_differ", false);
  c.windows = read::Each<HistoryWindow>(read::Sub(j, "windows"), WindowFromJson);
  c.flip_list = read::Each<HistoryFlip>(read::Sub(j, "flip_list"), FlipFromJson);
  if (const json& d = read::Sub(j, "from_before"); d.is_object())
    c.from_before = KlDirection{Whole(d, "probes"), Figure(d, "kl_change_mean"), Pair(d, "kl_change_ci"),
                                read::Str(d, "direction")};
  return c;
}

namespace {

constexpr std::initializer_list<const char*> kVersionKeys = {
    "release",         "commit",   "capture", "worker", "worker_build_seconds", "llama_build_seconds",
    "capture_seconds", "reused",   "engine",  "flags",  "kernel_path",          "llama_cpp",
    "llama_source",    "n_tokens", "server"};

json VersionToJson(const HistoryVersion& v) {
  json j = v.extra;
  j["release"] = v.release, j["capture"] = v.capture;
  read::PutIf(j, "commit", v.commit), read::PutIf(j, "worker", v.worker);
  read::PutIf(j, "worker_build_seconds", v.worker_build_seconds);
  read::PutIf(j, "llama_build_seconds", v.llama_build_seconds);
  read::PutIf(j, "capture_seconds", v.capture_seconds), read::PutIf(j, "reused", v.reused);
  read::PutIf(j, "engine", v.engine), read::PutIf(j, "flags", v.flags);
  read::PutIf(j, "kernel_path", v.kernel_path), read::PutIf(j, "llama_cpp", v.llama_cpp);
  if (v.llama_source) j["llama_source"] = ToJson(*v.llama_source);
  read::PutIf(j, "n_tokens", v.n_tokens);
  if (const auto& s = v.server) {
    j["server"] = {{"version", s->version}, {"url", s->url}};
    if (s->launch) j["server"]["launch"] = s->launch->ToJson();
  }
  return j;
}
HistoryVersion VersionFromJson(const json& j) {
  HistoryVersion v;
  v.extra = read::Without(j, kVersionKeys);
  v.release = read::Str(j, "release"), v.capture = read::Str(j, "capture");
  v.commit = read::Opt<std::string>(j, "commit"), v.worker = read::Opt<std::string>(j, "worker");
  v.worker_build_seconds = read::Opt<double>(j, "worker_build_seconds");
  v.llama_build_seconds = read::Opt<double>(j, "llama_build_seconds");
  v.capture_seconds = read::Opt<double>(j, "capture_seconds"), v.reused = read::Opt<bool>(j, "reused");
  v.engine = read::Opt<std::string>(j, "engine"), v.flags = read::Opt<std::string>(j, "flags");
  v.kernel_path = read::Opt<std::string>(j, "kernel_path"), v.llama_cpp = read::Opt<std::string>(j, "llama_cpp");
  v.llama_source = EngineSourceFromJson(read::Sub(j, "llama_source"));
  v.n_tokens = read::Opt<int64_t>(j, "n_tokens");
  if (const json& s = read::Sub(j, "server"); s.is_object())
    v.server = HistoryServer{read::Str(s, "version"), read::Str(s, "url"), EngineLaunch::Of(read::Sub(s, "launch"))};
  return v;
}

// The top-level keys HistoryResult owns.
constexpr std::initializer_list<const char*> kHistoryTopLevel = {
    "kind",     "model",        "workload",   "model_sha256", "workload_sha256", "tokens", "llama_src", "n_tokens",
    "flags",    "cpu",          "probe_plan", "window",       "versions",        "exact",  "steps",     "from_first",
    "to_exact", "changed_most", "forks"};

}  // namespace

const HistoryComparison* HistoryResult::ChangedMost() const {
  return changed_most >= 0 && size_t(changed_most) < steps.size() ? &steps[size_t(changed_most)] : nullptr;
}

json HistoryResult::ToJson() const {
  json j = extra;
  read::PutIf(j, "kind", kind);
  j["model"] = model, j["workload"] = workload;
  read::PutIf(j, "model_sha256", model_sha256), read::PutIf(j, "workload_sha256", workload_sha256);
  read::PutIf(j, "tokens", tokens), read::PutIf(j, "llama_src", llama_src);
  j["n_tokens"] = n_tokens, j["flags"] = flags, j["cpu"] = cpu;
  if (probe_plan) j["probe_plan"] = {{"stride", probe_plan->stride}, {"full", probe_plan->full}};
  j["window"] = window;
  j["versions"] = read::ArrayOf(versions, VersionToJson);
  if (exact) {
    json x = exact->extra;
    x["capture"] = exact->capture;
    read::PutIf(x, "reused", exact->reused), read::PutIf(x, "capture_seconds", exact->capture_seconds);
    j["exact"] = x;
  }
  auto comparisons = [](const std::vector<HistoryComparison>& cs) {
    return read::ArrayOf(cs, [](const HistoryComparison& c) { return flipscope::ToJson(c); });
  };
  j["steps"] = comparisons(steps), j["from_first"] = comparisons(from_first), j["to_exact"] = comparisons(to_exact);
  j["changed_most"] = changed_most;
  if (forks) {
    j["forks"] = forks->result.ToJson();
    j["forks"]["how"] = forks->how;
  }
  return j;
}

HistoryResult HistoryResult::FromJson(const json& j) {
  HistoryResult h;
  h.extra = read::Without(j, kHistoryTopLevel);
  h.kind = read::Opt<std::string>(j, "kind");
  h.model = read::Str(j, "model"), h.workload = read::Str(j, "workload");
  h.model_sha256 = read::Opt<std::string>(j, "model_sha256");
  h.workload_sha256 = read::Opt<std::string>(j, "workload_sha256");
  h.tokens = read::Opt<std::string>(j, "tokens"), h.llama_src = read::Opt<std::string>(j, "llama_src");
  h.n_tokens = Whole(j, "n_tokens"), h.flags = read::Str(j, "flags"), h.cpu = read::Str(j, "cpu");
  if (const json& p = read::Sub(j, "probe_plan"); p.is_object())
    h.probe_plan = Plan{Whole(p, "stride"), read::Str(p, "full")};
  h.window = Whole(j, "window");
  h.versions = read::Each<HistoryVersion>(read::Sub(j, "versions"), VersionFromJson);
  if (const json& x = read::Sub(j, "exact"); x.is_object())
    h.exact =
        HistoryExact{read::Str(x, "capture"), read::Opt<bool>(x, "reused"), read::Opt<double>(x, "capture_seconds"),
                     read::Without(x, {"capture", "reused", "capture_seconds"})};
  h.steps = read::Each<HistoryComparison>(read::Sub(j, "steps"), HistoryComparisonFromJson);
  h.from_first = read::Each<HistoryComparison>(read::Sub(j, "from_first"), HistoryComparisonFromJson);
  h.to_exact = read::Each<HistoryComparison>(read::Sub(j, "to_exact"), HistoryComparisonFromJson);
  h.changed_most = read::Get<int64_t>(j, "changed_most", -1);
  if (const json& f = read::Sub(j, "forks"); f.is_object())
    h.forks = HistoryForks{BranchResult::FromJson(f), read::Str(f, "how")};
  return h;
}

}  // namespace flipscope
