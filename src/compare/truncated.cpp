// The tail-bucket estimate for pairs where either side is a truncated (top-k) capture. Both
// distributions are coarsened to the same partition of the vocabulary — every id whose
// log-probability both sides know, plus one bucket holding everything else — and compared on
// it. By the data-processing inequality each KL of the coarsened pair is a lower bound of the
// true KL (up to the bucket floor), which is why every such KL is labelled truncated.
#include <algorithm>
#include <cmath>

#include "compare/compare.h"

namespace flipscope::compare {
namespace {

// What one side knows: log P(v) for every id of a full row, or for its top-k ids.
class Known {
 public:
  Known(const RowView& row, const RowSummary* summary, std::vector<std::pair<int32_t, float>>& sorted,
        std::vector<double>& terms)
      : row_(row), summary_(summary) {
    if (row.full()) {
      std::tie(lse_, entropy_) = LogSumExpAndEntropy(row.logits, summary->max, terms);
      return;
    }
    // Sorted by id with duplicates dropped (the first, most probable, entry of an id is kept).
    sorted.clear();
    for (size_t i = 0; i < row.topk_ids.size(); ++i) sorted.emplace_back(row.topk_ids[i], row.topk_logprobs[i]);
    std::stable_sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.first < b.first; });
    sorted.erase(std::unique(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.first == b.first; }),
                 sorted.end());
    sorted_ = sorted;
    double mass = 0;
    entropy_ = 0;
    for (auto [id, lp] : sorted_) {
      const double p = std::exp(double(lp));
      mass += p;
      if (p > 0) entropy_ -= p * double(lp);
    }
    const double rest = std::max(1.0 - mass, 0.0);  // the bucket of everything outside the top-k
    if (rest > 0) entropy_ -= rest * std::log(rest);
  }

  // log P(id), or NaN when this side does not know it.
  double LogProb(int32_t id) const {
    if (row_.full()) return double(row_.logits[size_t(id)]) - lse_;
    auto it = std::lower_bound(sorted_.begin(), sorted_.end(), id, [](auto& e, int32_t v) { return e.first < v; });
    return it != sorted_.end() && it->first == id ? double(it->second) : kNaN;
  }
  // Ids by descending probability (the top-10 of a full row).
  std::span<const int32_t> Top() const { return row_.full() ? summary_->ids() : row_.topk_ids; }
  // The known ids in id order (truncated sides only).
  const std::span<const std::pair<int32_t, float>>& Listed() const { return sorted_; }
  double Entropy() const { return entropy_; }

  // log P(argmax) - the largest other known log-probability.
  double Margin(int32_t argmax) const {
    if (row_.full()) return FullMargin(row_.logits, *summary_, argmax);
    const double top = LogProb(argmax);
    double other = -INFINITY;
    bool any = false;
    for (auto [id, lp] : sorted_)
      if (id != argmax) other = std::max(other, double(lp)), any = true;
    return any ? top - other : kNaN;
  }

 private:
  const RowView& row_;
  const RowSummary* summary_;
  std::span<const std::pair<int32_t, float>> sorted_;
  double lse_ = 0, entropy_ = 0;
};

// Running sums of the divergences over the cells of a partition.
struct Cells {
  double kl_bc = 0, kl_cb = 0, js = 0;
  void Add(double pb, double lb, double pc, double lc) {
    if (pb > 0) kl_bc += pb * (lb - lc);
    if (pc > 0) kl_cb += pc * (lc - lb);
    const double m = 0.5 * (pb + pc);
    if (m > 0 && pb != pc) {  // pb = pc: the JS term is exactly 0 (see rows.cpp)
      const double lm = std::log(m);
      js += 0.5 * ((pb > 0 ? pb * (lb - lm) : 0.0) + (pc > 0 ? pc * (lc - lm) : 0.0));
    }
  }
};

}  // namespace

ProbeMetrics CompareTruncatedRows(const RowView& base, const RowView& cand, const RowSummary* sb, const RowSummary* sc,
                                  RowScratch& scratch) {
  const Known b(base, sb, scratch.sorted_b, scratch.eb);
  const Known c(cand, sc, scratch.sorted_c, scratch.ec);
  // The ids both sides know: those a truncated side lists that the other side knows too.
  const Known& lister = base.full() ? c : b;
  Cells cells;
  double mass_b = 0, mass_c = 0;
  for (auto [id, unused] : lister.Listed()) {
    const double lb = b.LogProb(id), lc = c.LogProb(id);
    if (std::isnan(lb) || std::isnan(lc)) continue;
    const double pb = std::exp(lb), pc = std::exp(lc);
    mass_b += pb;
    mass_c += pc;
    cells.Add(pb, lb, pc, lc);
  }
  const double rest_b = std::max(1.0 - mass_b, kTailFloor), rest_c = std::max(1.0 - mass_c, kTailFloor);
  cells.Add(rest_b, std::log(rest_b), rest_c, std::log(rest_c));

  ProbeMetrics m;
  m.base_token = base.argmax;
  m.cand_token = cand.argmax;
  m.flip = base.argmax != cand.argmax;
  m.kl_base_cand = NonNegative(cells.kl_bc);
  m.kl_cand_base = NonNegative(cells.kl_cb);
  m.js = NonNegative(cells.js);
  m.base_entropy = b.Entropy();
  m.top5 = TopOverlap(b.Top(), c.Top(), 5);
  m.top10 = TopOverlap(b.Top(), c.Top(), 10);
  m.base_prob = std::exp(b.LogProb(base.argmax));
  m.cand_prob = std::exp(c.LogProb(cand.argmax));
  m.cand_prob_of_base = std::exp(c.LogProb(base.argmax));
  m.base_margin = b.Margin(base.argmax);
  return m;
}

}  // namespace flipscope::compare
