// The history section: Markdown (history.md) and a terminal table.
#include <fmt/format.h>

#include "history/history.h"

namespace flipscope {

namespace {
using json = nlohmann::json;

std::string Pct(const json& s) { return fmt::format("{:.2f}%", 100.0 * s["flip_rate"].get<double>()); }

// One row per comparison: flips, rate, KL, bit-identical rows.
std::string StepTable(const json& steps) {
  std::string md =
      "| base | candidate | probes | flips | flip rate | confident flips | KL mean | KL p99 | KL max | bit-identical "
      "rows |\n"
      "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& s : steps)
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {:.3g} | {:.3g} | {:.3g} | {} of {} |\n",
                      s["base"].get<std::string>(), s["cand"].get<std::string>(), s["probes"].get<int64_t>(),
                      s["flips"].get<int64_t>(), Pct(s), s["confident_flips"].get<int64_t>(),
                      s["kl_mean"].get<double>(), s["kl_p99"].get<double>(), s["kl_max"].get<double>(),
                      s["bit_identical"].get<int64_t>(), s["probes"].get<int64_t>());
  return md;
}

// Per window of each step: flips and KL mean, one row per window.
std::string WindowTable(const json& steps) {
  std::string md = "| step | window | probes | flips | KL mean | KL max |\n|---|---|---:|---:|---:|---:|\n";
  for (const auto& s : steps)
    for (const auto& w : s["windows"])
      md += fmt::format("| {} -> {} | {}-{} | {} | {} | {:.3g} | {:.3g} |\n", s["base"].get<std::string>(),
                        s["cand"].get<std::string>(), w["begin"].get<int64_t>(), w["end"].get<int64_t>(),
                        w["probes"].get<int64_t>(), w["flips"].get<int64_t>(), w["kl_mean"].get<double>(),
                        w["kl_max"].get<double>());
  return md;
}

// Did each step move toward exact? The paired change of each probe's KL from exact, with its
// interval: a direction only where the interval excludes 0.
std::string TowardExact(const json& doc) {
  const json& x = doc["to_exact"];
  std::string md =
      "| version | flips against exact | KL(exact‖version) mean | from the version before |\n|---|---:|---:|---|\n";
  for (size_t i = 0; i < x.size(); ++i) {
    std::string move = "";
    if (i > 0) {
      double before = x[i - 1]["kl_mean"].get<double>(), now = x[i]["kl_mean"].get<double>();
      const int flips = int(x[i]["flips"].get<int64_t>() - x[i - 1]["flips"].get<int64_t>());
      if (const json& d = x[i].value("from_before", json()); d.is_object())  // the paired test
        move = fmt::format("{} ({:+.3g} KL per probe, 95% {:+.3g} to {:+.3g}; {:+d} flips)",
                           d["direction"].get<std::string>(), d["kl_change_mean"].get<double>(),
                           d["kl_change_ci"][0].get<double>(), d["kl_change_ci"][1].get<double>(), flips);
      else  // a file written before the test: the means alone, not a direction
        move = fmt::format("{:+.3g} KL, {:+d} flips", now - before, flips);
    }
    md += fmt::format("| {} | {} | {:.4g} | {} |\n", x[i]["cand"].get<std::string>(), x[i]["flips"].get<int64_t>(),
                      x[i]["kl_mean"].get<double>(), move);
  }
  return md;
}
}  // namespace

namespace {
// "Forks followed at this step: 8 of 11 forkable flips; damage 0, ..." from history.json's forks.
std::string ForksLine(const json& forks) {
  const json& c = forks.value("counts", json::object());
  const json& o = c.value("outcomes", json::object());
  auto total = [&](const char* k) {
    const json& v = o.value(k, json());
    return v.is_object() ? v.value("total", int64_t(0)) : v.is_number() ? v.get<int64_t>() : int64_t(0);
  };
  return fmt::format(
      "Forks followed at this step: {} of {} forkable flips; damage {}, repair {}, both fail {}, benign {}, "
      "different but fine {}.",
      c.value("total", int64_t(0)), c.value("branch_points", c.value("total", int64_t(0))), total("damage"),
      total("repair"), total("both_fail"), total("benign"), total("different_but_fine"));
}

// The comparisons: each version against the one before, against the first, the distance to
// exact, per window, and the flips of the step that changed most.
std::string HistoryBody(const json& doc) {
  std::string md;
  md += "\n### Each version against the one before\n\n" + StepTable(doc["steps"]);
  if (!doc["from_first"].empty()) md += "\n### Each version against the first\n\n" + StepTable(doc["from_first"]);
  if (!doc["to_exact"].empty()) md += "\n### Distance to exact\n\n" + TowardExact(doc);
  md += "\n### Per window\n\n" + WindowTable(doc["steps"]);
  int best = doc.value("changed_most", -1);
  if (best >= 0) {
    const json& s = doc["steps"][size_t(best)];
    md += fmt::format("\n### Flips of the step that changed most ({} -> {})\n\n", s["base"].get<std::string>(),
                      s["cand"].get<std::string>());
    if (s["flip_list"].empty()) md += "None: no greedy choice changed.\n";
    if (doc.contains("forks")) md += "\n" + ForksLine(doc["forks"]) + "\n";
    for (const auto& f : s["flip_list"])
      md += fmt::format("- position {}: `{}` -> `{}` (base top-1 probability {}, KL {:.3g}, {})\n",
                        f["position"].get<int>(), VisibleToken(f["base_text"].get<std::string>()),
                        VisibleToken(f["cand_text"].get<std::string>()),
                        f["base_prob"].is_null() ? "?" : fmt::format("{:.3f}", f["base_prob"].get<double>()),
                        f["kl"].get<double>(), f["class"].get<std::string>());
  }
  return md;
}

// The head and version table of a history of configurations (kind "configurations").
std::string ConfigurationsHead(const json& doc) {
  std::string md = "## History across configurations\n\n";
  md +=
      fmt::format("Model `{}`, workload `{}` ({} tokens); each configuration's capture of the same token ids.\n\n",
                  doc["model"].get<std::string>(), doc["workload"].get<std::string>(), doc["n_tokens"].get<int64_t>());
  md += "| configuration | engine | ran with | server version | llama.cpp | capture |\n|---|---|---|---|---|---|\n";
  for (const auto& v : doc["versions"])
    md += fmt::format("| {} | {} | `{}` | {} | {} | `{}` |\n", v["release"].get<std::string>(), v.value("engine", "?"),
                      v.value("flags", ""), v.value("server", json::object()).value("version", "—"),
                      v.value("llama_cpp", "—"), v["capture"].get<std::string>());
  return md;
}
}  // namespace

std::string HistoryMarkdown(const json& doc) {
  if (doc.value("kind", "") == "configurations") return ConfigurationsHead(doc) + HistoryBody(doc);
  std::string md = "## History across llama.cpp versions\n\n";
  md += fmt::format("Model `{}`, workload `{}` ({} tokens), flags `{}`, llama.cpp CPU build `{}`.\n\n",
                    doc["model"].get<std::string>(), doc["workload"].get<std::string>(), doc["n_tokens"].get<int64_t>(),
                    doc["flags"].get<std::string>(), doc["cpu"].get<std::string>());
  md += "| release | llama.cpp commit | build | kernel path | capture |\n|---|---|---|---|---|\n";
  for (const auto& v : doc["versions"]) {
    const json& src = v.value("llama_source", json::object());
    md += fmt::format("| {} | `{}` | {} | {} | `{}` |\n", v["release"].get<std::string>(), src.value("commit", "?"),
                      src.value("build", "?"), v.value("kernel_path", ""), v["capture"].get<std::string>());
  }
  return md + HistoryBody(doc);
}

std::string HistoryTerminal(const json& doc) {
  std::string out = fmt::format("{:<22} {:>7} {:>6} {:>9} {:>10} {:>15}\n", "step", "probes", "flips", "rate",
                                "KL mean", "bit-identical");
  auto row = [&](const json& s) {
    out +=
        fmt::format("{:<22} {:>7} {:>6} {:>9} {:>10.3g} {:>15}\n",
                    s["base"].get<std::string>() + " -> " + s["cand"].get<std::string>(), s["probes"].get<int64_t>(),
                    s["flips"].get<int64_t>(), Pct(s), s["kl_mean"].get<double>(), s["bit_identical"].get<int64_t>());
  };
  for (const char* k : {"steps", "from_first", "to_exact"})
    for (const auto& s : doc[k]) row(s);
  if (doc.contains("forks") && doc.value("changed_most", -1) >= 0) {
    const json& s = doc["steps"][size_t(doc["changed_most"].get<int>())];
    out += fmt::format("{} -> {}: {}\n", s["base"].get<std::string>(), s["cand"].get<std::string>(),
                       ForksLine(doc["forks"]));
  }
  return out;
}

}  // namespace flipscope
