// compare: FP64 metrics between a base capture and a candidate capture of the same workload —
// top-1 flips (on the stored native-precision argmax), KL in both directions, JS, top-k
// agreement, per-window flip rates with Wilson intervals, KL percentiles, the list of flips
// with their spans and text, and bit-for-bit repeatability. Rows are streamed from the mapped
// files by worker threads; every reduction runs in probe order, so results do not depend on the
// thread count. Definitions and the JSON contract: docs/compare.md.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "results/comparison.h"
#include "util/status.h"
#include "util/util.h"
#include "workload/workload.h"

namespace flipscope {

class CaptureReader;

// ---- Options ---------------------------------------------------------------------------------

// Token id -> text. Optional everywhere; without it flips carry ids only.
using Detokenizer = std::function<std::string(int32_t)>;

struct CompareOptions {
  int64_t window = 8192;   // window i covers token positions [i*window, (i+1)*window)
  double confident = 0.9;  // a flip is "confident" when the base top-1 probability >= this
  double uncertain = 0.5;  // ... and "uncertain" when it is < this (else "moderate")
  int threads = 0;         // worker threads; 0 = std::thread::hardware_concurrency()
  int context_chars = 60;  // preceding text shown with each flip (needs detokenize)
  Detokenizer detokenize;  // optional
  Log log;                 // status lines and progress bars (bars on a terminal only)
};

// ---- Building blocks: pure functions over rows and values (namespace compare) ----------------

namespace compare {

// One row of a capture: full-vocabulary logits, or a truncated top-k list.
struct RowView {
  std::span<const float> logits;         // full rows (F32, or BF16 widened); empty when truncated
  std::span<const int32_t> topk_ids;     // truncated rows: ids by descending log-probability
  std::span<const float> topk_logprobs;  // their log-probabilities
  int32_t argmax = -1;                   // the stored greedy token
  bool full() const { return !logits.empty(); }
};

// What one scan of a full row finds: its maximum and its top-10 (ties to the lowest id).
struct RowSummary {
  double max = 0;
  bool finite = true;  // false when a logit is NaN or +inf, or none is finite
  int count = 0;       // entries in top (min(kTopK, row length))
  std::array<int32_t, kTopK> top_ids{};
  std::array<float, kTopK> top_vals{};
  std::span<const int32_t> ids() const { return {top_ids.data(), size_t(count)}; }
};

// The instruction set the row kernels run on: "avx512", "avx2" or "baseline" (the widest the
// CPU has, or a narrower one named by FLIPSCOPE_COMPARE_ISA).
const char* KernelIsa();
// Switches the row kernels to isa (for tests and benchmarks); error when unknown or unsupported.
Status SetKernelIsa(const std::string& isa);

// Scans a full row once (vectorised): max, top-10 and the NaN / +inf check.
RowSummary ScanRow(std::span<const float> row);
// Widens a row as stored (little-endian F32, or BF16 when bf16; stored.size() == out.size() * 4
// or * 2) into out and scans it, in one pass.
RowSummary ScanStoredRow(std::span<const uint8_t> stored, bool bf16, std::span<float> out);

// max(0, sum): a divergence is never negative; the rounding of a sum over nearly equal rows can be.
inline double NonNegative(double divergence) { return divergence > 0 ? divergence : 0.0; }

// Reusable per-thread buffers, sized on first use.
struct RowScratch {
  std::vector<double> eb, ec;
  std::vector<std::pair<int32_t, float>> sorted_b, sorted_c;
};

// Metrics of two full rows of equal length with finite summaries (from ScanRow); FP64
// log-softmax, exact over the whole vocabulary.
ProbeMetrics CompareFullRows(std::span<const float> base, std::span<const float> cand, const RowSummary& sb,
                             const RowSummary& sc, int32_t base_argmax, int32_t cand_argmax, RowScratch& scratch);

// Metrics when either side is truncated, by the tail-bucket estimate: the ids whose
// log-probability both sides know are kept, every other id is lumped into one bucket per side
// (mass 1 - known mass, at least kTailFloor). Full sides need their ScanRow summary.
inline constexpr double kTailFloor = 1e-12;
ProbeMetrics CompareTruncatedRows(const RowView& base, const RowView& cand, const RowSummary* sb, const RowSummary* sc,
                                  RowScratch& scratch);

// log(sum exp(row)) and the entropy -sum p log p of softmax(row), FP64, for a row with the
// given maximum; terms buffers exp(row - max).
std::pair<double, double> LogSumExpAndEntropy(std::span<const float> row, double max, std::vector<double>& terms);
// |first k of a ∩ first k of b| / k; NaN when either holds fewer than k ids.
double TopOverlap(std::span<const int32_t> a, std::span<const int32_t> b, size_t k);
// row[argmax] - the largest other value of the summary's top list (the base margin); NaN if none.
double FullMargin(std::span<const float> row, const RowSummary& s, int32_t argmax);

// ---- Statistics ------------------------------------------------------------------------------

// The 95% Wilson score interval of k successes in n trials; {0, 1} when n == 0.
std::pair<double, double> WilsonInterval(int64_t k, int64_t n, double z = 1.959963984540054);

// Statistics of a set of KL values (any order); all zero when empty.
KlStats ComputeKlStats(std::vector<double> values);

// ---- The comparison (its type and JSON: results/comparison.h) -------------------------------

// The windows holding at least one probe (probes sorted by position); the last window's end is
// clamped to n_tokens when n_tokens > 0.
std::vector<WindowStats> ComputeWindows(std::span<const ProbeMetrics> probes, int64_t window, int64_t n_tokens);
// Overall statistics of per-probe metrics.
OverallStats ComputeOverall(std::span<const ProbeMetrics> probes, const CompareOptions& options);
// "confident", "uncertain" or "moderate" for a flip whose base top-1 probability is p.
std::string FlipClass(double p, const CompareOptions& options);

// The innermost span containing token position pos (workload's InnermostSpan) as its label
// (SpanLabelAt, else "<kind> #<index>") and kind; {"", ""} when none.
std::pair<std::string, std::string> SpanAt(const std::vector<Span>& spans, int32_t pos);

}  // namespace compare

// ---- Clustered statistics: sessions and passages (docs/compare.md, "Pooled over sessions") ----

// One block of consecutive probes (a passage), as the sums of a ratio's numerator and denominator
// (flips and probes, KL and probes, damaging forks and forks followed).
struct RatioBlock {
  double num = 0, den = 0;
};
// One session: its weight and its probes in blocks, in order.
struct RatioCluster {
  double weight = 1;
  std::vector<RatioBlock> blocks;
};
struct BootstrapOptions {
  int replicates = 2000;
  uint64_t seed = 0x5eed;  // the run is a pure function of the data and the seed
  double level = 0.95;
};
// A pooled ratio and its interval.
struct ClusteredEstimate {
  double value = 0;                 // sum w*num / sum w*den over every block; 0 when the denominator is 0
  std::pair<double, double> ci{0, 0};
  int clusters = 0;                 // sessions with a denominator
};
// Blocks of `block` consecutive probes (the last may be shorter) from per-probe numerators, one
// probe = denominator 1.
std::vector<RatioBlock> BlocksOf(std::span<const double> per_probe, int block);
// The weighted ratio over every cluster and its two-stage bootstrap interval: each replicate draws
// the sessions with replacement, then inside each drawn session its blocks with replacement; the
// percentile interval of the replicates is widened about the estimate by t(S-1)/z for S >= 2
// sessions (a bootstrap over few clusters is too narrow). Deterministic for a seed.
ClusteredEstimate ClusteredRatio(std::span<const RatioCluster> clusters, const BootstrapOptions& options = {});
// The same for a proportion (flips of probes): never narrower than the Wilson interval of the
// pooled counts (clustering can only widen it), so that 0 flips still has an upper bound.
ClusteredEstimate ClusteredRate(std::span<const RatioCluster> clusters, const BootstrapOptions& options = {});
// The naive interval: Wilson's over the pooled weighted counts, every probe independent.
std::pair<double, double> NaiveRateInterval(std::span<const RatioCluster> clusters);
// The two-sided Student t quantile at level for df degrees of freedom (1.96 at 95% as df grows).
double StudentT(int df, double level = 0.95);

// Compares two open captures. Refuses different tokens or vocabularies (naming both files) and
// rows holding NaN / +inf (naming the file and position).
Result<Comparison> Compare(const CaptureReader& base, const CaptureReader& cand, const CompareOptions& options);
// Opens both files and compares them.
Result<Comparison> CompareFiles(const std::string& base_path, const std::string& cand_path,
                                const CompareOptions& options);

// ---- Output (the JSON document: results/comparison.h) ----------------------------------------

// A terminal table, GitHub Markdown, or CSV (one row per window plus an "all" row) of comparisons.
std::string RenderCompareTable(const std::vector<Comparison>& cs);
std::string RenderCompareMarkdown(const std::vector<Comparison>& cs);
std::string RenderCompareCsv(const std::vector<Comparison>& cs);

// ---- Gates for CI --------------------------------------------------------------------------------

struct Gate {
  std::optional<double> max_flip_rate;  // fraction
  std::optional<double> max_kl_mean;    // mean KL(base||cand)
};
// "0.005", "0.5%" -> 0.005; error on anything else or outside [0, 1].
Result<double> ParseRate(const std::string& text);
// One line per exceeded gate ("cand.safetensors: flip rate 0.61% > 0.50%"); empty when passed.
std::vector<std::string> GateViolations(const Comparison& c, const Gate& gate);

}  // namespace flipscope
