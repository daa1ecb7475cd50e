// Following the forks of every variant that flips: the branch stage per configuration.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "branch/branch.h"
#include "experiment/steps.h"
#include "util/util.h"

namespace flipscope {

bool Branched(const Experiment& exp, const std::string& name) {
  const auto& only = exp.branch.configs;
  return exp.branch.enabled && (only.empty() || std::find(only.begin(), only.end(), name) != only.end());
}

Status BranchAll(const Experiment& exp, Measurements& m, const RunOptions& opts) {
  m.branches.emplace();
  const std::vector<std::string>& base_caps = m.configs[0].captures;
  const std::string base = base_caps[0];
  std::map<std::string, std::string> model_hashes;  // every variant's pair shares the baseline's model
  for (const ConfigEntry& c : m.configs) {
    if (!c.Ok() || c.name == exp.baseline.name || !Branched(exp, c.name)) continue;
    // Only configurations whose first repeat flips have forks to follow.
    if (FirstRepeatFlips(m, c.name) <= 0) continue;
    BranchRequest req;
    req.base_path = base;
    req.cand_path = c.captures[0];
    req.options = exp.branch.options;
    req.options.log = opts.log;
    req.model_hashes = &model_hashes;
    // The futures the captures decoded: the variant's own first repeat, the baseline's second.
    req.decoded[1] = ReadDecoded(req.cand_path, base);
    if (base_caps.size() > 1) req.decoded[0] = ReadDecoded(base_caps[1], base);
    if (!req.decoded[0]) req.decoded[0] = ReadDecoded(base, base);  // a server baseline of one repeat
    opts.log.Info(fmt::format("  following the forks of {}", c.name));
    const double t0 = NowSeconds();
    auto b = RunBranches(req);
    if (!b.ok()) return b.status().Prefixed("branches of " + c.name);
    // The stage decodes the futures the captures did not: minutes on a long session.
    opts.log.Info(
        fmt::format("  forks of {}: {} branch points in {:.1f} s", c.name, b->records.size(), NowSeconds() - t0));
    BranchRecord record{c.name, std::move(*b)};
    if (exp.branch.compare_free && record.result.config.decoding &&
        record.result.config.decoding->used == NameOf(FutureDecoding::kGrammar)) {
      // The same forks, unconstrained: what the verdicts would be without the server's grammar.
      opts.log.Info(fmt::format("  following the forks of {} again, free", c.name));
      req.options.decoding = DecodingMode::kFree;
      auto free = RunBranches(req);
      if (!free.ok()) return free.status().Prefixed("free branches of " + c.name);
      record.free_counts = std::move(free->counts);
    }
    m.branches->push_back(std::move(record));
  }
  return Status::Ok();
}

}  // namespace flipscope
