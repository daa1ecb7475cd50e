// The comparison driver: checks the pair is comparable, pairs up the probe positions both hold,
// runs the row kernels on worker threads (each streaming rows from the mapped files into its own
// buffers), then reduces in probe order and describes every flip.
#include "compare/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <thread>

#include "capture/capture.h"
#include "util/util.h"

namespace flipscope {
namespace {

// A capture's settings as flags, after the ggml variables it ran under ("GGML_X=1 -fa on ..."):
// two captures with the same flags but another GGML_CUDA_DISABLE_FUSION compute differently.
std::string RanWith(const EngineRecord& engine) {
  const std::string env = EnvText(engine.env);
  return env.empty() || engine.flags.empty() ? env + engine.flags : env + " " + engine.flags;
}
using compare::ProbeMetrics;
using compare::RowSummary;
using compare::RowView;

// One side of the pair, read into a worker's buffers.
struct SideRow {
  std::vector<float> logits;
  RowView view;
  RowSummary summary;
};

// Reads row i of a capture; full rows are scanned once (NaN / +inf are refused here). Ids of a
// truncated row must lie inside the other side's vocabulary (vocab, 0 when unknown).
Status ReadSide(const CaptureReader& r, int64_t i, int32_t vocab, SideRow& s) {
  const int32_t pos = r.positions()[size_t(i)];
  s.view = RowView{};
  s.view.argmax = r.argmax()[size_t(i)];
  if (vocab > 0 && s.view.argmax >= vocab)
    return Status::Error(
        fmt::format("{}: probe at position {}: argmax {} is outside the other capture's {}-entry "
                    "vocabulary",
                    r.path(), pos, s.view.argmax, vocab));
  if (!r.truncated()) {
    s.logits.resize(size_t(r.n_vocab()));
    // Widen and scan straight from the mapping where the reader has one: one pass, no copy.
    const std::span<const uint8_t> stored = r.StoredRow(i);
    if (!stored.empty()) {
      s.summary = compare::ScanStoredRow(stored, r.store() == StoreDtype::kBF16, s.logits);
    } else {
      FS_RETURN_IF_ERROR(r.ReadRow(i, s.logits));
      s.summary = compare::ScanRow(s.logits);
    }
    s.view.logits = s.logits;
    if (!s.summary.finite)
      return Status::Error(
          fmt::format("{}: probe at position {}: the logits hold NaN or +inf (or no finite value)", r.path(), pos));
    return Status::Ok();
  }
  s.view.topk_ids = r.TopKIds(i);
  s.view.topk_logprobs = r.TopKLogprobs(i);
  for (size_t k = 0; k < s.view.topk_ids.size(); ++k) {
    const float lp = s.view.topk_logprobs[k];
    if (std::isnan(lp) || lp > 1e-3f)
      return Status::Error(fmt::format("{}: probe at position {}: top-k log-probability {} is not a log-probability",
                                       r.path(), pos, lp));
    if (vocab > 0 && s.view.topk_ids[k] >= vocab)
      return Status::Error(
          fmt::format("{}: probe at position {}: top-k id {} is outside the other capture's "
                      "{}-entry vocabulary",
                      r.path(), pos, s.view.topk_ids[k], vocab));
  }
  return Status::Ok();
}

bool SameBytes(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}
bool SameBytes(std::span<const int32_t> a, std::span<const int32_t> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

struct Worker {
  SideRow b, c;
  compare::RowScratch scratch;
};

Status MeasureProbe(const CaptureReader& base, const CaptureReader& cand, int64_t ib, int64_t ic, Worker& w,
                    ProbeMetrics& out) {
  FS_RETURN_IF_ERROR(ReadSide(base, ib, cand.truncated() ? 0 : cand.n_vocab(), w.b));
  FS_RETURN_IF_ERROR(ReadSide(cand, ic, base.truncated() ? 0 : base.n_vocab(), w.c));
  const RowView &vb = w.b.view, &vc = w.c.view;
  bool same = base.digest()[size_t(ib)] == cand.digest()[size_t(ic)] && vb.full() == vc.full();
  if (vb.full() && vc.full()) {
    out = compare::CompareFullRows(vb.logits, vc.logits, w.b.summary, w.c.summary, vb.argmax, vc.argmax, w.scratch);
    same = same && SameBytes(vb.logits, vc.logits);
  } else {
    out = compare::CompareTruncatedRows(vb, vc, vb.full() ? &w.b.summary : nullptr, vc.full() ? &w.c.summary : nullptr,
                                        w.scratch);
    same = same && SameBytes(vb.topk_ids, vc.topk_ids) && SameBytes(vb.topk_logprobs, vc.topk_logprobs);
  }
  out.position = base.positions()[size_t(ib)];
  out.identical = same && vb.argmax == vc.argmax;
  return Status::Ok();
}

// Runs MeasureProbe over every pair on worker threads. Workers claim chunks in index order, so
// when rows fail the error reported is always the one of the lowest probe index.
Status MeasureAll(const CaptureReader& base, const CaptureReader& cand, const ProbePairs& pairs,
                  const CompareOptions& options, std::vector<ProbeMetrics>& out, int& threads_used) {
  const int64_t n = int64_t(pairs.base.size());
  out.assign(size_t(n), ProbeMetrics{});
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  int64_t threads = std::clamp<int64_t>(options.threads > 0 ? options.threads : hw, 1, std::max<int64_t>(n, 1));
  threads_used = int(threads);
  constexpr int64_t kChunk = 4;
  std::atomic<int64_t> next{0}, done{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  int64_t error_index = n;
  Status error;
  Progress progress("compare", uint64_t(n), "probes");
  if (!options.log.bars) progress.Finish();
  auto work = [&](bool report) {
    Worker w;
    for (;;) {
      const int64_t begin = next.fetch_add(kChunk);
      if (begin >= n || failed.load()) break;
      const int64_t end = std::min(begin + kChunk, n);
      for (int64_t i = begin; i < end; ++i) {
        Status st = MeasureProbe(base, cand, pairs.base[size_t(i)], pairs.cand[size_t(i)], w, out[size_t(i)]);
        if (!st.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          if (i < error_index) error_index = i, error = st;
          failed = true;
          break;
        }
      }
      // Each row is read once: dropping its mapped pages keeps the resident memory bounded.
      base.ReleaseRows(pairs.base[size_t(begin)], pairs.base[size_t(end - 1)] + 1);
      cand.ReleaseRows(pairs.cand[size_t(begin)], pairs.cand[size_t(end - 1)] + 1);
      done += kChunk;
      if (report) progress.Update(uint64_t(std::min(done.load(), n)));
    }
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(work, false);
  work(true);
  for (auto& t : pool) t.join();
  progress.Finish();
  return error;
}

// About `chars` characters of the text before token position pos+1 (tokens [0, pos]); UTF-8
// sequences are never cut.
std::string Context(std::span<const int32_t> tokens, int32_t pos, const Detokenizer& detok, int chars) {
  std::string text;
  auto code_points = [](const std::string& s) {
    return std::count_if(s.begin(), s.end(), [](char ch) { return (static_cast<unsigned char>(ch) & 0xC0) != 0x80; });
  };
  for (int32_t p = pos; p >= 0 && code_points(text) < chars && pos - p < 4 * chars; --p)
    text = detok(tokens[size_t(p)]) + text;
  size_t cut = 0;
  for (int64_t extra = code_points(text) - chars; extra > 0; --extra) {
    ++cut;
    while (cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) ++cut;
  }
  return text.substr(cut);
}

FlipRecord DescribeFlip(const CaptureReader& base, const std::vector<Span>& spans, const ProbeMetrics& p,
                        const CompareOptions& options) {
  FlipRecord f;
  f.position = p.position;
  f.window = p.position / options.window;
  std::tie(f.span, f.span_kind) = compare::SpanAt(spans, p.position + 1);
  f.base_token = p.base_token;
  f.cand_token = p.cand_token;
  f.base_prob = p.base_prob;
  f.cand_prob = p.cand_prob;
  f.cand_prob_of_base_token = p.cand_prob_of_base;
  f.base_margin = p.base_margin;
  f.kl = p.kl_base_cand;
  f.klass = compare::FlipClass(p.base_prob, options);
  auto tokens = base.tokens();
  if (size_t(p.position) + 1 < tokens.size()) f.transcript_token = tokens[size_t(p.position) + 1];
  if (options.detokenize) {
    f.base_text = options.detokenize(p.base_token);
    f.cand_text = options.detokenize(p.cand_token);
    f.context = Context(tokens, p.position, options.detokenize, options.context_chars);
  }
  return f;
}

std::string StoreLabel(const CaptureReader& r) {
  return r.truncated() ? "topk" : r.store() == StoreDtype::kBF16 ? "bf16" : "f32";
}

uint64_t RowBytes(const CaptureReader& r) {
  if (r.truncated()) return uint64_t(r.topk()) * 8;
  return uint64_t(r.n_vocab()) * (r.store() == StoreDtype::kBF16 ? 2 : 4);
}

}  // namespace

Result<Comparison> Compare(const CaptureReader& base, const CaptureReader& cand, const CompareOptions& options) {
  if (options.window <= 0) return Status::Error(fmt::format("window must be positive (got {})", options.window));
  FS_RETURN_IF_ERROR(CheckSameWorkload(base, cand));
  const ProbePairs pairs = PairProbes(base.positions(), cand.positions());
  if (pairs.base.empty())
    return Status::Error(fmt::format("{} and {} hold no probe position in common", base.path(), cand.path()));
  Comparison c;
  c.base_path = base.path();
  c.cand_path = cand.path();
  c.base_store = StoreLabel(base);
  c.cand_store = StoreLabel(cand);
  c.base_topk = base.truncated() ? base.topk() : 0;
  c.cand_topk = cand.truncated() ? cand.topk() : 0;
  c.truncated = base.truncated() || cand.truncated();
  c.kl_direction = KlDirectionText(), c.kl_estimate = KlEstimateText(c.truncated);
  c.window = options.window;
  c.base_kernel_path = base.manifest().engine.kernel_path;
  c.cand_kernel_path = cand.manifest().engine.kernel_path;
  c.base_flags = RanWith(base.manifest().engine);
  c.cand_flags = RanWith(cand.manifest().engine);
  c.base_replay = NameOf(base.manifest().replay);
  c.cand_replay = NameOf(cand.manifest().replay);
  c.kernel_paths_differ =
      !c.base_kernel_path.empty() && !c.cand_kernel_path.empty() && c.base_kernel_path != c.cand_kernel_path;
  c.probes_compared = int64_t(pairs.base.size());
  c.probes_skipped_base = int64_t(base.positions().size()) - c.probes_compared;
  c.probes_skipped_cand = int64_t(cand.positions().size()) - c.probes_compared;
  const double t0 = NowSeconds();
  FS_RETURN_IF_ERROR(MeasureAll(base, cand, pairs, options, c.probes, c.threads));
  c.seconds = NowSeconds() - t0;
  c.isa = compare::KernelIsa();
  c.logit_bytes = uint64_t(c.probes_compared) * (RowBytes(base) + RowBytes(cand));
  const std::vector<Span>& spans = base.manifest().workload.spans;  // none when unreadable
  for (const auto& p : c.probes) {
    c.bit_identical += p.identical;
    if (p.flip) c.flips.push_back(DescribeFlip(base, spans, p, options));
  }
  c.overall = compare::ComputeOverall(c.probes, options);
  c.windows = compare::ComputeWindows(c.probes, options.window, int64_t(base.tokens().size()));
  return c;
}

Result<Comparison> CompareFiles(const std::string& base_path, const std::string& cand_path,
                                const CompareOptions& options) {
  FS_ASSIGN_OR_RETURN(auto base, CaptureReader::Open(base_path));
  FS_ASSIGN_OR_RETURN(auto cand, CaptureReader::Open(cand_path));
  return Compare(*base, *cand, options);
}

}  // namespace flipscope
