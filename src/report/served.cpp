// The report's "Prefill against served" part (replay = "both", docs/served.md): each
// configuration's distance between its two replays, per window and by who wrote the predicted
// token, and the ranking under each replay.
#include <fmt/format.h>

#include <algorithm>

#include "report/internal.h"
#include "util/util.h"

namespace flipscope::report {

using nlohmann::json;

namespace {

// "3 / 120 (2.500%)": a group's flips of its probes and their rate; "—" without probes.
std::string GroupCell(const ReplayDistance& d, const std::string& name) {
  for (const ReplayGroup& g : d.groups)
    if (g.name == name && g.probes > 0)
      return fmt::format("{} / {} ({})", Count(double(g.flips)), Count(double(g.probes)), Percent(g.flip_rate));
  return "—";
}

// 1-based place of name in order, as text; "—" when absent.
std::string Place(const std::vector<std::string>& order, const std::string& name) {
  auto it = std::find(order.begin(), order.end(), name);
  return it == order.end() ? "—" : std::to_string(it - order.begin() + 1);
}

// The served twin's summary row of a (prefill) configuration, or nullptr.
const SummaryRow* ServedRow(const ServedResults& served, const std::string& config) {
  return served.measured.Row(ServedName(config));
}

}  // namespace

std::string ReplaySentence(const ExperimentResults& r) {
  if (!r.served || (r.served->distance.empty() && r.served->measured.summary.empty())) return "";
  std::string out =
      "Every configuration was captured twice: prefilled in chunks (prefill replay), and as a deployment computed "
      "it, what the model wrote decoded one token per step (served replay, docs/served.md). Each replay is "
      "compared like with like: a served capture only with the served baseline (" +
      Or(r.served->baseline) + ").";
  if (r.served->ranking)
    out += r.served->ranking->changed ? " The ranking of configurations changes under served replay."
                                      : " The ranking of configurations does not change under served replay.";
  for (const ServedSkip& s : r.served->skipped) out += " " + s.config + " was not captured served: " + s.reason + ".";
  if (r.served->asked_by)
    out += " The variant " + *r.served->asked_by +
           " changed only the replay: the deployment's other path, not a setting to rank, so it asked for this "
           "part, and its figures are the baseline's prefill-vs-served distance (below).";
  return out;
}

bool HasServedDistance(const ExperimentResults& r) {
  if (!r.recipe) return false;
  return std::any_of(r.recipe->ranking.begin(), r.recipe->ranking.end(),
                     [](const RecipeRankingRow& row) { return row.served_distance.has_value(); });
}

std::string ServedDistanceCell(const ConfigRow& row) {
  if (!row.ranked || !row.ranked->served_distance) return "—";
  const RecipeServedDistance& d = *row.ranked->served_distance;
  return fmt::format("{} / {} ({})", Count(double(d.flips)), Count(double(d.probes)), Percent(d.flip_rate));
}

TextTable ReplayDistanceTable(const ExperimentResults& r) {
  TextTable t{{"Configuration", "Flips / probes", "Flip rate", "95% CI", "KL mean", "KL p99", "Bit-identical rows",
               "Model wrote", "Tool calls", "Elsewhere"},
              {}};
  if (!r.served) return t;
  for (const ReplayDistance& d : r.served->distance) {
    const ComparisonFigures& f = d.figures;
    const std::string ci =
        f.flip_rate_ci ? Percent((*f.flip_rate_ci)[0], 2) + " – " + Percent((*f.flip_rate_ci)[1], 2) : "—";
    t.rows.push_back({d.config, Count(double(f.flips)) + " / " + Count(double(f.probes)), Percent(f.flip_rate), ci,
                      Small(f.kl_mean), Small(f.kl_p99),
                      Count(double(f.bit_identical)) + " of " + Count(double(f.probes_compared)),
                      GroupCell(d, "written"), GroupCell(d, "tool_calls"), GroupCell(d, "elsewhere")});
  }
  return t;
}

TextTable ReplayWindowTable(const ExperimentResults& r) {
  TextTable t{{"Window (tokens)"}, {}};
  if (!r.served) return t;
  std::vector<const std::vector<WindowStats>*> columns;  // each distance's windows
  for (const ReplayDistance& d : r.served->distance)
    if (d.windows) t.header.push_back(d.config), columns.push_back(&*d.windows);
  if (columns.empty()) return t;
  for (const WindowStats& w : *columns[0]) {
    std::vector<std::string> cells{fmt::format("{} ({}–{})", w.index, Count(double(w.begin)), Count(double(w.end)))};
    for (const std::vector<WindowStats>* d : columns) {
      std::string v = "—";
      for (const WindowStats& o : *d)
        if (o.index == w.index)
          v = fmt::format("{} ({} / {})", Percent(o.flip_rate), Count(double(o.flips)), Count(double(o.probes)));
      cells.push_back(v);
    }
    t.rows.push_back(std::move(cells));
  }
  return t;
}

TextTable ReplayRankingTable(const ExperimentResults& r) {
  TextTable t{{"Configuration", "Rank (prefill)", "Rank (served)", "Flip rate (prefill)", "Flip rate (served)",
               "KL mean (served)", "Above served floor"},
              {}};
  if (!r.served || !r.served->ranking) return t;
  const ReplayRanking& ranking = *r.served->ranking;
  for (const std::string& name : ranking.prefill) {
    const SummaryRow* p = r.measured.Row(name);
    const SummaryRow* s = ServedRow(*r.served, name);
    const std::string above = s && s->above_floor ? (*s->above_floor ? "yes" : "no") : "—";
    t.rows.push_back({name, Place(ranking.prefill, name), Place(ranking.served, name),
                      p ? Percent(p->median_flip_rate) : "(baseline)", s ? Percent(s->median_flip_rate) : "(baseline)",
                      s ? Small(s->kl_mean) : "—", above});
  }
  return t;
}

std::string RecipeRankedBy(const ExperimentResults& r) {
  if (!r.recipe) return "";
  const RecipeResult& recipe = *r.recipe;
  const std::string by = recipe.ranked_by.value_or("");
  std::string out = by.empty() ? "" : "Ranked by " + by + ".";
  std::string forks;
  for (const RecipeRankingRow& row : recipe.ranking) {
    const auto& f = row.forks_reproduced;
    if (!f) continue;
    forks += fmt::format("{}{} {} of {}", forks.empty() ? "" : ", ", row.config, Count(double(f->reproduced)),
                         Count(double(f->of)));
  }
  if (!forks.empty())
    out += (out.empty() ? "" : " ") +
           std::string(
               "Forks whose capture's token generation reproduced (the other "
               "check that a capture matches generation): ") +
           forks + ".";
  return out;
}

}  // namespace flipscope::report
