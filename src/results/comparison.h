// The compare stage's result, typed (docs/compare.md): the two captures, the figures over every
// probe, per window and per flip. The compare stage makes it; this file alone turns it into
// compare's JSON document (`flipscope compare --json`, results.json comparisons[].compare) and back.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace flipscope {

namespace compare {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr int kTopK = 10;  // the largest k of the top-k agreement (k = 1, 5, 10)

// Everything measured at one probe. NaN marks a value a truncated capture cannot give.
struct ProbeMetrics {
  int32_t position = 0;
  int32_t base_token = -1, cand_token = -1;  // the stored argmax of each side
  bool flip = false;                         // base_token != cand_token
  bool identical = false;                    // digests and row values bit-for-bit equal
  // The divergences are >= 0: a sum that rounds below 0 (nearly equal rows) is reported as 0.
  double kl_base_cand = 0;           // KL(base||cand) = sum P_b (log P_b - log P_c)
  double kl_cand_base = 0;           // KL(cand||base)
  double js = 0;                     // Jensen-Shannon divergence (natural log)
  double top5 = kNaN, top10 = kNaN;  // |topk_b ∩ topk_c| / k
  double base_prob = kNaN;           // P_b(base_token)
  double base_margin = kNaN;         // log P_b(base_token) - max_{v != base_token} log P_b(v)
  double base_entropy = kNaN;        // -sum P_b log P_b (nats)
  double cand_prob = kNaN;           // P_c(cand_token)
  double cand_prob_of_base = kNaN;   // P_c(base_token)
};

// The KL percentiles llama-perplexity prints, as JSON keys "99.9", "99.0", ... "0.1".
inline constexpr std::array<double, 9> kKlPercentiles = {99.9, 99.0, 95.0, 90.0, 50.0, 10.0, 5.0, 1.0, 0.1};

// Percentile q in [0, 100] of sorted values by linear interpolation (numpy's default and
// llama-perplexity's rule); NaN when empty.
double Percentile(std::span<const double> sorted, double q);

struct KlStats {
  double mean = 0, median = 0, p99 = 0, max = 0, min = 0;
  std::array<double, kKlPercentiles.size()> percentiles{};
};

}  // namespace compare

// The figures of one window of positions.
struct WindowStats {
  int64_t index = 0, begin = 0, end = 0;  // positions [begin, end)
  int64_t probes = 0, flips = 0;
  double flip_rate = 0;
  std::pair<double, double> flip_rate_ci{0, 1};
  double kl_mean = 0, kl_median = 0, kl_p99 = 0, kl_max = 0;  // KL(base||cand)
};

// The figures over every compared probe.
struct OverallStats {
  int64_t probes = 0, flips = 0, confident_flips = 0, uncertain_flips = 0;
  double flip_rate = 0;
  std::pair<double, double> flip_rate_ci{0, 1};
  double same_top1_rate = 0;                                       // llama-perplexity's "Same top p"
  double top5_agree = compare::kNaN, top10_agree = compare::kNaN;  // means; NaN when a side holds fewer ids
  double js_mean = 0;
  compare::KlStats kl_base_cand, kl_cand_base;
};

// One flip: a probe whose greedy tokens differ.
struct FlipRecord {
  int32_t position = 0;
  int64_t window = 0;
  std::string span, span_kind;  // innermost workload span containing position+1; "" when none
  int32_t base_token = -1, cand_token = -1;
  int32_t transcript_token = -1;              // the workload's own token at position+1
  std::string base_text, cand_text, context;  // "" without a detokenizer
  double base_prob = compare::kNaN, cand_prob = compare::kNaN, cand_prob_of_base_token = compare::kNaN,
         base_margin = compare::kNaN;
  double kl = 0;      // KL(base||cand) at this probe
  std::string klass;  // "confident" | "moderate" | "uncertain"
};

// A candidate capture against a base capture of the same tokens.
struct Comparison {
  std::string base_path, cand_path;
  std::string base_store, cand_store;  // "f32", "bf16" or "topk"
  int32_t base_topk = 0, cand_topk = 0;
  bool truncated = false;  // either side is a top-k capture: every KL is a tail-bucket estimate
  // What KL(base||cand) sums and how it was estimated, in words ("" writes KlDirectionText() and
  // KlEstimateText(truncated)); a document read keeps its own.
  std::string kl_direction, kl_estimate;
  int64_t probes_compared = 0, probes_skipped_base = 0, probes_skipped_cand = 0;
  int64_t bit_identical = 0;  // probes whose rows are bit-for-bit identical (digest and values)
  int64_t window = 0;
  // The CPU kernel paths of the two captures (the manifests' engine.kernel_path.summary; "" when
  // a capture does not record one, e.g. a server or a Python writer). A different path changes
  // the numbers like a knob does, so compare names it when they differ.
  std::string base_kernel_path, cand_kernel_path;
  bool kernel_paths_differ = false;
  // The settings each capture ran with, as flags (the manifests' engine.flags: effective values,
  // e.g. "-fa on" where "-fa auto" was asked; "" when a capture does not record them).
  std::string base_flags, cand_flags;
  // How each capture computed the transcript: "prefill" or "served" (the manifests' knobs.replay;
  // a capture that does not record one was a prefill, the only replay before served existed).
  std::string base_replay, cand_replay;
  OverallStats overall;
  std::vector<WindowStats> windows;
  std::vector<FlipRecord> flips;
  std::vector<compare::ProbeMetrics> probes;  // every compared probe, by position (not in the JSON)
  double seconds = 0;                         // wall time of the metric pass
  int threads = 0;                            // worker threads it ran on
  std::string isa;                            // the row kernels' instruction set (KernelIsa())
  uint64_t logit_bytes = 0;                   // bytes of logits read from both files
  // Fields of a document this version does not know, kept as read and written back (forward
  // compatibility of files).
  nlohmann::json extra = nlohmann::json::object();
};

// The document's "kl_direction": what KL(base||cand) sums.
const char* KlDirectionText();
// The document's "kl_estimate": exact over the full vocabulary, or the tail-bucket estimate.
const char* KlEstimateText(bool truncated);
// Whether its flips carry token text (the comparison had a detokenizer).
bool HaveText(const Comparison& c);
// The JSON contract (docs/compare.md); NaN becomes null.
nlohmann::json ToJson(const Comparison& c);
void to_json(nlohmann::json& j, const Comparison& c);
// Windows as compare's document writes them ("windows"), and back (tolerant: what is not an
// array reads as none).
nlohmann::json WindowsToJson(const std::vector<WindowStats>& windows);
std::vector<WindowStats> WindowsFromJson(const nlohmann::json& windows);
// Reads compare's JSON document; never fails: what is missing or mistyped reads as the default
// (NaN for figures a truncated capture cannot give), unknown fields go to extra.
Comparison ComparisonFromJson(const nlohmann::json& j);

}  // namespace flipscope
