// The intervals of what following the forks found, and the ranking with statistical ties.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "results/results.h"
#include "util/wilson.h"

namespace flipscope {
namespace {

// The rate of `count` of the followed forks, per probe: the forks' share times the flip rate,
// times the share of flips where the model writes (the only ones that can do damage or repair).
// Each factor's interval multiplies, end with end: a conservative 95% interval of the product.
std::optional<Interval> ForkRateCi(const SummaryRow& s, int64_t count) {
  if (!s.forks) return std::nullopt;
  const ForkCounts& f = *s.forks;
  const int64_t flips = f.forkable + f.teacher_forced_only;
  const double writes = flips > 0 ? double(f.forkable) / double(flips) : 0.0;
  const Interval rate = s.flip_rate_ci.value_or(Interval{s.median_flip_rate, s.median_flip_rate});
  // No followed fork measures nothing: the share is anywhere in [0, 1].
  const auto [lo, hi] = Wilson95(double(count), double(f.followed));
  return Interval{rate[0] * writes * lo, rate[1] * writes * hi};
}

// Ranks rows[idx] from key level k on; appends to *out, numbering tie groups from *group.
void RankLevel(const std::vector<RankInput>& rows, std::vector<size_t> idx, size_t k, std::vector<RankedRow>* out,
               int* group) {
  auto by_estimates = [&](size_t a, size_t b) {
    for (size_t i = k; i < rows[a].keys.size(); ++i)
      if (rows[a].keys[i].value != rows[b].keys[i].value) return rows[a].keys[i].value < rows[b].keys[i].value;
    return rows[a].last < rows[b].last;
  };
  if (k == (rows.empty() ? 0 : rows[idx.front()].keys.size())) {
    // A statistical tie: the memory each needs decides, then the estimates (from the first key).
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
      if (rows[a].memory != rows[b].memory) return rows[a].memory < rows[b].memory;
      for (size_t i = 0; i < rows[a].keys.size(); ++i)
        if (rows[a].keys[i].value != rows[b].keys[i].value) return rows[a].keys[i].value < rows[b].keys[i].value;
      return rows[a].last < rows[b].last;
    });
    ++*group;
    for (size_t i : idx) out->push_back({i, *group});
    return;
  }
  std::stable_sort(idx.begin(), idx.end(), by_estimates);
  while (!idx.empty()) {
    const Estimate& leader = rows[idx.front()].keys[k];
    std::vector<size_t> tied, rest;
    for (size_t i : idx) (rows[i].keys[k].Overlaps(leader) ? tied : rest).push_back(i);
    RankLevel(rows, std::move(tied), k + 1, out, group);
    idx = std::move(rest);
  }
}

}  // namespace

Interval Wilson95(double k, double n) {
  const auto [lo, hi] = WilsonScore(k, n);
  return {lo, hi};
}

std::optional<Interval> SummaryRow::DamageRateCi() const {
  return forks ? ForkRateCi(*this, forks->damage) : std::nullopt;
}

std::optional<double> SummaryRow::RepairRate() const {
  if (!forks) return std::nullopt;
  const int64_t flips = forks->forkable + forks->teacher_forced_only;
  if (forks->followed == 0 || flips == 0) return 0.0;
  // As damage_rate (AddDamage): the median flip rate x the forks' share x the share where the model writes.
  return median_flip_rate * double(forks->repair) / double(forks->followed) * double(forks->forkable) / double(flips);
}

std::optional<Interval> SummaryRow::RepairRateCi() const {
  return forks ? ForkRateCi(*this, forks->repair) : std::nullopt;
}

std::vector<RankedRow> RankWithTies(const std::vector<RankInput>& rows) {
  std::vector<RankedRow> out;
  if (rows.empty()) return out;
  std::vector<size_t> idx(rows.size());
  std::iota(idx.begin(), idx.end(), size_t(0));
  int group = 0;
  RankLevel(rows, std::move(idx), 0, &out, &group);
  return out;
}

}  // namespace flipscope
