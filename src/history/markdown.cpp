// The history section: Markdown (history.md) and a terminal table.
#include <fmt/format.h>

#include "history/history.h"

namespace flipscope {

namespace {

std::string Pct(const HistoryComparison& s) { return fmt::format("{:.2f}%", 100.0 * s.flip_rate); }

// One row per comparison: flips, rate, KL, bit-identical rows.
std::string StepTable(const std::vector<HistoryComparison>& steps) {
  std::string md =
      "| base | candidate | probes | flips | flip rate | confident flips | KL mean | KL p99 | KL max | bit-identical "
      "rows |\n"
      "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const HistoryComparison& s : steps)
    md +=
        fmt::format("| {} | {} | {} | {} | {} | {} | {:.3g} | {:.3g} | {:.3g} | {} of {} |\n", s.base, s.cand, s.probes,
                    s.flips, Pct(s), s.confident_flips, s.kl_mean, s.kl_p99, s.kl_max, s.bit_identical, s.probes);
  return md;
}

// Per window of each step: flips and KL mean, one row per window.
std::string WindowTable(const std::vector<HistoryComparison>& steps) {
  std::string md = "| step | window | probes | flips | KL mean | KL max |\n|---|---|---:|---:|---:|---:|\n";
  for (const HistoryComparison& s : steps)
    for (const HistoryWindow& w : s.windows)
      md += fmt::format("| {} -> {} | {}-{} | {} | {} | {:.3g} | {:.3g} |\n", s.base, s.cand, w.begin, w.end, w.probes,
                        w.flips, w.kl_mean, w.kl_max);
  return md;
}

// Did each step move toward exact? The paired change of each probe's KL from exact, with its
// interval: a direction only where the interval excludes 0.
std::string TowardExact(const HistoryResult& doc) {
  const std::vector<HistoryComparison>& x = doc.to_exact;
  std::string md =
      "| version | flips against exact | KL(exact‖version) mean | from the version before |\n|---|---:|---:|---|\n";
  for (size_t i = 0; i < x.size(); ++i) {
    std::string move = "";
    if (i > 0) {
      const int flips = int(x[i].flips - x[i - 1].flips);
      if (const auto& d = x[i].from_before)  // the paired test
        move = fmt::format("{} ({:+.3g} KL per probe, 95% {:+.3g} to {:+.3g}; {:+d} flips)", d->direction, d->mean,
                           d->ci[0], d->ci[1], flips);
      else  // a file written before the test: the means alone, not a direction
        move = fmt::format("{:+.3g} KL, {:+d} flips", x[i].kl_mean - x[i - 1].kl_mean, flips);
    }
    md += fmt::format("| {} | {} | {:.4g} | {} |\n", x[i].cand, x[i].flips, x[i].kl_mean, move);
  }
  return md;
}

// "Forks followed at this step: 8 of 11 forkable flips; damage 0, ..." from the forks' counts.
std::string ForksLine(const HistoryForks& forks) {
  const BranchCounts& c = forks.result.counts;
  const std::optional<OutcomeTally>& o = c.outcomes;
  // Flips where the model reads are never forked: said, so that "0 of 0" does not hide them.
  const int64_t read_only = c.teacher_forced_only.value_or(0);
  const std::string reads =
      read_only > 0 ? fmt::format(", {} more teacher-forced only (the model reads there)", read_only) : "";
  return fmt::format(
      "Forks followed at this step: {} of {} forkable flips{}; damage {}, repair {}, both fail {}, benign {}, "
      "different but fine {}.",
      c.total, c.branch_points.value_or(c.total), reads, o ? o->damage.total : 0, o ? o->repair.total : 0,
      o ? o->both_fail : 0, o ? o->benign : 0, o ? o->different_but_fine : 0);
}

// The comparisons: each version against the one before, against the first, the distance to
// exact, per window, and the flips of the step that changed most.
std::string HistoryBody(const HistoryResult& doc) {
  std::string md;
  md += "\n### Each version against the one before\n\n" + StepTable(doc.steps);
  if (!doc.from_first.empty()) md += "\n### Each version against the first\n\n" + StepTable(doc.from_first);
  if (!doc.to_exact.empty()) md += "\n### Distance to exact\n\n" + TowardExact(doc);
  md += "\n### Per window\n\n" + WindowTable(doc.steps);
  if (const HistoryComparison* s = doc.ChangedMost()) {
    md += fmt::format("\n### Flips of the step that changed most ({} -> {})\n\n", s->base, s->cand);
    if (s->flip_list.empty()) md += "None: no greedy choice changed.\n";
    if (doc.forks) md += "\n" + ForksLine(*doc.forks) + "\n";
    for (const HistoryFlip& f : s->flip_list)
      md += fmt::format("- position {}: `{}` -> `{}` (base top-1 probability {}, KL {:.3g}, {})\n", f.position,
                        VisibleToken(f.base_text), VisibleToken(f.cand_text),
                        f.base_prob ? fmt::format("{:.3f}", *f.base_prob) : "?", f.kl, f.klass);
  }
  return md;
}

// The head and version table of a history of configurations (kind "configurations").
std::string ConfigurationsHead(const HistoryResult& doc) {
  std::string md = "## History across configurations\n\n";
  md += fmt::format("Model `{}`, workload `{}` ({} tokens); each configuration's capture of the same token ids.\n\n",
                    doc.model, doc.workload, doc.n_tokens);
  md += "| configuration | engine | ran with | server version | llama.cpp | capture |\n|---|---|---|---|---|---|\n";
  for (const HistoryVersion& v : doc.versions)
    md += fmt::format("| {} | {} | `{}` | {} | {} | `{}` |\n", v.release, v.engine.value_or("?"), v.flags.value_or(""),
                      v.server ? v.server->version : "—", v.llama_cpp.value_or("—"), v.capture);
  return md;
}
}  // namespace

std::string HistoryMarkdown(const HistoryResult& doc) {
  if (doc.OfConfigurations()) return ConfigurationsHead(doc) + HistoryBody(doc);
  std::string md = "## History across llama.cpp versions\n\n";
  md += fmt::format("Model `{}`, workload `{}` ({} tokens), flags `{}`, llama.cpp CPU build `{}`.\n\n", doc.model,
                    doc.workload, doc.n_tokens, doc.flags, doc.cpu);
  md += "| release | llama.cpp commit | build | kernel path | capture |\n|---|---|---|---|---|\n";
  for (const HistoryVersion& v : doc.versions)
    md += fmt::format("| {} | `{}` | {} | {} | `{}` |\n", v.release, v.llama_source ? v.llama_source->commit : "?",
                      v.llama_source ? v.llama_source->build : "?", v.kernel_path.value_or(""), v.capture);
  return md + HistoryBody(doc);
}

std::string HistoryTerminal(const HistoryResult& doc) {
  std::string out = fmt::format("{:<22} {:>7} {:>6} {:>9} {:>10} {:>15}\n", "step", "probes", "flips", "rate",
                                "KL mean", "bit-identical");
  for (const auto* list : {&doc.steps, &doc.from_first, &doc.to_exact})
    for (const HistoryComparison& s : *list)
      out += fmt::format("{:<22} {:>7} {:>6} {:>9} {:>10.3g} {:>15}\n", s.base + " -> " + s.cand, s.probes, s.flips,
                         Pct(s), s.kl_mean, s.bit_identical);
  if (const HistoryComparison* s = doc.ChangedMost(); s && doc.forks)
    out += fmt::format("{} -> {}: {}\n", s->base, s->cand, ForksLine(*doc.forks));
  return out;
}

}  // namespace flipscope
