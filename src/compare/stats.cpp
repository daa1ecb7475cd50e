// Statistics over per-probe metrics: Wilson intervals, percentiles (numpy's linear rule), KL
// summaries, windows, the overall figures, flip classes, spans and the CI gates.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "compare/compare.h"
#include "util/wilson.h"

namespace flipscope {
namespace compare {

std::pair<double, double> WilsonInterval(int64_t k, int64_t n, double z) { return WilsonScore(double(k), double(n), z); }

KlStats ComputeKlStats(std::vector<double> values) {
  KlStats s;
  if (values.empty()) return s;
  double sum = 0;
  for (double v : values) sum += v;  // in probe order: independent of the thread count
  s.mean = sum / double(values.size());
  std::sort(values.begin(), values.end());
  s.median = Percentile(values, 50);
  s.p99 = Percentile(values, 99);
  s.max = values.back();
  s.min = values.front();
  for (size_t i = 0; i < kKlPercentiles.size(); ++i) s.percentiles[i] = Percentile(values, kKlPercentiles[i]);
  return s;
}

std::vector<WindowStats> ComputeWindows(std::span<const ProbeMetrics> probes, int64_t window, int64_t n_tokens) {
  std::vector<WindowStats> out;
  if (window <= 0) return out;
  // Windows holding at least one probe, in order; probes are sorted by position.
  for (size_t i = 0; i < probes.size();) {
    const int64_t index = probes[i].position / window;
    size_t j = i;
    std::vector<double> kl;
    WindowStats w;
    for (; j < probes.size() && probes[j].position / window == index; ++j) {
      w.flips += probes[j].flip;
      kl.push_back(probes[j].kl_base_cand);
    }
    w.index = index;
    w.begin = index * window;
    w.end = n_tokens > 0 ? std::min(w.begin + window, n_tokens) : w.begin + window;
    w.probes = int64_t(j - i);
    w.flip_rate = double(w.flips) / double(w.probes);
    w.flip_rate_ci = WilsonInterval(w.flips, w.probes);
    const KlStats s = ComputeKlStats(std::move(kl));
    w.kl_mean = s.mean;
    w.kl_median = s.median;
    w.kl_p99 = s.p99;
    w.kl_max = s.max;
    out.push_back(w);
    i = j;
  }
  return out;
}

std::string FlipClass(double p, const CompareOptions& options) {
  if (p >= options.confident) return "confident";
  if (p < options.uncertain) return "uncertain";
  return "moderate";
}

// Mean of a field over the probes; NaN when any probe's is NaN (a side held fewer ids than k).
static double MeanOrNaN(std::span<const ProbeMetrics> probes, double ProbeMetrics::*field) {
  double sum = 0;
  for (const auto& p : probes) sum += p.*field;
  return probes.empty() ? kNaN : sum / double(probes.size());
}

OverallStats ComputeOverall(std::span<const ProbeMetrics> probes, const CompareOptions& options) {
  OverallStats o;
  o.probes = int64_t(probes.size());
  std::vector<double> kl_bc, kl_cb;
  double js = 0;
  for (const auto& p : probes) {
    if (p.flip) {
      ++o.flips;
      std::string k = FlipClass(p.base_prob, options);
      o.confident_flips += k == "confident";
      o.uncertain_flips += k == "uncertain";
    }
    kl_bc.push_back(p.kl_base_cand);
    kl_cb.push_back(p.kl_cand_base);
    js += p.js;
  }
  o.flip_rate = o.probes ? double(o.flips) / double(o.probes) : 0.0;
  o.flip_rate_ci = WilsonInterval(o.flips, o.probes);
  o.same_top1_rate = o.probes ? 1.0 - o.flip_rate : 0.0;
  o.top5_agree = MeanOrNaN(probes, &ProbeMetrics::top5);
  o.top10_agree = MeanOrNaN(probes, &ProbeMetrics::top10);
  o.js_mean = o.probes ? js / double(o.probes) : 0.0;
  o.kl_base_cand = ComputeKlStats(std::move(kl_bc));
  o.kl_cand_base = ComputeKlStats(std::move(kl_cb));
  return o;
}

std::pair<std::string, std::string> SpanAt(const std::vector<Span>& spans, int32_t pos) {
  const Span* s = InnermostSpan(spans, pos);
  if (s == nullptr) return {"", ""};
  std::string label = SpanLabelAt(spans, pos);
  const std::string kind(NameOf(s->kind));
  if (label.empty()) label = fmt::format("{} #{}", kind, s->index);
  return {label, kind};
}

}  // namespace compare

Result<double> ParseRate(const std::string& text) {
  std::string s = text;
  bool percent = !s.empty() && s.back() == '%';
  if (percent) s.pop_back();
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (...) {
    used = 0;
  }
  if (s.empty() || used != s.size() || !std::isfinite(v))
    return Status::Error(fmt::format("'{}' is not a rate (e.g. 0.005 or 0.5%)", text));
  if (percent) v /= 100.0;
  if (v < 0 || v > 1) return Status::Error(fmt::format("'{}' is not a rate between 0 and 1 (or 0% and 100%)", text));
  return v;
}

std::vector<std::string> GateViolations(const Comparison& c, const Gate& gate) {
  std::vector<std::string> out;
  if (gate.max_flip_rate && c.overall.flip_rate > *gate.max_flip_rate)
    out.push_back(fmt::format("{}: flip rate {:.3f}% ({} of {}) > {:.3f}%", c.cand_path, 100 * c.overall.flip_rate,
                              c.overall.flips, c.overall.probes, 100 * *gate.max_flip_rate));
  if (gate.max_kl_mean && c.overall.kl_base_cand.mean > *gate.max_kl_mean)
    out.push_back(fmt::format("{}: mean KL(base||cand) {:.6g} > {:.6g}", c.cand_path, c.overall.kl_base_cand.mean,
                              *gate.max_kl_mean));
  return out;
}

}  // namespace flipscope
