// A finished bisect's outcome: the first bad commit (or the candidates skipped commits leave), what
// it changed, and its comparison with good — in bisect.json and for the terminal.
#include <fmt/format.h>

#include "history/history.h"
#include "history/internal.h"

namespace flipscope {

namespace {
// The step entry of a commit in bisect.json, or null.
nlohmann::json StepOf(const nlohmann::json& doc, const std::string& sha) {
  for (const auto& s : doc["steps"])
    if (s.value("commit", "") == sha) return s;
  return nullptr;
}
}  // namespace

namespace history {

// Fills doc["result"] from the finished search: the candidates, and when there is one, the
// files it changed (git show) and its comparison with good.
Status BisectFinish(const BisectRequest& br, BisectSearch& search, nlohmann::json& doc) {
  nlohmann::json result = {{"candidates", nlohmann::json::array()}};
  for (size_t i : search.Candidates()) {
    const GitCommit& c = search.commits()[i];
    result["candidates"].push_back(
        {{"commit", c.sha}, {"subject", c.subject}, {"mark", search.mark(i) == BisectSearch::Mark::kSkip ? "skip" : "bad"}});
  }
  if (result["candidates"].size() == 1) {
    nlohmann::json first = result["candidates"][0];
    const std::string sha = first["commit"].get<std::string>();
    FS_ASSIGN_OR_RETURN(auto names, RunGit(br.llama_src, {"show", "--name-only", "--format=", sha}));
    FS_ASSIGN_OR_RETURN(auto stat, RunGit(br.llama_src, {"show", "--stat", "--format=", sha}));
    if (names.code != 0 || stat.code != 0) return Status::Error(fmt::format("git show {}: {}", sha, names.err + stat.err));
    first["files"] = ParseChangedFiles(names.out);
    first["stat"] = stat.out;
    nlohmann::json step = StepOf(doc, sha);
    if (step.is_object() && step.contains("comparison")) first["comparison"] = step["comparison"];
    first.erase("mark");
    result["first_bad"] = first;
  }
  size_t builds = 0;
  double seconds = 0;
  for (const auto& s : doc["steps"]) {
    builds += s.value("build_seconds", 0.0) > 0;
    seconds += s.value("build_seconds", 0.0) + s.value("capture_seconds", 0.0);
  }
  result["steps"] = doc["steps"].size();
  result["builds"] = builds;
  result["step_seconds"] = seconds;
  doc["result"] = result;
  return Status::Ok();
}

}  // namespace history

std::string BisectTerminal(const nlohmann::json& doc) {
  const nlohmann::json& r = doc.value("result", nlohmann::json::object());
  std::string out;
  if (r.contains("first_bad")) {
    const auto& f = r["first_bad"];
    out += fmt::format("first bad commit: {} {}\n", f["commit"].get<std::string>(), f["subject"].get<std::string>());
    if (f.contains("comparison")) {
      const auto& c = f["comparison"];
      out += fmt::format("against good {}: {} of {} rows bit-identical, {} flips ({} confident), KL mean {:.3g}, "
                         "p99 {:.3g}, max {:.3g}\n",
                         doc["header"]["good"].get<std::string>().substr(0, 12), c["bit_identical"].get<int64_t>(),
                         c["probes"].get<int64_t>(), c["flips"].get<int64_t>(), c["confident_flips"].get<int64_t>(),
                         c["kl_mean"].get<double>(), c["kl_p99"].get<double>(), c["kl_max"].get<double>());
    }
    out += f.value("stat", "");
  } else {
    out += "the first bad commit is one of these (skipped commits do not build):\n";
    for (const auto& c : r.value("candidates", nlohmann::json::array()))
      out += fmt::format("  {} {} ({})\n", c["commit"].get<std::string>(), c["subject"].get<std::string>(),
                         c["mark"].get<std::string>());
  }
  out += fmt::format("{} steps, {} builds\n", r.value("steps", 0), r.value("builds", 0));
  return out;
}

}  // namespace flipscope
