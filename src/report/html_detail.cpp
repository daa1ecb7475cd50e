// The detail sections of the HTML page: the flips of each configuration, the branch viewer
// (both futures side by side) and the disclosure of everything a divergence claim rests on.
#include <fmt/format.h>

#include "report/internal.h"
#include "util/util.h"

namespace flipscope::report {

using nlohmann::json;

namespace {

// Flips shown per configuration; the rest stay in results.json (the page says so).
constexpr size_t kMaxFlipsShown = 200;
// Branch records shown in full per configuration (both futures token by token: ~6 KB of markup
// and ~150 elements each): as many as the experiment's default max_branches follows. Further
// records get one summary row each, up to kMaxFlipsShown, and the rest stay in results.json, so
// that a 100K-token session whose every fork was followed still loads in a browser in seconds
// (docs/performance.md, "The report at 100K tokens").
constexpr size_t kMaxRecordsShown = 16;

std::string E(std::string_view s) { return HtmlEscape(s); }

// Badge colour of an outcome: damage is bad, repair and benign good, the rest neutral.
std::string OutcomeClass(std::optional<Outcome> outcome) {
  return outcome == Outcome::kDamage                                  ? "bad"
         : outcome == Outcome::kRepair || outcome == Outcome::kBenign ? "rec"
                                                                      : "neutral";
}

std::string Prob(std::optional<double> p) { return p ? fmt::format("{:.3f}", *p) : "—"; }

// A token's text as an inline code element, whitespace made visible.
std::string TokenCode(const std::string& text) { return "<code class=\"t\">" + E(VisibleToken(text)) + "</code>"; }

// The flip's class; confident flips (the costly kind) stand out.
// Each repeat's capture time in whole seconds, or "reused" where a re-run took the capture an
// earlier run had made (its time then is only the check's).
std::string CaptureSeconds(const ConfigEntry& c) {
  if (!c.capture_seconds) return InlineText(Sub(c.fields, "capture_seconds"));  // absent, or as read
  const std::vector<double>& secs = *c.capture_seconds;
  std::string out;
  for (size_t i = 0; i < secs.size(); ++i) {
    const bool was_reused = c.reused && i < c.reused->size() && (*c.reused)[i];
    if (!out.empty()) out += ", ";
    out += was_reused ? "reused" : fmt::format("{:.0f} s", secs[i]);
  }
  return out;
}

std::string ClassCell(const std::string& klass) {
  return klass == "confident" ? "<span class=\"confident\">confident</span>" : E(klass);
}

// The id of the flip's own layers chart (HtmlLayersSection), or "" when [layers] did not look into it.
std::string LayersAnchor(const ExperimentResults& r, const std::string& config, int position) {
  if (!r.layers) return "";
  const std::vector<LayersRecord>& all = *r.layers;
  for (size_t k = 0; k < all.size(); ++k) {
    if (all[k].config != config || !all[k].result) continue;
    for (const LayersFlip& f : all[k].result->flips)
      if (f.position == position) return fmt::format("layers-{}-p{}", k, position);
  }
  return "";
}

// One row of the flips table; anchor links the position to the flip's layers chart.
std::string FlipRow(const FlipRecord& f, const std::string& anchor) {
  std::string pos = Count(double(f.position));
  if (!anchor.empty()) pos = "<a href=\"#" + anchor + "\" title=\"where this flip is born\">" + pos + "</a>";
  std::string row =
      HtmlRow({pos, Count(double(f.window)), E(Or(f.span, "—")), ClassCell(Or(f.klass, "—")),
               TokenCode(f.base_text) + " " + E(Prob(Figure(f.base_prob))),
               TokenCode(f.cand_text) + " " + E(Prob(Figure(f.cand_prob))), E(Prob(Figure(f.cand_prob_of_base_token))),
               E(Small(Figure(f.base_margin))), E(Small(Figure(f.kl)))});
  // The context cell has its own width rules, so it goes in before "</tr>" by hand.
  // The context is the text before the flip; the reference's token follows it, marked.
  return row.insert(row.size() - 5, "<td class=\"ctx\"><pre>" + E(f.context) + "<mark title=\"reference token\">" +
                                        E(f.base_text) + "</mark></pre></td>");
}

// One future as token spans: hover shows index, id and probability; the first difference is
// marked, and a first token the grammar put in place of the side's own choice (`first_masked`).
std::string FutureTokens(const ForkFuture& fut, int first_diff, const std::string& own_choice) {
  if (fut.pieces.empty()) return "<pre>" + E(fut.text) + "</pre>";
  std::string out = "<pre>";
  for (size_t i = 0; i < fut.pieces.size(); ++i) {
    std::string tip = fmt::format("token {}", i);
    if (i < fut.tokens.size()) tip += fmt::format(" · id {}", fut.tokens[i]);
    if (i < fut.probs.size()) tip += fmt::format(" · p={:.3f}", fut.probs[i]);
    const std::string& piece = fut.pieces[i];
    tip += " · " + VisibleToken(piece);
    std::string span = fmt::format(R"(<span class="tok" title="{}">{}</span>)", E(tip), E(piece));
    if (i == 0 && fut.first_masked)
      span = "<mark class=\"masked\" title=\"" +
             E("first masked: the grammar rejected this configuration's own choice " + VisibleToken(own_choice) +
               "; the future starts from the best token it allows") +
             "\">" + span + "</mark>";
    out += int(i) == first_diff ? "<mark class=\"diff\" title=\"first difference\">" + span + "</mark>" : span;
  }
  return out + "</pre>";
}

// The outcome badge's words: "damage: invalid_tool_call"; "" for records judged before outcomes.
std::string OutcomeWords(const ForkRecord& b) {
  if (!b.attribution) return "";
  const std::string kind = b.attribution->kind.value_or("");
  return b.attribution->outcome + (kind.empty() ? "" : ": " + kind);
}

std::string BranchRecordHtml(const std::string& config, const ForkRecord& b) {
  // Token indexes of the first difference in each future (absent when the texts are equal).
  const int diff_base = IntOr(b.first_difference, -1);
  const int diff_cand = IntOr(b.first_difference_cand, diff_base);
  const std::string verdict = VerdictWord(b);
  const std::string cls = b.VerdictMode() == Verdict::kBenign ? "rec" : "bad";
  // The outcome (what the change did) first; the pair's verdict beside it.
  const std::string outcome = b.attribution ? b.attribution->outcome : "";
  std::string outcome_badge;
  if (!outcome.empty())
    outcome_badge = fmt::format(" <span class=\"badge {}\">{}</span>", OutcomeClass(b.attribution->OutcomeMode()),
                                E(OutcomeWords(b)));
  std::string out = fmt::format(
      "<article class=\"branch\"><h3>{} · position {} · {}{} <span class=\"badge {}\">{}</span></h3>", E(config),
      E(Count(double(b.position))), E(b.span.value_or("outside any span")), outcome_badge, cls, E(verdict));
  if (b.attribution && !b.attribution->reason.empty()) out += "<p>" + E(b.attribution->reason) + "</p>";
  if (!b.reason.empty()) out += "<p>" + E(b.reason) + "</p>";
  out += fmt::format("<p>The reference configuration picked {} where the candidate picked {}. {}</p>",
                     TokenCode(b.base_text), TokenCode(b.cand_text),
                     b.reconverge_at ? fmt::format("The futures agree again from token {} of the reference's future.",
                                                   Count(double(*b.reconverge_at)))
                                     : std::string("The futures do not agree again within the decoded length."));
  if (!b.reproduced)
    out +=
        "<p><strong>Note:</strong> a recomputed row did not match its capture's digest here, so this future "
        "may not be the captured configuration's.</p>";
  out += "<h4>Shared prefix (tail)</h4><pre class=\"prefix\">…" + E(b.prefix_tail) + "</pre>";
  for (const auto* side : {&b.base_future, &b.cand_future}) {
    const bool base = side == &b.base_future;
    if (side->first_masked)
      out += fmt::format(
          "<p>The tool-call grammar masked the {} choice {} here (first masked): a server constraining its calls "
          "would not write it, so this future starts from the best token the grammar allows (marked).</p>",
          base ? "reference configuration's" : "candidate's", TokenCode(base ? b.base_text : b.cand_text));
  }
  // Each future's heading: how it was decoded, and its grade on the outcome scale where judged so.
  auto heading = [&](const char* title, const ForkFuture& f, const ForkSideJudgement* side) {
    const std::string decoding = f.decoding.value_or("");
    const std::string grade = side && side->grade ? *side->grade : "";
    return "<h4>" + std::string(title) + (decoding.empty() ? "" : " <small>(" + E(decoding) + ")</small>") +
           (grade.empty() ? "" : " <small class=\"grade\">graded " + E(grade) + "</small>") + "</h4>";
  };
  const ForkSideJudgement* base_side = b.attribution ? &b.attribution->base : nullptr;
  const ForkSideJudgement* cand_side = b.attribution ? &b.attribution->cand : nullptr;
  out += "<div class=\"futures\"><div class=\"future base\">" +
         heading("Reference configuration's future", b.base_future, base_side) +
         FutureTokens(b.base_future, diff_base, b.base_text) + "</div><div class=\"future cand\">" +
         heading("Candidate's future", b.cand_future, cand_side) + FutureTokens(b.cand_future, diff_cand, b.cand_text) +
         "</div></div>";
  out += "<h4>Reference continuation (the workload)</h4><pre>" + E(b.reference_text) + "</pre>";
  return out + "</article>";
}

// A branch record as one row of the summary table: where, what each side picked, what it did.
std::string RecordRow(const ForkRecord& b) {
  const std::string outcome = OutcomeWords(b);
  const std::string& why = b.attribution ? b.attribution->reason : b.reason;
  return HtmlRow({Count(double(b.position)), E(b.span.value_or("outside any span")),
                  TokenCode(b.base_text) + " → " + TokenCode(b.cand_text),
                  outcome.empty() ? "—"
                                  : fmt::format("<span class=\"badge {}\">{}</span>",
                                                OutcomeClass(b.attribution->OutcomeMode()), E(outcome)),
                  E(VerdictWord(b)), b.reconverge_at ? "token " + Count(double(*b.reconverge_at)) : "no", E(why)});
}

// A configuration's records: the first kMaxRecordsShown in full, then summary rows, then a count.
std::string BranchRecords(const std::string& config, const std::vector<ForkRecord>& records) {
  std::string out;
  const size_t n = records.size();
  for (size_t i = 0; i < n && i < kMaxRecordsShown; ++i) out += BranchRecordHtml(config, records[i]);
  if (n <= kMaxRecordsShown) return out;
  const size_t rows = std::min(n - kMaxRecordsShown, kMaxFlipsShown);
  out += fmt::format(
      "<details class=\"more-records\"><summary>{} — {} more branch records, one line each</summary><p>Both "
      "futures token by token are shown for the first {} records; every record's futures are in "
      "results.json.</p><div class=\"table-wrap\"><table class=\"records\"><thead>",
      E(config), Count(double(n - kMaxRecordsShown)), kMaxRecordsShown);
  out +=
      HtmlRow({"Position", "Span", "Reference → candidate", "Outcome", "Verdict", "Futures agree again", "Why"}, true) +
      "</thead><tbody>";
  for (size_t i = kMaxRecordsShown; i < kMaxRecordsShown + rows; ++i) out += RecordRow(records[i]);
  out += "</tbody></table></div>";
  if (n > kMaxRecordsShown + rows)
    out += fmt::format("<p>{} more branch records are listed in results.json.</p>",
                       Count(double(n - kMaxRecordsShown - rows)));
  return out + "</details>";
}

}  // namespace

std::string HtmlFlipsSection(const ExperimentResults& r) {
  std::string out =
      "<section id=\"flips\"><h2>Flips</h2><p>Every position where a configuration's greedy token differs from "
      "the reference's, in the configuration's median repeat. <em>Confident</em>: the reference's top-1 "
      "probability was at least the confident threshold; <em>uncertain</em>: below 0.5; <em>moderate</em>: in "
      "between. The context is the text before the flip, followed by the reference's token.</p>";
  if (const std::string replay = ShownReplaySentence(r); !replay.empty())
    out += "<p class=\"replay\">" + E(replay) + "</p>";
  for (const ConfigRow& row : RankedConfigs(r)) {
    const RowMeasurements m = MeasurementsOf(r, row);
    const ComparisonRecord* cmp = MedianComparison(*m.measured, m.config);
    if (!cmp) continue;
    const std::vector<FlipRecord>& flips = cmp->compare->flips;
    const size_t n = flips.size();
    out += fmt::format("<details><summary>{} — {} flips ({} confident) in {}</summary>", E(row.name), Count(double(n)),
                       Count(double(cmp->compare->overall.confident_flips)), E(RepeatLabel(*cmp)));
    if (n == 0) {
      out += "<p>No flips.</p></details>";
      continue;
    }
    out += "<div class=\"table-wrap\"><table class=\"flips\"><thead>" +
           HtmlRow({"Position", "Window", "Span", "Class", "Reference token (p)", "Candidate token (p)",
                    "Candidate p of reference token", "Reference margin", "KL", "Context"},
                   true) +
           "</thead><tbody>";
    for (size_t i = 0; i < n && i < kMaxFlipsShown; ++i)
      out += FlipRow(flips[i], LayersAnchor(r, row.name, flips[i].position));
    out += "</tbody></table></div>";
    if (n > kMaxFlipsShown)
      out += fmt::format("<p>{} more flips are listed in results.json.</p>", Count(double(n - kMaxFlipsShown)));
    out += "</details>";
  }
  return out + "</section>";
}

std::string HtmlBranchesSection(const ExperimentResults& r) {
  std::string out = "<section id=\"branches\"><h2>Following the fork</h2>";
  if (!r.measured.branches || r.measured.branches->empty())
    return out + "<p>No branch records in this experiment (the branch stage did not run).</p></section>";
  out +=
      "<p>At a flip, both configurations decode greedily from the shared prefix. Hover a token for its "
      "probability; the first differing token is marked.</p>";
  for (const BranchRecord& group : *r.measured.branches) {
    const BranchCounts& counts = group.result.counts;
    const std::string config = Or(group.config);
    out += "<h3>" + E(config) + "</h3>";
    out += "<p>" + E(ForkedText(counts)) + "</p>";
    if (!DecodingText(group).empty()) out += "<p>" + E(DecodingText(group)) + "</p>";
    if (counts.outcomes) {
      out += "<p>What the change did:";
      for (const auto& [name, n] : counts.OutcomesByName())
        out += fmt::format(" <span class=\"badge {}\">{}: {}</span>", OutcomeClass(FromName<Outcome>(name)), E(name),
                           E(InlineText(n)));
      out += "</p><p>" + E(OutcomeCountsText(counts)) + "</p>";
    }
    out += "<p>Verdicts:";
    const json verdicts = VerdictCounts(counts);
    for (auto it = verdicts.begin(); it != verdicts.end(); ++it)
      out += fmt::format(" <span class=\"badge {}\">{}: {}</span>",
                         FromName<Verdict>(it.key()) == Verdict::kBenign ? "rec" : "neutral", E(it.key()),
                         E(InlineText(*it)));
    out += "</p>";
    out += BranchRecords(config, group.result.records);
  }
  return out + "</section>";
}

std::string HtmlDisclosureSection(const ExperimentResults& r) {
  std::string out = "<section id=\"disclosure\"><h2>Disclosure</h2>", group;
  for (const Fact& f : Disclosure(r)) {
    if (f.group != group) {
      out += (group.empty() ? "" : "</dl>") + ("<h3>" + E(f.group) + "</h3><dl class=\"kv\">");
      group = f.group;
    }
    out += "<dt>" + E(f.term) + "</dt><dd>" + (f.code ? "<code>" + E(f.value) + "</code>" : E(f.value)) + "</dd>";
  }
  if (!group.empty()) out += "</dl>";
  out += "<h3>Configurations</h3><div class=\"table-wrap\"><table><thead>" +
         HtmlRow({"Configuration", "Status", "Flags", "Repeats", "Capture seconds", "Captures"}, true) +
         "</thead><tbody>";
  for (const ConfigEntry& c : r.measured.configs) {
    // The capture paths as read (a list that was not all paths stays in the entry's fields).
    const json& captures = Sub(c.fields, "captures").is_null() ? json(c.captures) : Sub(c.fields, "captures");
    out += HtmlRow({E(c.name), E(StatusText(c)), "<code>" + E(c.flags.value_or("")) + "</code>",
                    E(Count(c.repeats ? std::optional<double>(double(*c.repeats)) : std::nullopt)),
                    E(CaptureSeconds(c)), "<small>" + E(InlineText(captures)) + "</small>"});
  }
  return out + "</tbody></table></div></section>";
}

}  // namespace flipscope::report
