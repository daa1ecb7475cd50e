// A finished bisect's outcome: the first bad commit (or the candidates skipped commits leave), what
// it changed, and its comparison with good — in bisect.json and for the terminal.
#include <fmt/format.h>

#include "history/history.h"
#include "history/internal.h"

namespace flipscope {

namespace history {

// Fills doc.result from the finished search: the candidates, and when there is one, the files it
// changed (git show) and its comparison with good.
Status BisectFinish(const BisectRequest& br, BisectSearch& search, BisectResult& doc) {
  BisectOutcome result;
  for (size_t i : search.Candidates()) {
    const GitCommit& c = search.commits()[i];
    result.candidates.push_back({c.sha, c.subject, search.mark(i) == BisectSearch::Mark::kSkip ? "skip" : "bad"});
  }
  if (result.candidates.size() == 1) {
    const BisectCandidate& c = result.candidates[0];
    FS_ASSIGN_OR_RETURN(auto names, RunGit(br.llama_src, {"show", "--name-only", "--format=", c.commit}));
    FS_ASSIGN_OR_RETURN(auto stat, RunGit(br.llama_src, {"show", "--stat", "--format=", c.commit}));
    if (names.code != 0 || stat.code != 0)
      return Status::Error(fmt::format("git show {}: {}", c.commit, names.err + stat.err));
    const BisectStep* step = doc.StepOf(c.commit);
    result.first_bad = BisectFirstBad{c.commit, c.subject, ParseChangedFiles(names.out), stat.out,
                                      step ? step->comparison : std::nullopt};
  }
  for (const BisectStep& s : doc.steps) {
    result.builds += s.build_seconds.value_or(0) > 0;
    result.step_seconds += s.build_seconds.value_or(0) + s.capture_seconds.value_or(0);
  }
  result.steps = int64_t(doc.steps.size());
  doc.result = std::move(result);
  return Status::Ok();
}

}  // namespace history

std::string BisectTerminal(const BisectResult& doc) {
  const BisectOutcome r = doc.result.value_or(BisectOutcome{});
  std::string out;
  if (const auto& f = r.first_bad) {
    out += fmt::format("first bad commit: {} {}\n", f->commit, f->subject);
    if (const auto& c = f->comparison)
      out += fmt::format(
          "against good {}: {} of {} rows bit-identical, {} flips ({} confident), KL mean {:.3g}, p99 {:.3g}, max "
          "{:.3g}\n",
          doc.header.good.substr(0, 12), c->bit_identical, c->probes, c->flips, c->confident_flips, c->kl_mean,
          c->kl_p99, c->kl_max);
    out += f->stat;
  } else {
    out += "the first bad commit is one of these (skipped commits do not build):\n";
    for (const BisectCandidate& c : r.candidates) out += fmt::format("  {} {} ({})\n", c.commit, c.subject, c.mark);
  }
  out += fmt::format("{} steps, {} builds\n", r.steps, r.builds);
  return out;
}

}  // namespace flipscope
