// Following the forks of every variant that flips: the branch stage per configuration.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "branch/branch.h"
#include "experiment/steps.h"

namespace flipscope {

bool Branched(const Experiment& exp, const std::string& name) {
  const auto& only = exp.branch.configs;
  return exp.branch.enabled && (only.empty() || std::find(only.begin(), only.end(), name) != only.end());
}

Status BranchAll(const Experiment& exp, nlohmann::json& results, const RunOptions& opts) {
  results["branches"] = nlohmann::json::array();
  const std::string base = results["configs"][0]["captures"][0];
  std::map<std::string, std::string> model_hashes;  // every variant's pair shares the baseline's model
  for (const auto& c : results["configs"]) {
    if (ReadConfigStatus(c) != ConfigStatus::kOk || c["name"] == results["baseline"]) continue;
    if (!Branched(exp, c["name"].get<std::string>())) continue;
    // Only configurations whose first repeat flips have forks to follow.
    bool flips = false;
    for (const auto& cmp : results["comparisons"])
      if (cmp["config"] == c["name"] && cmp["repeat"] == 0)
        flips = cmp["compare"]["overall"]["flips"].get<int64_t>() > 0;
    if (!flips) continue;
    BranchRequest req;
    req.base_path = base;
    req.cand_path = c["captures"][0];
    req.options = exp.branch.options;
    req.options.log = opts.log;
    req.model_hashes = &model_hashes;
    // The futures the captures decoded: the variant's own first repeat, the baseline's second.
    req.decoded[1] = ReadDecoded(req.cand_path, base);
    const auto& base_caps = results["configs"][0]["captures"];
    if (base_caps.size() > 1) req.decoded[0] = ReadDecoded(base_caps[1].get<std::string>(), base);
    if (!req.decoded[0]) req.decoded[0] = ReadDecoded(base, base);  // a server baseline of one repeat
    opts.log.Info(fmt::format("  following the forks of {}", c["name"].get<std::string>()));
    auto b = RunBranches(req);
    if (!b.ok()) return b.status().Prefixed("branches of " + c["name"].get<std::string>());
    nlohmann::json entry = *b;
    if (exp.branch.compare_free && entry["config"]["decoding"]["used"] == "grammar") {
      // The same forks, unconstrained: what the verdicts would be without the server's grammar.
      opts.log.Info(fmt::format("  following the forks of {} again, free", c["name"].get<std::string>()));
      req.options.decoding = "free";
      auto free = RunBranches(req);
      if (!free.ok()) return free.status().Prefixed("free branches of " + c["name"].get<std::string>());
      entry["free_counts"] = (*free)["counts"];
    }
    entry["branch_config"] = entry.value("config", nlohmann::json());
    entry["config"] = c["name"];
    results["branches"].push_back(entry);
  }
  return Status::Ok();
}

}  // namespace flipscope
