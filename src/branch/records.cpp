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
ForkFuture FutureOf(const FutureText& f, const SidePass& side, size_t i) {
  const bool known = i < side.decodings.size();  // passes made before decodings were kept: free
  ForkFuture out;
  out.text = Utf8(f.Text());
  out.tokens.assign(side.tokens[i].begin(), side.tokens[i].end());
  out.probs.assign(side.probs[i].begin(), side.probs[i].end());
  out.pieces = Utf8(f.pieces);
  out.decoding = std::string(NameOf(known ? side.decodings[i] : FutureDecoding::kFree));
  out.first_masked = known && side.first_masked[i];
  return out;
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

// A JSON value with every string made valid UTF-8 (a tool call parsed from a future's text).
nlohmann::json Utf8Json(const nlohmann::json& j) {
  return nlohmann::json::parse(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

// A side's judgement for the record, every string made valid UTF-8 (judgement reasons quote
// future text).
ForkSideJudgement SideOf(const SideJudgement& s, const FutureText& f) {
  ForkSideJudgement out = SideRecord(s, f);
  out.reason = Utf8(out.reason);
  if (auto& c = out.tool_call) {
    if (c->problem) c->problem = Utf8(*c->problem);
    c->call = Utf8Json(c->call);
  }
  if (auto& m = out.literal_mutation) m->literal = Utf8(m->literal), m->copy = Utf8(m->copy);
  if (out.stop) out.stop = Utf8(*out.stop);
  return out;
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

std::vector<ForkRecord> BuildRecords(const Transcript& t, const std::vector<Point>& points, const SidePass& base,
                                     const SidePass& cand, const BranchOptions& o, const CallBudget& budget) {
  std::vector<ForkRecord> records;
  records.reserve(points.size());
  ContextLiterals literals(t);
  // A literal the session names anywhere is a real one: a future that writes it early chose it,
  // it did not mangle a copy.
  std::set<std::string, std::less<>> transcript_words;
  for (Word& w : SplitWords(t.text)) transcript_words.insert(std::move(w.text));
  const FactTable facts = FactTable::FromText(t.text);
  for (size_t i = 0; i < points.size(); ++i) {
    const Point& pt = points[i];
    const int32_t next = pt.position + 1;  // the first token of every future's place
    const PointTexts texts = TextsAt(t, budget, pt.position, i, base, cand, o.max_tokens);
    const FutureText &bf = texts.base, &cf = texts.cand, &rf = texts.ref;

    JudgeContext ctx = ContextAt(t, next, o.reconverge, &transcript_words);
    ctx.facts = &facts;
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
    ForkRecord r;
    r.position = pt.position;
    if (std::string span = SpanLabelAt(t.spans, next); !span.empty()) r.span = std::move(span);
    r.base_token = pt.base_token, r.base_text = Utf8(t.Piece(pt.base_token));
    r.cand_token = pt.cand_token, r.cand_text = Utf8(t.Piece(pt.cand_token));
    r.base_future = FutureOf(bf, base, i), r.cand_future = FutureOf(cf, cand, i);
    r.reference_text = Utf8(rf.Text());
    r.reference_tokens.assign(texts.ref_tokens.begin(), texts.ref_tokens.end());
    r.prefix_tail = Utf8(Tail(ctx.prefix, kPrefixTailBytes));
    if (j.reconverge) r.reconverge_at = j.reconverge->base_at, r.reconverge_cand_at = j.reconverge->cand_at;
    r.first_difference = diff_base, r.first_difference_cand = diff_cand;
    if (j.first_difference) r.first_difference_byte = int64_t(*j.first_difference);
    r.verdict = VerdictName(j.verdict), r.reason = Utf8(j.reason);
    r.attribution =
        ForkAttribution{OutcomeName(a.outcome),
                        a.kind == Failure::kNone ? std::nullopt : std::optional<std::string>(FailureName(a.kind)),
                        Utf8(a.reason),
                        bf.cap_hit || cf.cap_hit,
                        SideOf(sb, bf),
                        SideOf(sc, cf)};
    r.reproduced = base.reproduced[i] && cand.reproduced[i];
    records.push_back(std::move(r));
  }
  return records;
}

}  // namespace branch

BranchCounts CountVerdicts(const std::vector<ForkRecord>& records) {
  BranchCounts c;
  OutcomeTally& o = c.outcomes.emplace();
  for (const ForkRecord& r : records) {
    if (const std::optional<Verdict> v = r.VerdictMode()) ++*c.OfVerdict(*v), ++c.total;
    const std::optional<Outcome> outcome = r.attribution ? r.attribution->OutcomeMode() : std::nullopt;
    if (!outcome) continue;
    FailureTally* by_kind = nullptr;
    switch (*outcome) {
      case Outcome::kDamage:
        by_kind = &o.damage;
        break;
      case Outcome::kRepair:
        by_kind = &o.repair;
        break;
      case Outcome::kBothFail:
        ++o.both_fail;
        break;
      case Outcome::kDifferentButFine:
        ++o.different_but_fine;
        break;
      case Outcome::kBenign:
        ++o.benign;
        break;
    }
    if (!by_kind) continue;
    ++by_kind->total;
    if (int64_t* k = by_kind->Of(r.attribution->kind.value_or(""))) ++*k;
  }
  return c;
}

std::string SummaryText(const BranchCounts& counts, ForkPick pick) {
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
  const int64_t total = counts.total, points = counts.branch_points.value_or(total);
  // A subset says what it is a subset of.
  std::string out =
      points <= total ? fmt::format("{} branches\n", total)
      : pick == ForkPick::kFirst
          ? fmt::format("{} branches: the first {} of {} branch points\n", total, total, points)
          : fmt::format("{} branches: {} of {} branch points, spread over the session\n", total, total, points);
  if (const int64_t read = counts.teacher_forced_only.value_or(0); read > 0)
    out += fmt::format(
        "  {:>6} teacher-forced only: where the model reads the next token (system or user text, tool "
        "results), not forked, neither damage nor repair  [teacher_forced_only]\n",
        read);
  // What the change did, each future judged on its own: the damage and repair by failure kind.
  auto kinds = [](const FailureTally& by_kind) {
    std::vector<std::string> parts;
    const auto failures = AllFailures();
    for (auto it = failures.rbegin(); it != failures.rend(); ++it)  // the worst first
      if (const int64_t n = *by_kind.Of(FailureName(*it)); n > 0)
        parts.push_back(fmt::format("{} {}", n, FailureName(*it)));
    return parts.empty() ? std::string() : fmt::format(" ({})", fmt::join(parts, ", "));
  };
  if (const auto& o = counts.outcomes) {
    const struct {
      Outcome outcome;
      int64_t n;
      std::string kinds;
      const char* what;
    } outcome_lines[] = {
        {Outcome::kDamage, o->damage.total, kinds(o->damage),
         "damage: the candidate breaks what the reference's future got right"},
        {Outcome::kRepair, o->repair.total, kinds(o->repair),
         "repair: the candidate gets right what the reference's future broke"},
        {Outcome::kBothFail, o->both_fail, "", "both futures fail"},
        {Outcome::kDifferentButFine, o->different_but_fine, "", "different but fine"},
        {Outcome::kBenign, o->benign, "", "benign (the same text, or agreeing again quickly)"},
    };
    out += "  what the change did:\n";
    for (const auto& l : outcome_lines)
      out += fmt::format("  {:>6} {}{}  [{}]\n", l.n, l.what, l.kinds, OutcomeName(l.outcome));
    out += "  verdicts on the pair of futures:\n";
  }
  for (const Line& l : lines)
    out += fmt::format("  {:>6} {}  [{}]\n", *counts.OfVerdict(VerdictName(l.v)), l.what, VerdictName(l.v));
  return out;
}

}  // namespace flipscope
