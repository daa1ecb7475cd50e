// The section against the exact reference, shared by the HTML and Markdown renderers: every
// capture's distance to the truth (served twins beside their own baseline) and the sentence naming
// the configuration closest to it in the replay the ranking reads.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "report/internal.h"
#include "results/results.h"

namespace flipscope::report {

namespace {

std::string ExactCiText(const std::optional<flipscope::Interval>& ci) {
  return ci ? Percent((*ci)[0], 2) + " – " + Percent((*ci)[1], 2) : "—";
}

}  // namespace

TextTable ExactTable(const ExperimentResults& r) {
  TextTable t{{"Configuration", "Repeats", "Flips vs exact", "Probes", "Flip rate vs exact", "95% CI", "KL vs exact",
               "Flip rate vs baseline", "KL vs baseline"},
              {}};
  if (!r.reference) return t;
  const std::string base = BaselineName(r);
  // Each replay's rows beside its own baseline: prefill captures against the baseline, served
  // twins (X@served) against the served baseline.
  auto add = [&](const SummaryRow& e, const Measurements& m, const std::string& own_base) {
    std::string vs_rate = "—", vs_kl = "—";
    const bool floor = m.floor && m.floor->flip_rate;
    if (e.config == own_base && !floor) {
      vs_rate = vs_kl = "(the reference)";
    } else if (const SummaryRow* s = m.Row(e.config)) {
      vs_rate = Percent(s->median_flip_rate) + (e.config == own_base ? " (repeats)" : "");
      vs_kl = Small(s->kl_mean);
    }
    t.rows.push_back({e.config, Count(double(e.repeats)), Count(double(e.flips)), Count(double(e.probes)),
                      Percent(e.median_flip_rate), ExactCiText(e.flip_rate_ci), Small(e.kl_mean), vs_rate, vs_kl});
  };
  for (const SummaryRow& e : r.reference->summary) add(e, r.measured, base);
  if (r.served)
    for (const SummaryRow& e : r.reference->served_summary) add(e, r.served->measured, r.served->baseline);
  return t;
}

namespace {

// Whether the ranking reads served twins, and their distances to exact were measured.
bool RankedByServedTwins(const ExperimentResults& r) {
  return r.served && r.reference && !r.reference->served_summary.empty() && r.recipe && !r.recipe->ranking.empty() &&
         FromName<Replay>(r.recipe->ranking.front().replay.value_or("")) == Replay::kServed;
}

// "the baseline" for a baseline named so, "the baseline NAME" otherwise.
std::string TheBaseline(const std::string& name) {
  return name == "baseline" ? "the baseline" : "the baseline " + name;
}

}  // namespace

std::string ExactServedNote(const ExperimentResults& r) {
  if (!r.served || !r.reference || r.reference->served_summary.empty()) return "";
  return " Served twins (NAME@served: what each configuration computed decoding what the model wrote) are compared "
         "with the same exact capture, and beside it with the served baseline " +
         r.served->baseline + ".";
}

std::string ExactClosestSentence(const ExperimentResults& r) {
  if (!r.reference || r.reference->summary.empty()) return "";
  // The replay the ranking reads: served twins' own distances where the ranking is by them.
  const bool served = RankedByServedTwins(r);
  const std::vector<SummaryRow>& rows = served ? r.reference->served_summary : r.reference->summary;
  const Measurements& measured = served ? r.served->measured : r.measured;
  auto name = [&](const std::string& config) { return served ? UnservedName(config) : config; };
  auto closer = [](const SummaryRow& a, const SummaryRow& b) {
    return std::pair{a.median_flip_rate, a.kl_mean} < std::pair{b.median_flip_rate, b.kl_mean};
  };
  const SummaryRow& best = *std::min_element(rows.begin(), rows.end(), closer);
  std::string out = fmt::format("Closest to the exact reference{}: {} ({} of probes flip against it, KL {})",
                                served ? " under served replay" : "", name(best.config), Percent(best.median_flip_rate),
                                Small(best.kl_mean));
  // The median is a point; a row whose interval reaches below the best's upper bound is no farther.
  std::vector<std::string> tied;
  for (const SummaryRow& s : rows)
    if (&s != &best && s.flip_rate_ci && best.flip_rate_ci && (*s.flip_rate_ci)[0] <= (*best.flip_rate_ci)[1])
      tied.push_back(name(s.config));
  if (!tied.empty())
    out += fmt::format("; its 95% interval overlaps {} of {}, so they are not told apart",
                       tied.size() == 1 ? "that" : "those", fmt::join(tied, ", "));
  const std::string base = served ? r.served->baseline : BaselineName(r);
  for (const SummaryRow& s : rows)
    if (s.config == base && s.config != best.config)
      out += fmt::format("; {} is {} from it", TheBaseline(name(base)), Percent(s.median_flip_rate));
  // Among the variants, the one nearest the baseline and the one nearest the truth: where they
  // differ, ranking by the baseline would pick the wrong one.
  const SummaryRow *near_base = nullptr, *near_exact = nullptr;
  for (const SummaryRow& s : measured.summary)
    if (s.config != base && (!near_base || closer(s, *near_base))) near_base = &s;
  for (const SummaryRow& s : rows)
    if (s.config != base && (!near_exact || closer(s, *near_exact))) near_exact = &s;
  if (near_base && near_exact && near_base->config != near_exact->config)
    out += fmt::format(
        ". Of the variants, {} is closest to the baseline but {} to the exact reference: the "
        "baseline is not the truth",
        name(near_base->config), name(near_exact->config));
  return out + ".";
}

}  // namespace flipscope::report
