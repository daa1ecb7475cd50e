// Branch records: the futures as text, the judge's verdict, and the summary counts.
#include <fmt/format.h>

#include <algorithm>

#include "branch/internal.h"

namespace flipscope {
namespace branch {
namespace {

constexpr size_t kPrefixTailBytes = 200;

// The last ~n bytes of text, starting on a UTF-8 character boundary.
std::string Tail(std::string_view text, size_t n) {
  size_t start = text.size() > n ? text.size() - n : 0;
  while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
  return std::string(text.substr(start));
}

// The string with invalid UTF-8 (a piece holding part of a multi-byte character, a text cut
// inside one) replaced by U+FFFD, so that the records dump as JSON anywhere.
std::string Utf8(const std::string& s) {
  return nlohmann::json::parse(nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
      .get<std::string>();
}

std::vector<std::string> Utf8(const std::vector<std::string>& v) {
  std::vector<std::string> out;
  for (const auto& s : v) out.push_back(Utf8(s));
  return out;
}

FutureText ToText(const Transcript& t, const std::vector<int32_t>& tokens, bool ended) {
  FutureText f;
  f.ended = ended;
  for (int32_t tok : tokens) f.pieces.push_back(t.Piece(tok));
  return f;
}

// A decoded future as text, with how it stopped (by itself, at the budget, at the call cap).
FutureText DecodedText(const Transcript& t, const CallBudget& budget, int32_t position,
                       const std::vector<int32_t>& tokens, FutureStop stop) {
  FutureText f = ToText(t, tokens, false);
  budget.Classify(position, tokens, stop, &f);
  return f;
}

// A side's future in the record, with how it was decoded (docs/branch.md, "Decoding the futures").
nlohmann::json FutureJson(const FutureText& f, const SidePass& side, size_t i) {
  const bool known = i < side.decodings.size();  // passes made before decodings were kept: free
  return {{"text", Utf8(f.Text())},
          {"tokens", side.tokens[i]},
          {"probs", side.probs[i]},
          {"pieces", Utf8(f.pieces)},
          {"decoding", known ? side.decodings[i] : std::string("free")},
          {"first_masked", known && side.first_masked[i]}};
}

// Whether the model writes every token of [from, to): one turn of its own, no one else's text.
bool WrittenThrough(const Transcript& t, int32_t from, int32_t to) {
  for (int32_t q = from; q < to; ++q)
    if (!ModelWrites(t.spans, q)) return false;
  return true;
}

// The end of the reference for a future of ref_len tokens from `next`: a tool call of the turn
// the fork is in that the window reaches into is taken whole, so a future's complete call is
// compared with the transcript's complete call, not with its first part. A call of a later turn
// (after the user or a tool has spoken) answers another context and is not extended to.
int32_t ReferenceEnd(const Transcript& t, int32_t next, int ref_len) {
  const int32_t n = int32_t(t.tokens.size());
  int32_t end = std::min<int32_t>(n, next + ref_len);
  for (const Span& sp : t.spans)
    if (sp.kind == SpanKind::kToolCall && sp.begin < end && sp.end > end &&
        WrittenThrough(t, next, std::max(next, sp.begin)))
      end = std::min(n, sp.end);
  return end;
}

// The literals of the context, grown point by point (points ascend): every word of the text
// before the point except one the point cuts in two, and the workload's literal spans.
class ContextLiterals {
 public:
  explicit ContextLiterals(const Transcript& t) : t_(t) {}
  // Extends the known literals to the context before token `end_token`.
  void GrowTo(int32_t end_token) {
    size_t end = t_.offsets[size_t(end_token)], cut = end;
    const std::string& s = t_.text;
    while (cut > scanned_ && IsWordChar(s[cut - 1])) --cut;  // keep a cut word whole
    if (cut > scanned_) known_.AddText(std::string_view(s).substr(scanned_, cut - scanned_));
    scanned_ = std::max(scanned_, cut);
    for (; next_span_ < t_.spans.size() && t_.spans[next_span_].begin < end_token; ++next_span_)
      pending_.push_back(&t_.spans[next_span_]);
    std::erase_if(pending_, [&](const Span* sp) {
      if (sp->end > end_token) return false;
      if (sp->kind == SpanKind::kLiteral) known_.AddLiteral(sp->label);
      return true;
    });
  }
  KnownLiterals& known() { return known_; }

 private:
  const Transcript& t_;
  KnownLiterals known_;
  size_t scanned_ = 0, next_span_ = 0;
  std::vector<const Span*> pending_;  // spans begun but not yet ended
};

// A JSON value with every string made valid UTF-8 (judgement reasons quote future text).
nlohmann::json Utf8Json(const nlohmann::json& j) {
  return nlohmann::json::parse(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

template <typename T>
nlohmann::json OrNull(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// The token of future f that holds byte `byte` of its text (its length when none does).
int TokenAtByte(const FutureText& f, size_t byte) {
  size_t at = 0;
  for (size_t k = 0; k < f.pieces.size(); ++k)
    if ((at += f.pieces[k].size()) > byte) return int(k);
  return int(f.pieces.size());
}

// What is judged at branch point i: both futures, and the transcript's continuation (its tokens
// and text) as long as the longer future, so a call let finish is judged against the whole of
// the transcript's call.
struct PointTexts {
  FutureText base, cand, ref;
  std::vector<int32_t> ref_tokens;
};
PointTexts TextsAt(const Transcript& t, const CallBudget& budget, int32_t position, size_t i, const SidePass& base,
                   const SidePass& cand, int max_tokens) {
  PointTexts p;
  const int32_t next = position + 1;  // the first token of every future's place
  p.base = DecodedText(t, budget, position, base.tokens[i], base.stops[i]);
  p.cand = DecodedText(t, budget, position, cand.tokens[i], cand.stops[i]);
  const int ref_len = std::max({max_tokens, int(p.base.pieces.size()), int(p.cand.pieces.size())});
  const int32_t ref_end = ReferenceEnd(t, next, ref_len);
  p.ref_tokens.assign(t.tokens.begin() + next, t.tokens.begin() + ref_end);
  p.ref = ToText(t, p.ref_tokens, ref_end == int32_t(t.tokens.size()));
  return p;
}

// The judges' context at the futures' first token next, without its literals (the caller's).
JudgeContext ContextAt(const Transcript& t, int32_t next, int reconverge,
                       const std::set<std::string, std::less<>>* transcript_words) {
  JudgeContext ctx;
  ctx.prefix = t.text.substr(0, t.offsets[size_t(next)]);
  ctx.known_words = transcript_words;
  ctx.tools = t.tools;
  ctx.envelope = t.envelope;
  ctx.reconverge = reconverge;
  return ctx;
}

}  // namespace

void Transcript::Index() {
  text.clear();
  offsets.assign(tokens.size() + 1, 0);
  for (size_t i = 0; i < tokens.size(); ++i) {
    offsets[i] = text.size();
    text += Piece(tokens[i]);
  }
  offsets[tokens.size()] = text.size();
}

const std::string& Transcript::Piece(int32_t token) const {
  static const std::string empty;
  return token >= 0 && size_t(token) < vocab.size() ? vocab[size_t(token)] : empty;
}

nlohmann::json BuildRecords(const Transcript& t, const std::vector<Point>& points, const SidePass& base,
                            const SidePass& cand, const BranchOptions& o, const CallBudget& budget) {
  nlohmann::json records = nlohmann::json::array();
  ContextLiterals literals(t);
  // A literal the session names anywhere is a real one: a future that writes it early chose it,
  // it did not mangle a copy.
  std::set<std::string, std::less<>> transcript_words;
  for (Word& w : SplitWords(t.text)) transcript_words.insert(std::move(w.text));
  for (size_t i = 0; i < points.size(); ++i) {
    const Point& pt = points[i];
    const int32_t next = pt.position + 1;  // the first token of every future's place
    const PointTexts texts = TextsAt(t, budget, pt.position, i, base, cand, o.max_tokens);
    const FutureText &bf = texts.base, &cf = texts.cand, &rf = texts.ref;

    JudgeContext ctx = ContextAt(t, next, o.reconverge, &transcript_words);
    literals.GrowTo(next);
    ctx.literals = std::move(literals.known());  // moved in and back: no copy per record
    Judgement j = Judge(ctx, bf, cf, rf);
    const SideJudgement sb = JudgeSide(ctx, bf, rf), sc = JudgeSide(ctx, cf, rf);
    const Attribution a = Attribute(sb, sc, j, o.reconverge);
    literals.known() = std::move(ctx.literals);

    // The report marks futures by token: the token of each future that holds the first differing byte.
    std::optional<int> diff_base, diff_cand;
    if (j.first_difference) {
      diff_base = TokenAtByte(bf, *j.first_difference);
      diff_cand = TokenAtByte(cf, *j.first_difference);
    }
    std::string span = SpanLabelAt(t.spans, next);
    records.push_back({
        {"position", pt.position},
        {"span", span.empty() ? nlohmann::json(nullptr) : nlohmann::json(span)},
        {"base_token", pt.base_token},
        {"base_text", Utf8(t.Piece(pt.base_token))},
        {"cand_token", pt.cand_token},
        {"cand_text", Utf8(t.Piece(pt.cand_token))},
        {"base_future", FutureJson(bf, base, i)},
        {"cand_future", FutureJson(cf, cand, i)},
        {"reference", {{"text", Utf8(rf.Text())}, {"tokens", texts.ref_tokens}}},
        {"prefix_tail", Utf8(Tail(ctx.prefix, kPrefixTailBytes))},
        {"reconverge_at", j.reconverge ? nlohmann::json(j.reconverge->base_at) : nlohmann::json(nullptr)},
        {"reconverge_cand_at", j.reconverge ? nlohmann::json(j.reconverge->cand_at) : nlohmann::json(nullptr)},
        {"first_difference", OrNull(diff_base)},
        {"first_difference_cand", OrNull(diff_cand)},
        {"first_difference_byte", OrNull(j.first_difference)},
        {"verdict", VerdictName(j.verdict)},
        {"reason", Utf8(j.reason)},
        {"base", Utf8Json(SideJson(sb, bf))},
        {"cand", Utf8Json(SideJson(sc, cf))},
        {"outcome", OutcomeName(a.outcome)},
        {"outcome_kind", a.kind == Failure::kNone ? nlohmann::json(nullptr) : nlohmann::json(FailureName(a.kind))},
        {"outcome_reason", Utf8(a.reason)},
        {"call_cap_hit", bf.cap_hit || cf.cap_hit},
        {"reproduced", base.reproduced[i] && cand.reproduced[i]},
    });
  }
  return records;
}

}  // namespace branch

namespace {

// Adds one to counter[key] (created at zero).
void Bump(nlohmann::json& counter, const std::string& key) { counter[key] = counter.value(key, int64_t(0)) + 1; }

// The outcome counts of records: damage and repair by failure kind, the other outcomes plain.
nlohmann::json CountOutcomes(const nlohmann::json& records) {
  nlohmann::json out = nlohmann::json::object();
  for (Outcome o : AllOutcomes()) {
    if (o != Outcome::kDamage && o != Outcome::kRepair) {
      out[OutcomeName(o)] = 0;
      continue;
    }
    nlohmann::json& by_kind = out[OutcomeName(o)] = {{"total", 0}};
    for (Failure f : {Failure::kInvalidToolCall, Failure::kLiteralMutated, Failure::kWrongCommand})
      by_kind[FailureName(f)] = 0;
  }
  for (const auto& r : records) {
    const std::string o = r.value("outcome", std::string());
    if (!out.contains(o)) continue;
    if (!out[o].is_object()) {
      Bump(out, o);
      continue;
    }
    Bump(out[o], "total");
    if (r.contains("outcome_kind") && r["outcome_kind"].is_string()) Bump(out[o], r["outcome_kind"].get<std::string>());
  }
  return out;
}

}  // namespace

nlohmann::json CountVerdicts(const nlohmann::json& records) {
  nlohmann::json counts = nlohmann::json::object();
  for (Verdict v : AllVerdicts()) counts[VerdictName(v)] = 0;
  for (const auto& r : records)
    if (r.contains("verdict") && r["verdict"].is_string() && counts.contains(r["verdict"].get<std::string>()))
      Bump(counts, r["verdict"].get<std::string>());
  int64_t total = 0;
  for (Verdict v : AllVerdicts()) total += counts[VerdictName(v)].get<int64_t>();
  counts["total"] = total;
  counts["outcomes"] = CountOutcomes(records);
  return counts;
}

std::string SummaryText(const nlohmann::json& counts) {
  struct Line {
    Verdict v;
    const char* what;
  };
  static const Line lines[] = {
      {Verdict::kInvalidToolCall,
       "structurally invalid branches (tool call unclosed, unparsable, unknown or missing arguments)"},
      {Verdict::kLiteralMutated, "branches that copy a literal of the context wrongly"},
      {Verdict::kWrongCommand, "branches that make a well-formed but different call"},
      {Verdict::kDivergent, "divergent branches (different, well-formed text)"},
      {Verdict::kBenign, "benign branches (the same text, or agreeing again quickly)"},
  };
  const int64_t total = counts.value("total", int64_t(0)), points = counts.value("branch_points", total);
  // A subset says what it is a subset of.
  std::string out = points > total ? fmt::format("{} branches: the first {} of {} branch points\n", total, total, points)
                                   : fmt::format("{} branches\n", total);
  if (const int64_t read = counts.value("teacher_forced_only", int64_t(0)); read > 0)
    out += fmt::format(
        "  {:>6} teacher-forced only: where the model reads the next token (system or user text, tool "
        "results), not forked, neither damage nor repair  [teacher_forced_only]\n",
        read);
  const nlohmann::json outcomes = counts.value("outcomes", nlohmann::json::object());
  // What the change did, each future judged on its own: the damage and repair by failure kind.
  auto kinds = [](const nlohmann::json& by_kind) {
    std::vector<std::string> parts;
    for (Failure f : {Failure::kInvalidToolCall, Failure::kLiteralMutated, Failure::kWrongCommand})
      if (by_kind.value(FailureName(f), int64_t(0)) > 0)
        parts.push_back(fmt::format("{} {}", by_kind.value(FailureName(f), int64_t(0)), FailureName(f)));
    return parts.empty() ? std::string() : fmt::format(" ({})", fmt::join(parts, ", "));
  };
  static const std::pair<Outcome, const char*> outcome_lines[] = {
      {Outcome::kDamage, "damage: the candidate breaks what the reference's future got right"},
      {Outcome::kRepair, "repair: the candidate gets right what the reference's future broke"},
      {Outcome::kBothFail, "both futures fail"},
      {Outcome::kDifferentButFine, "different but fine"},
      {Outcome::kBenign, "benign (the same text, or agreeing again quickly)"},
  };
  if (outcomes.is_object() && !outcomes.empty()) {
    out += "  what the change did:\n";
    for (const auto& [o, what] : outcome_lines) {
      const nlohmann::json v = outcomes.value(OutcomeName(o), nlohmann::json(0));
      const int64_t n = v.is_object() ? v.value("total", int64_t(0)) : v.get<int64_t>();
      out += fmt::format("  {:>6} {}{}  [{}]\n", n, what, v.is_object() ? kinds(v) : "", OutcomeName(o));
    }
    out += "  verdicts on the pair of futures:\n";
  }
  for (const Line& l : lines)
    out += fmt::format("  {:>6} {}  [{}]\n", counts.value(VerdictName(l.v), int64_t(0)), l.what, VerdictName(l.v));
  return out;
}

}  // namespace flipscope
