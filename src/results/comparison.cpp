// compare's JSON document (docs/compare.md): written from a Comparison, read back tolerantly.
#include "results/comparison.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "util/read.h"

namespace flipscope {
namespace {
using nlohmann::json;
using read::Get;
using read::Str;
using read::Sub;

// The top-level fields ToJson writes; any other field of a document read is kept in extra.
constexpr std::initializer_list<const char*> kKnown = {
    "base",          "cand",          "kl_direction",        "kl_estimate",         "truncated",     "flags",
    "replay",        "kernel_path",   "window",              "probes_compared",     "probes_skipped_base",
    "probes_skipped_cand",            "bit_identical",       "all_bit_identical",   "overall",       "windows",
    "flips",         "timing"};

json Num(double v) { return std::isnan(v) ? json(nullptr) : json(v); }
json Ci(std::pair<double, double> ci) { return json::array({ci.first, ci.second}); }
json OrNull(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }
std::string KlKey(size_t i) { return fmt::format("{:.1f}", compare::kKlPercentiles[i]); }

// A figure written with Num: null (or absent) reads as NaN.
double NaNable(const json& j, std::string_view key) { return read::Opt<double>(j, key).value_or(compare::kNaN); }
std::pair<double, double> CiOf(const json& j, std::string_view key) {
  const auto ci = read::Interval2(j, key);
  return ci ? std::pair<double, double>{(*ci)[0], (*ci)[1]} : std::pair<double, double>{0, 1};
}

json KlJson(const compare::KlStats& s) {
  json pct = json::object();
  for (size_t i = 0; i < compare::kKlPercentiles.size(); ++i) pct[KlKey(i)] = Num(s.percentiles[i]);
  return {{"mean", Num(s.mean)}, {"median", Num(s.median)}, {"p99", Num(s.p99)},
          {"max", Num(s.max)},   {"min", Num(s.min)},       {"percentiles", pct}};
}
compare::KlStats KlFrom(const json& j) {
  compare::KlStats s;
  s.mean = NaNable(j, "mean"), s.median = NaNable(j, "median"), s.p99 = NaNable(j, "p99");
  s.max = NaNable(j, "max"), s.min = NaNable(j, "min");
  for (size_t i = 0; i < compare::kKlPercentiles.size(); ++i) s.percentiles[i] = NaNable(Sub(j, "percentiles"), KlKey(i));
  return s;
}

json SideJson(const std::string& path, const std::string& store, int32_t topk) {
  return {{"path", path}, {"store", store}, {"topk", topk}};
}

json WindowJson(const WindowStats& w) {
  return {{"index", w.index},         {"begin", w.begin},          {"end", w.end},
          {"probes", w.probes},       {"flips", w.flips},          {"flip_rate", w.flip_rate},
          {"flip_rate_ci", Ci(w.flip_rate_ci)},                    {"kl_mean", Num(w.kl_mean)},
          {"kl_median", Num(w.kl_median)},                         {"kl_p99", Num(w.kl_p99)},
          {"kl_max", Num(w.kl_max)}};
}
WindowStats WindowFrom(const json& j) {
  WindowStats w;
  w.index = Get<int64_t>(j, "index", 0), w.begin = Get<int64_t>(j, "begin", 0), w.end = Get<int64_t>(j, "end", 0);
  w.probes = Get<int64_t>(j, "probes", 0), w.flips = Get<int64_t>(j, "flips", 0);
  w.flip_rate = Get(j, "flip_rate", 0.0), w.flip_rate_ci = CiOf(j, "flip_rate_ci");
  w.kl_mean = NaNable(j, "kl_mean"), w.kl_median = NaNable(j, "kl_median");
  w.kl_p99 = NaNable(j, "kl_p99"), w.kl_max = NaNable(j, "kl_max");
  return w;
}

// One flip; token texts and context are null when the comparison has no text.
json FlipJson(const FlipRecord& f, bool have_text) {
  auto text = [&](const std::string& s) { return have_text ? json(s) : json(nullptr); };
  return {{"position", f.position},
          {"window", f.window},
          {"span", OrNull(f.span)},
          {"span_kind", OrNull(f.span_kind)},
          {"base_token", f.base_token},
          {"base_text", text(f.base_text)},
          {"base_prob", Num(f.base_prob)},
          {"cand_token", f.cand_token},
          {"cand_text", text(f.cand_text)},
          {"cand_prob", Num(f.cand_prob)},
          {"cand_prob_of_base_token", Num(f.cand_prob_of_base_token)},
          {"base_margin", Num(f.base_margin)},
          {"kl", Num(f.kl)},
          {"class", f.klass},
          {"transcript_token", f.transcript_token},
          {"context", text(f.context)}};
}
FlipRecord FlipFrom(const json& j) {
  FlipRecord f;
  f.position = Get<int32_t>(j, "position", 0), f.window = Get<int64_t>(j, "window", 0);
  f.span = Str(j, "span"), f.span_kind = Str(j, "span_kind");
  f.base_token = Get<int32_t>(j, "base_token", -1), f.cand_token = Get<int32_t>(j, "cand_token", -1);
  f.transcript_token = Get<int32_t>(j, "transcript_token", -1);
  f.base_text = Str(j, "base_text"), f.cand_text = Str(j, "cand_text"), f.context = Str(j, "context");
  f.base_prob = NaNable(j, "base_prob"), f.cand_prob = NaNable(j, "cand_prob");
  f.cand_prob_of_base_token = NaNable(j, "cand_prob_of_base_token"), f.base_margin = NaNable(j, "base_margin");
  f.kl = NaNable(j, "kl"), f.klass = Str(j, "class");
  return f;
}

json OverallJson(const OverallStats& o) {
  return {{"probes", o.probes},
          {"flips", o.flips},
          {"flip_rate", o.flip_rate},
          {"flip_rate_ci", Ci(o.flip_rate_ci)},
          {"confident_flips", o.confident_flips},
          {"uncertain_flips", o.uncertain_flips},
          {"same_top1_rate", o.same_top1_rate},
          {"top5_agree", Num(o.top5_agree)},
          {"top10_agree", Num(o.top10_agree)},
          {"js_mean", Num(o.js_mean)},
          {"kl_base_cand", KlJson(o.kl_base_cand)},
          {"kl_cand_base", KlJson(o.kl_cand_base)}};
}
OverallStats OverallFrom(const json& j) {
  OverallStats o;
  o.probes = Get<int64_t>(j, "probes", 0), o.flips = Get<int64_t>(j, "flips", 0);
  o.flip_rate = Get(j, "flip_rate", 0.0), o.flip_rate_ci = CiOf(j, "flip_rate_ci");
  o.confident_flips = Get<int64_t>(j, "confident_flips", 0), o.uncertain_flips = Get<int64_t>(j, "uncertain_flips", 0);
  o.same_top1_rate = NaNable(j, "same_top1_rate");
  o.top5_agree = NaNable(j, "top5_agree"), o.top10_agree = NaNable(j, "top10_agree"), o.js_mean = NaNable(j, "js_mean");
  o.kl_base_cand = KlFrom(Sub(j, "kl_base_cand")), o.kl_cand_base = KlFrom(Sub(j, "kl_cand_base"));
  return o;
}

// The two sides' settings, paths and the timing of the metric pass.
void ReadSides(const json& j, Comparison& c) {
  const json &base = Sub(j, "base"), &cand = Sub(j, "cand");
  c.base_path = Str(base, "path"), c.base_store = Str(base, "store"), c.base_topk = Get<int32_t>(base, "topk", 0);
  c.cand_path = Str(cand, "path"), c.cand_store = Str(cand, "store"), c.cand_topk = Get<int32_t>(cand, "topk", 0);
  c.base_flags = Str(Sub(j, "flags"), "base"), c.cand_flags = Str(Sub(j, "flags"), "cand");
  c.base_replay = Str(Sub(j, "replay"), "base"), c.cand_replay = Str(Sub(j, "replay"), "cand");
  const json& kp = Sub(j, "kernel_path");
  c.base_kernel_path = Str(kp, "base"), c.cand_kernel_path = Str(kp, "cand");
  c.kernel_paths_differ = Get(kp, "differ", false);
  const json& t = Sub(j, "timing");
  c.seconds = Get(t, "seconds", 0.0), c.threads = Get(t, "threads", 0), c.isa = Str(t, "isa");
  c.logit_bytes = Get<uint64_t>(t, "logit_bytes", 0);
}

}  // namespace

double compare::Percentile(std::span<const double> sorted, double q) {
  if (sorted.empty()) return kNaN;
  const double pos = q / 100.0 * double(sorted.size() - 1);
  const size_t lo = size_t(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - double(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

const char* KlDirectionText() { return "KL(base||cand) = sum P_base (log P_base - log P_cand)"; }

const char* KlEstimateText(bool truncated) {
  return truncated ? "tail bucket: ids both captures know, plus one bucket for the rest (a lower bound)"
                   : "exact: full vocabulary";
}

bool HaveText(const Comparison& c) {
  for (const auto& f : c.flips)
    if (!f.base_text.empty() || !f.context.empty()) return true;
  return false;
}

json WindowsToJson(const std::vector<WindowStats>& windows) {
  json out = json::array();
  for (const WindowStats& w : windows) out.push_back(WindowJson(w));
  return out;
}

std::vector<WindowStats> WindowsFromJson(const json& windows) {
  std::vector<WindowStats> out;
  if (windows.is_array())
    for (const json& w : windows) out.push_back(WindowFrom(w));
  return out;
}

json ToJson(const Comparison& c) {
  json flips = json::array();
  const bool have_text = HaveText(c);
  for (const FlipRecord& f : c.flips) flips.push_back(FlipJson(f, have_text));
  json j = {
      {"base", SideJson(c.base_path, c.base_store, c.base_topk)},
      {"cand", SideJson(c.cand_path, c.cand_store, c.cand_topk)},
      {"kl_direction", c.kl_direction.empty() ? KlDirectionText() : c.kl_direction},
      {"kl_estimate", c.kl_estimate.empty() ? KlEstimateText(c.truncated) : c.kl_estimate},
      {"truncated", c.truncated},
      {"flags", {{"base", OrNull(c.base_flags)}, {"cand", OrNull(c.cand_flags)}}},
      {"replay", {{"base", c.base_replay}, {"cand", c.cand_replay}}},
      {"kernel_path",
       {{"base", OrNull(c.base_kernel_path)}, {"cand", OrNull(c.cand_kernel_path)}, {"differ", c.kernel_paths_differ}}},
      {"window", c.window},
      {"probes_compared", c.probes_compared},
      {"probes_skipped_base", c.probes_skipped_base},
      {"probes_skipped_cand", c.probes_skipped_cand},
      {"bit_identical", c.bit_identical},
      {"all_bit_identical", c.bit_identical == c.probes_compared},
      {"overall", OverallJson(c.overall)},
      {"windows", WindowsToJson(c.windows)},
      {"flips", std::move(flips)},
      {"timing",
       {{"seconds", c.seconds},
        {"threads", c.threads},
        {"isa", c.isa},
        {"logit_bytes", c.logit_bytes},
        {"gb_per_s", c.seconds > 0 ? double(c.logit_bytes) / c.seconds / 1e9 : 0.0}}},
  };
  read::KeepExtra(j, c.extra);
  return j;
}

void to_json(json& j, const Comparison& c) { j = ToJson(c); }

Comparison ComparisonFromJson(const json& j) {
  Comparison c;
  ReadSides(j, c);
  c.truncated = Get(j, "truncated", false);
  c.kl_direction = Str(j, "kl_direction"), c.kl_estimate = Str(j, "kl_estimate");
  c.window = Get<int64_t>(j, "window", 0);
  c.probes_compared = Get<int64_t>(j, "probes_compared", 0);
  c.probes_skipped_base = Get<int64_t>(j, "probes_skipped_base", 0);
  c.probes_skipped_cand = Get<int64_t>(j, "probes_skipped_cand", 0);
  c.bit_identical = Get<int64_t>(j, "bit_identical", 0);
  c.overall = OverallFrom(Sub(j, "overall"));
  c.windows = WindowsFromJson(Sub(j, "windows"));
  const json& flips = Sub(j, "flips");
  if (flips.is_array())
    for (const json& f : flips) c.flips.push_back(FlipFrom(f));
  c.extra = read::Without(j, kKnown);
  return c;
}

}  // namespace flipscope
