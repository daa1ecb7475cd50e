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
std::string OutcomeClass(const std::string& outcome) {
  return outcome == "damage" ? "bad" : outcome == "repair" || outcome == "benign" ? "rec" : "neutral";
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
  std::string row = HtmlRow({pos, Count(double(f.window)), E(Or(f.span, "—")), ClassCell(Or(f.klass, "—")),
                             TokenCode(f.base_text) + " " + E(Prob(Figure(f.base_prob))),
                             TokenCode(f.cand_text) + " " + E(Prob(Figure(f.cand_prob))),
                             E(Prob(Figure(f.cand_prob_of_base_token))), E(Small(Figure(f.base_margin))),
                             E(Small(Figure(f.kl)))});
  // The context cell has its own width rules, so it goes in before "</tr>" by hand.
  // The context is the text before the flip; the reference's token follows it, marked.
  return row.insert(row.size() - 5, "<td class=\"ctx\"><pre>" + E(f.context) + "<mark title=\"reference token\">" +
                                        E(f.base_text) + "</mark></pre></td>");
}

// One future as token spans: hover shows index, id and probability; the first difference is
// marked, and a first token the grammar put in place of the side's own choice (`first_masked`).
std::string FutureTokens(const json& fut, int first_diff, const std::string& own_choice) {
  const json& pieces = Sub(fut, "pieces");
  const json& probs = Sub(fut, "probs");
  const json& ids = Sub(fut, "tokens");
  if (!pieces.is_array() || pieces.empty()) return "<pre>" + E(Str(fut, "text", "—")) + "</pre>";
  std::string out = "<pre>";
  for (size_t i = 0; i < pieces.size(); ++i) {
    std::string tip = fmt::format("token {}", i);
    if (ids.is_array() && i < ids.size() && ids[i].is_number()) tip += fmt::format(" · id {}", ids[i].get<int64_t>());
    if (probs.is_array() && i < probs.size() && probs[i].is_number())
      tip += fmt::format(" · p={:.3f}", probs[i].get<double>());
    const std::string piece = pieces[i].is_string() ? pieces[i].get<std::string>() : "";
    tip += " · " + VisibleToken(piece);
    std::string text = E(piece);
    std::string span = fmt::format(R"(<span class="tok" title="{}">{}</span>)", E(tip), text);
    if (i == 0 && Sub(fut, "first_masked") == true)
      span = "<mark class=\"masked\" title=\"" +
             E("first masked: the grammar rejected this configuration's own choice " + VisibleToken(own_choice) +
               "; the future starts from the best token it allows") +
             "\">" + span + "</mark>";
    out += int(i) == first_diff ? "<mark class=\"diff\" title=\"first difference\">" + span + "</mark>" : span;
  }
  return out + "</pre>";
}

std::string BranchRecordHtml(const std::string& config, const json& b) {
  // Token indexes of the first difference in each future (absent when the texts are equal).
  int diff_base = Int(b, "first_difference", -1);
  int diff_cand = Int(b, "first_difference_cand", diff_base);
  auto reconverge = Num(b, "reconverge_at");
  std::string verdict = Str(b, "verdict", "unjudged");
  std::string cls = verdict == "benign" ? "rec" : "bad";
  // The outcome (what the change did) first; the pair's verdict beside it.
  const std::string outcome = Str(b, "outcome");
  std::string outcome_badge;
  if (!outcome.empty())
    outcome_badge = fmt::format(" <span class=\"badge {}\">{}{}</span>", OutcomeClass(outcome), E(outcome),
                                Str(b, "outcome_kind").empty() ? "" : ": " + E(Str(b, "outcome_kind")));
  std::string out = fmt::format(
      "<article class=\"branch\"><h3>{} · position {} · {}{} <span class=\"badge {}\">{}</span></h3>", E(config),
      E(Count(Num(b, "position"))), E(Str(b, "span", "outside any span")), outcome_badge, cls, E(verdict));
  if (!Str(b, "outcome_reason").empty()) out += "<p>" + E(Str(b, "outcome_reason")) + "</p>";
  if (!Str(b, "reason").empty()) out += "<p>" + E(Str(b, "reason")) + "</p>";
  out += fmt::format(
      "<p>The reference configuration picked {} where the candidate picked {}. {}</p>", TokenCode(Str(b, "base_text")),
      TokenCode(Str(b, "cand_text")),
      reconverge ? fmt::format("The futures agree again from token {} of the reference's future.", Count(reconverge))
                 : std::string("The futures do not agree again within the decoded length."));
  if (Sub(b, "reproduced") == false)
    out +=
        "<p><strong>Note:</strong> a recomputed row did not match its capture's digest here, so this future "
        "may not be the captured configuration's.</p>";
  out += "<h4>Shared prefix (tail)</h4><pre class=\"prefix\">…" + E(Str(b, "prefix_tail")) + "</pre>";
  for (const char* side : {"base", "cand"}) {
    const json& fut = Sub(b, std::string(side) + "_future");
    if (Sub(fut, "first_masked") == true)
      out += fmt::format(
          "<p>The tool-call grammar masked the {} choice {} here (first masked): a server constraining its calls "
          "would not write it, so this future starts from the best token the grammar allows (marked).</p>",
          side == std::string("base") ? "reference configuration's" : "candidate's",
          TokenCode(Str(b, std::string(side) + "_text")));
  }
  auto heading = [&](const char* title, const char* side) {
    const std::string decoding = Str(Sub(b, std::string(side) + "_future"), "decoding");
    return "<h4>" + std::string(title) + (decoding.empty() ? "" : " <small>(" + E(decoding) + ")</small>") + "</h4>";
  };
  out += "<div class=\"futures\"><div class=\"future base\">" + heading("Reference configuration's future", "base") +
         FutureTokens(Sub(b, "base_future"), diff_base, Str(b, "base_text")) + "</div><div class=\"future cand\">" +
         heading("Candidate's future", "cand") + FutureTokens(Sub(b, "cand_future"), diff_cand, Str(b, "cand_text")) +
         "</div></div>";
  const json& ref = Sub(b, "reference");
  if (ref.is_object()) out += "<h4>Reference continuation (the workload)</h4><pre>" + E(Str(ref, "text")) + "</pre>";
  return out + "</article>";
}

// A branch record as one row of the summary table: where, what each side picked, what it did.
std::string RecordRow(const json& b) {
  std::string outcome = Str(b, "outcome");
  if (!outcome.empty() && !Str(b, "outcome_kind").empty()) outcome += ": " + Str(b, "outcome_kind");
  auto reconverge = Num(b, "reconverge_at");
  return HtmlRow({Count(Num(b, "position")), E(Str(b, "span", "outside any span")),
                  TokenCode(Str(b, "base_text")) + " → " + TokenCode(Str(b, "cand_text")),
                  outcome.empty()
                      ? "—"
                      : fmt::format("<span class=\"badge {}\">{}</span>", OutcomeClass(Str(b, "outcome")), E(outcome)),
                  E(Str(b, "verdict", "unjudged")), reconverge ? "token " + Count(reconverge) : "no",
                  E(Str(b, "outcome_reason", Str(b, "reason")))});
}

// A configuration's records: the first kMaxRecordsShown in full, then summary rows, then a count.
std::string BranchRecords(const std::string& config, const json& records) {
  std::string out;
  const size_t n = records.is_array() ? records.size() : 0;
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
  for (const ConfigRow& row : RankedConfigs(r)) {
    const ComparisonRecord* cmp = MedianComparison(r.measured, row.name);
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
    const json& g = group.document;
    const std::string config = Or(group.config);
    out += "<h3>" + E(config) + "</h3>";
    const json& counts = Sub(g, "counts");
    if (counts.is_object()) out += "<p>" + E(ForkedText(counts)) + "</p>";
    if (!DecodingText(g).empty()) out += "<p>" + E(DecodingText(g)) + "</p>";
    if (Sub(counts, "outcomes").is_object()) {
      out += "<p>What the change did:";
      for (auto it = counts["outcomes"].begin(); it != counts["outcomes"].end(); ++it)
        out += fmt::format(" <span class=\"badge {}\">{}: {}</span>", OutcomeClass(it.key()), E(it.key()),
                           E(it->is_object() ? InlineText(Sub(*it, "total")) : InlineText(*it)));
      out += "</p><p>" + E(OutcomeCountsText(counts)) + "</p>";
    }
    if (counts.is_object() && !counts.empty()) {
      out += "<p>Verdicts:";
      for (auto it = counts.begin(); it != counts.end(); ++it)
        if (it.key() != "outcomes" && it.key() != "branch_points" && it.key() != "teacher_forced_only")
          out += fmt::format(" <span class=\"badge {}\">{}: {}</span>", it.key() == "benign" ? "rec" : "neutral",
                             E(it.key()), E(InlineText(*it)));
      out += "</p>";
    }
    out += BranchRecords(config, Sub(g, "records"));
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
                    E(Count(c.repeats ? std::optional<double>(double(*c.repeats)) : std::nullopt)), E(CaptureSeconds(c)),
                    "<small>" + E(InlineText(captures)) + "</small>"});
  }
  return out + "</tbody></table></div></section>";
}

}  // namespace flipscope::report
