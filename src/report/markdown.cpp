// report.md: the same report as the HTML page in GitHub-flavoured Markdown (tables instead of
// charts), and the terminal summary. Workload text is escaped so it never turns into markup.
#include <fmt/format.h>

#include <algorithm>

#include "report/internal.h"
#include "util/util.h"

namespace flipscope {

using nlohmann::json;
using namespace report;  // NOLINT: this file is the stage's Markdown renderer

namespace {

constexpr size_t kMaxFlipsListed = 50;  // per configuration; the rest are in results.json

// Inline text with every character Markdown could read as inline markup backslash-escaped (it is
// never placed at the start of a line, so block markers need no escape); newlines become spaces.
std::string MdText(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\n' || c == '\r') {
      out += ' ';
      continue;
    }
    if (std::string_view("\\`*_[]<>|&~").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// The longest run of backticks in s.
size_t LongestBacktickRun(std::string_view s) {
  size_t best = 0, run = 0;
  for (char c : s) best = std::max(best, run = c == '`' ? run + 1 : 0);
  return best;
}

// An inline code span holding s on one line (line breaks and tabs made visible: ↵, ⇥, ␍); in a
// table, pipes are escaped. A token goes through MdToken instead, which shows its spaces too.
std::string MdCode(std::string_view s, bool in_table = true) {
  std::string body;
  for (char c : s) body += c == '\n' ? "↵" : c == '\t' ? "⇥" : c == '\r' ? "␍" : std::string(1, c);
  if (body.empty()) return "*(empty)*";
  if (in_table) {
    std::string escaped;
    for (char c : body) escaped += c == '|' ? std::string("\\|") : std::string(1, c);
    body = escaped;
  }
  std::string fence(LongestBacktickRun(body) + 1, '`');
  return fence + " " + body + " " + fence;  // CommonMark strips one padding space on each side
}

// A token's text as a code span, made visible (VisibleToken: a space-only token shows).
std::string MdToken(std::string_view s, bool in_table = true) { return MdCode(VisibleToken(s), in_table); }

// A fenced code block holding s exactly.
std::string MdBlock(std::string_view s) {
  std::string fence(std::max<size_t>(3, LongestBacktickRun(s) + 1), '`');
  return fence + "text\n" + std::string(s) + (s.empty() || s.back() != '\n' ? "\n" : "") + fence + "\n\n";
}

std::string MdRow(const std::vector<std::string>& cells) {
  std::string out = "|";
  for (const std::string& c : cells) out += " " + c + " |";
  return out + "\n";
}

// A table whose cells are plain text (escaped here).
std::string MdTable(const TextTable& t) {
  std::vector<std::string> head, rule;
  for (const std::string& h : t.header) head.push_back(MdText(h)), rule.push_back("---");
  std::string out = MdRow(head) + MdRow(rule);
  for (const auto& cells : t.rows) {
    std::vector<std::string> escaped;
    for (const std::string& c : cells) escaped.push_back(MdText(c));
    out += MdRow(escaped);
  }
  return out + "\n";
}

std::string Ranking(const ExperimentResults& r) {
  TextTable t;
  t.header = RankingHeader(r);
  std::string refused;
  for (const ConfigRow& row : RankedConfigs(r)) {
    std::string name = row.name + " (" + row.RankedReplay() + " replay)" + (row.is_baseline ? " (reference)" : "") +
                       (row.is_recommended ? " (recommended)" : "");
    if (row.rank == 0) {
      refused += fmt::format("- **{}** — {}: {}\n", MdText(row.name), MdText(row.UnrankedLabel()),
                             MdText(row.reason.empty() ? "no reason given" : row.reason));
      continue;
    }
    std::vector<std::string> cells{RankCell(row), name};
    for (std::string& c : RankingCells(r, row)) cells.push_back(std::move(c));
    t.rows.push_back(std::move(cells));
  }
  std::string out = "## Ranking by fidelity\n\n" + RankingKeyText(r) +
                    " Flip rates are medians over repeats (95% Wilson interval of the median repeat); rows marked "
                    "`2=` share a tie group.\n\n";
  for (const std::string& line : TieLines(r)) out += "- " + line + "\n";
  out += (TieLines(r).empty() ? "" : "\n") + MdTable(t);
  if (!refused.empty()) out += "Not ranked or not measured:\n\n" + refused + "\n";
  return out;
}

std::string Flips(const ExperimentResults& r) {
  std::string out =
      "## Flips\n\nPositions where a configuration's greedy token differs from the reference's, in its "
      "median repeat.\n\n";
  if (const std::string replay = ShownReplaySentence(r); !replay.empty()) out += MdText(replay) + "\n\n";
  for (const ConfigRow& row : RankedConfigs(r)) {
    const RowMeasurements m = MeasurementsOf(r, row);
    const ComparisonRecord* cmp = MedianComparison(*m.measured, m.config);
    if (!cmp) continue;
    const std::vector<FlipRecord>& flips = cmp->compare->flips;
    const size_t n = flips.size();
    out += fmt::format("### {} — {} flips ({})\n\n", MdText(row.name), Count(double(n)), RepeatLabel(*cmp));
    if (n == 0) continue;
    out += MdRow({"Position", "Span", "Class", "Reference token (p)", "Candidate token (p)", "KL", "Context"}) +
           MdRow({"---:", "---", "---", "---", "---", "---:", "---"});
    for (size_t i = 0; i < n && i < kMaxFlipsListed; ++i) {
      const FlipRecord& f = flips[i];
      auto prob = [](double p) { return p == p ? fmt::format(" {:.3f}", p) : ""; };
      out +=
          MdRow({Count(double(f.position)), MdText(f.span), MdText(f.klass), MdToken(f.base_text) + prob(f.base_prob),
                 MdToken(f.cand_text) + prob(f.cand_prob), Small(Figure(f.kl)), MdCode(f.context)});
    }
    if (n > kMaxFlipsListed) out += fmt::format("\n{} more flips are listed in results.json.\n", n - kMaxFlipsListed);
    out += "\n";
  }
  return out;
}

std::string Branches(const ExperimentResults& r) {
  if (!r.measured.branches || r.measured.branches->empty()) return "";
  std::string out = "## Following the fork\n\n";
  for (const BranchRecord& group : *r.measured.branches) {
    const BranchCounts& counts = group.result.counts;
    out += "### " + MdText(Or(group.config)) + "\n\n";
    out += MdText(ForkedText(counts)) + "\n\n";
    if (!DecodingText(group).empty()) out += MdText(DecodingText(group)) + "\n\n";
    if (!OutcomeCountsText(counts).empty()) out += "What the change did: " + MdText(OutcomeCountsText(counts)) + "\n\n";
    out += "Verdicts: " + MdText(VerdictCountsText(counts)) + "\n\n";
    for (const ForkRecord& b : group.result.records) {
      const std::string outcome = b.attribution ? b.attribution->outcome : "";
      out += fmt::format("#### Position {} ({}): {}{}\n\n", Count(double(b.position)), MdText(b.span.value_or("")),
                         outcome.empty() ? "" : MdText(outcome) + " · ", MdText(VerdictWord(b)));
      if (b.attribution && !b.attribution->reason.empty()) out += MdText(b.attribution->reason) + "\n\n";
      if (!b.reason.empty()) out += MdText(b.reason) + "\n\n";
      out += "Reference picked " + MdToken(b.base_text, false) + ", candidate picked " + MdToken(b.cand_text, false) +
             ".\n\nShared prefix (tail):\n\n" + MdBlock(b.prefix_tail);
      out += "Reference configuration's future:\n\n" + MdBlock(b.base_future.text);
      out += "Candidate's future:\n\n" + MdBlock(b.cand_future.text);
      out += "Reference continuation (the workload):\n\n" + MdBlock(b.reference_text);
    }
  }
  return out;
}

std::string Recipe(const ExperimentResults& r) {
  if (!r.recipe) return "";
  const RecipeResult& recipe = *r.recipe;
  std::string out = "## Recipe\n\n";
  if (!recipe.recommended.empty())
    out += "Recommended: **" + MdText(recipe.recommended) + "** — " + MdText(recipe.reason) + "\n\n" +
           (RecommendationBasis(r).empty() ? "" : MdText(RecommendationBasis(r)) + "\n\n");
  if (const std::string by = RecipeRankedBy(r); !by.empty()) out += MdText(by) + "\n\n";
  for (const std::string& w : RecipeWarnings(r)) out += "**Warning:** " + MdText(w) + "\n\n";
  if (!recipe.server_command.empty())
    out += report::RecipeServerLabel(recipe) + ":\n\n" + MdBlock(recipe.server_command);
  if (const std::string launch = report::RecipeLaunchLine(recipe); !launch.empty()) out += MdText(launch) + "\n\n";
  if (!recipe.cli_command.empty()) out += "llama-cli:\n\n" + MdBlock(recipe.cli_command);
  out += MdText(report::RecipeMemoryLine(recipe)) + "\n\n" + MdText(report::RecipeVerificationLine(recipe)) + "\n\n";
  if (!recipe.kv_types.empty()) {
    TextTable t{{"KV type", "Bytes per token (full-attention layers)",
                 "KV cache at -c " + Count(Figure(recipe.context)), "Context that fits the budget"},
                {}};
    for (const RecipeKvType& k : recipe.kv_types)
      t.rows.push_back({k.type, Count(k.bytes_per_token), HumanBytes(k.bytes_at_context.value_or(0)),
                        Count(Figure(k.context_at_budget))});
    out += "KV cache per type (" + MdText(report::RecipeBudgetText(recipe)) + "):\n\n" + MdTable(t);
  }
  return out;
}

// [layers]: per configuration where its flips are born (the charts are in the HTML report).
std::string Layers(const ExperimentResults& r) {
  if (!r.layers || r.layers->empty()) return "";
  TextTable t{{"Configuration", "Flips", "Born in attention", "Born in the MLP", "At the embedding", "No jump",
               "Birth layers", "Median logits difference"},
              {}};
  for (const LayersRecord& e : *r.layers) {
    if (!e.result) {
      t.rows.push_back(
          {e.config, "not looked into: " + e.skipped.value_or(e.error.value_or("")), "", "", "", "", "", ""});
      continue;
    }
    const LayersSummary s = Summarize(*e.result);
    std::string at;  // "0 (12), 3 (2)": layers where flips are born, with their counts
    for (size_t l = 0; l < s.birth_layers.size(); ++l)
      if (int64_t n = s.birth_layers[l][0] + s.birth_layers[l][1]; n > 0)
        at += (at.empty() ? "" : ", ") + fmt::format("{} ({})", l, n);
    auto count = [](int64_t n) { return Count(double(n)); };
    std::string flips = count(s.flips);
    if (s.not_reproduced > 0) flips += fmt::format(" ({} not reproduced)", count(s.not_reproduced));
    t.rows.push_back({e.config, flips, count(s.born_attention), count(s.born_mlp), count(s.born_embedding),
                      count(s.born_none), at.empty() ? "—" : at, Small(s.median_logits_rel)});
  }
  return "## Where the flips are born\n\nEach flip recomputed layer by layer in both configurations "
         "(docs/layers.md); the charts are in report.html.\n\n" +
         MdTable(t);
}

std::string DisclosureList(const ExperimentResults& r) {
  std::string out = "## Disclosure\n", group;
  for (const Fact& f : Disclosure(r)) {
    if (f.group != group) out += "\n### " + MdText(group = f.group) + "\n\n";
    out += "- " + MdText(f.term) + ": " + (f.code ? MdCode(f.value, false) : MdText(f.value)) + "\n";
  }
  return out + "\n";
}

}  // namespace

std::string RenderMarkdown(const ExperimentResults& r) {
  std::string out = "# flipscope report: " + MdText(Or(r.name, "experiment")) + "\n\n";
  out += fmt::format("Model {} · workload {} ({} tokens) · created {}\n\n", MdText(ModelName(r)),
                     MdCode(Or(r.workload.facts.path, "?"), false), Count(Tokens(r)), MdText(Or(r.created)));
  if (!FloorSentence(r).empty()) out += MdText(FloorSentence(r)) + "\n\n";
  if (TextTable t = LoadFloorTable(r); !t.rows.empty())
    out +=
        "## Repeat floor alone and under load\n\nThe reference configuration against its first capture alone, "
        "with other sequences sharing its batches (docs/load.md).\n\n" +
        MdTable(t);
  out += Ranking(r);
  if (TextTable t = ExactTable(r); !t.rows.empty())
    out +=
        "## Against the exact reference\n\nEvery capture compared with the FP64 exact engine's capture of the same "
        "tokens (docs/exact.md), beside its distance to the baseline. Median over repeats." +
        MdText(ExactServedNote(r)) + "\n\n" + MdText(ExactClosestSentence(r)) + "\n\n" + MdTable(t);
  if (const std::string sentence = ReplaySentence(r); !sentence.empty())
    out += "## Prefill against served replay\n\n" + MdText(sentence) +
           "\n\nEach configuration's first prefill capture against its first served one (model wrote: probes whose "
           "predicted token the model wrote; elsewhere: tokens it read).\n\n" +
           MdTable(ReplayDistanceTable(r)) + "Flip rate per window, prefill against served:\n\n" +
           MdTable(ReplayWindowTable(r)) + "Ranking under each replay (each against its own baseline):\n\n" +
           MdTable(ReplayRankingTable(r));
  const std::string replay = ShownReplaySentence(r).empty() ? "" : " " + MdText(ShownReplaySentence(r));
  out += "## Flip rate per window\n\nMedian over repeats." + replay + "\n\n" +
         MdTable(WindowTable(r, WindowFigure::kFlipRate, true));
  out += "## KL(base||cand) mean per window\n\nMedian over repeats." + replay + "\n\n" +
         MdTable(WindowTable(r, WindowFigure::kKlMean, false));
  return out + Flips(r) + Branches(r) + Layers(r) + Recipe(r) + DisclosureList(r);
}

namespace {

// The terminal's floor lines: the repeat floor, then the floor under each load.
std::string TerminalFloor(const ExperimentResults& r) {
  std::string out;
  const std::optional<Floor>& floor = r.measured.floor;
  auto count = [](std::optional<int64_t> v) { return v ? Count(double(*v)) : Count(std::nullopt); };
  if (floor && floor->bit_identical.value_or(false))
    out += "  repeat floor: bit-for-bit identical\n";
  else if (floor && floor->flip_rate)
    out += fmt::format("  repeat floor: {} flips of {} = {}\n", count(floor->flips), count(floor->probes),
                       Percent(floor->flip_rate));
  else if (floor)
    out += "  repeat floor: none (" + (floor->note.empty() ? "one run of the reference" : floor->note) + ")\n";
  for (const auto& row : LoadFloorTable(r).rows)
    if (row[0] != "0 (alone)")
      out += fmt::format("  repeat floor under load {}: {} flips of {} = {} ({})\n", row[0], row[3], row[4], row[5],
                         row[1]);
  return out;
}

// The terminal's ranking table. The stated key is the real key: the distance to exact is a
// column where it ranks, and the damage rate where it ranks; "2=" marks a tie group.
std::string TerminalRanking(const ExperimentResults& r) {
  const bool exact = r.reference.has_value();
  const bool damage = r.recipe && r.recipe->ranking_mode.value_or("").find("damage") != std::string::npos;
  const bool distance = HasServedDistance(r);  // shown beside each row, never ranked
  const std::vector<ConfigRow> rows = RankedConfigs(r);
  auto label = [](const ConfigRow& row) {
    return row.name + (row.RankedReplayMode() != Replay::kPrefill ? " [" + row.RankedReplay() + "]" : "") +
           (row.is_baseline ? " (reference)" : "") + (row.is_recommended ? " *" : "");
  };
  size_t width = 24;  // the names' column, wide enough for the longest with its marks
  for (const ConfigRow& row : rows) width = std::max(width, label(row).size() + 1);
  auto line = [&](const std::string& rank, const std::string& name, const std::string& ex, const std::string& dmg,
                  const std::string& rate, const std::string& kl, const std::string& confident,
                  const std::string& above, const std::string& served) {
    return fmt::format("  {:>3}  {:<{}}{}{} {:>9} {:>9} {:>9} {:>11}{}\n", rank, name, width,
                       exact ? fmt::format(" {:>9}", ex) : "", damage ? fmt::format(" {:>12}", dmg) : "", rate, kl,
                       confident, above, distance ? fmt::format("  {}", served) : "");
  };
  std::string out = line("#", "configuration", "vs exact", "damage rate", "flip rate", "KL mean", "confident",
                         "above floor", "prefill vs served (not ranked)");
  for (const ConfigRow& row : rows) {
    const std::string name = label(row);
    if (row.rank == 0) {
      out += fmt::format("    -  {:<{}} {}: {}\n", name, width, row.UnrankedLabel(), row.reason);
      continue;
    }
    const SummaryRow& s = *row.Figures();
    const std::string above = s.above_floor ? (*s.above_floor ? "yes" : "no") : "-";
    const RecipeRankingRow* ranked = row.ranked;
    const std::string ex = ranked ? Percent(ranked->exact_flip_rate) : "—";
    const std::string dmg = ranked ? Percent(ranked->damage_rate) : "—";
    const std::string unforked = s.flips == 0 || row.is_baseline ? "0" : "not followed";
    out += line(RankCell(row), name, ex, s.forks ? dmg : unforked, Percent(s.median_flip_rate), Small(s.kl_mean),
                Count(double(s.confident_flips)), above, ServedDistanceCell(row));
  }
  return out;
}

// What following the forks found, with the flips where the model only reads kept apart; then
// the prefill-vs-served distances and whether the ranking changes under served replay.
std::string TerminalForksAndReplay(const ExperimentResults& r) {
  std::string out;
  for (const ConfigRow& row : RankedConfigs(r)) {
    if (row.rank == 0 || !row.Figures() || !row.Figures()->forks) continue;
    const ForkCounts& f = *row.Figures()->forks;  // the forks of the replay it is ranked by
    const std::string replay = row.RankedReplayMode() != Replay::kPrefill ? " [" + row.RankedReplay() + "]" : "";
    out += fmt::format("  forks of {}{}: {} damage, {} repair in {}{} followed", row.name, replay, f.damage, f.repair,
                       f.followed, f.forkable > f.followed ? fmt::format(" of {}", f.forkable) : "");
    if (f.teacher_forced_only > 0)
      out += fmt::format("; {} flips teacher-forced only (the model reads there), not forked", f.teacher_forced_only);
    out += "\n";
  }
  for (const auto& row : ReplayDistanceTable(r).rows)
    out += fmt::format("  prefill vs served, {}: {} flips ({}), {} bit-identical; model wrote {}\n", row[0], row[1],
                       row[2], row[6], row[7]);
  if (r.served && r.served->ranking)
    out += r.served->ranking->changed ? "  the ranking changes under served replay\n"
                                      : "  the ranking does not change under served replay\n";
  return out;
}

// The terminal's recipe lines: the recommendation and its basis, warnings, launch and verification.
std::string TerminalRecipe(const ExperimentResults& r) {
  std::string out;
  if (!r.recipe) return out;
  const RecipeResult& recipe = *r.recipe;
  if (!recipe.recommended.empty())
    out += "  recommended (*): " + recipe.recommended + " — " + recipe.reason + "\n" +
           (RecommendationBasis(r).empty() ? "" : "  " + RecommendationBasis(r) + "\n");
  for (const std::string& w : RecipeWarnings(r)) out += "  warning: " + w + "\n";
  if (!recipe.server_command.empty()) out += "  launch: " + recipe.server_command + "\n";
  if (const std::string launch = RecipeLaunchLine(recipe); !launch.empty()) out += "  " + launch + "\n";
  if (recipe.verification) out += "  " + RecipeVerificationLine(recipe) + "\n";
  return out;
}

}  // namespace

std::string TerminalSummary(const ExperimentResults& r, const std::string& html_path) {
  std::string out = fmt::format("{}: {} configurations", Or(r.name, "experiment"), RankedConfigs(r).size());
  if (Tokens(r)) out += ", " + Count(Tokens(r)) + " tokens";
  out += "\n" + TerminalFloor(r) + TerminalRanking(r);
  for (const std::string& t : TieLines(r)) out += "  " + t + "\n";
  out += "  ranked by: " + (r.recipe && r.recipe->ranking_key ? *r.recipe->ranking_key : "(not recorded)") + "\n";
  if (r.recipe && r.recipe->ranked_by) out += "  replay of the ranking: " + *r.recipe->ranked_by + "\n";
  if (const std::string exact = ExactClosestSentence(r); !exact.empty()) out += "  " + exact + "\n";
  out += TerminalForksAndReplay(r) + TerminalRecipe(r);
  if (!html_path.empty()) out += "  report: " + html_path + "\n";
  return out;
}

}  // namespace flipscope
