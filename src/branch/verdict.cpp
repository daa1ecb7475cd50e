// Judging a branch: the two futures against each other and against the reference continuation.
#include "branch/verdict.h"

#include <fmt/format.h>

#include <algorithm>

#include "util/names.h"

namespace flipscope {
namespace {

constexpr Verdict kAll[] = {Verdict::kInvalidToolCall, Verdict::kLiteralMutated, Verdict::kWrongCommand,
                            Verdict::kDivergent, Verdict::kBenign};

// Index of the piece that holds byte `offset` of the concatenated text (pieces.size() past the end).
std::string Excerpt(std::string_view s, size_t offset, size_t n = 32) {
  std::string out;
  for (size_t i = offset; i < s.size() && i < offset + n; ++i)
    out += s[i] == '\n' ? std::string("\\n") : std::string(1, s[i]);
  return out;
}

// The trailing part of the prefix that a word in the continuation may continue ("port 54" -> "54").
std::string_view PartialWord(std::string_view prefix) {
  std::vector<Word> words = SplitWords(prefix.substr(prefix.size() > 256 ? prefix.size() - 256 : 0));
  if (words.empty()) return {};
  size_t base = prefix.size() > 256 ? prefix.size() - 256 : 0;
  const Word& w = words.back();
  size_t end = base + w.offset + w.text.size();
  // Only a word that runs up to the boundary (trailing punctuation included) is cut by it.
  size_t raw_end = end;
  while (raw_end < prefix.size() && std::string_view(".:/-@").find(prefix[raw_end]) != std::string_view::npos)
    ++raw_end;
  if (raw_end != prefix.size()) return {};
  return prefix.substr(base + w.offset);
}

// The words of text, as a set.
std::set<std::string, std::less<>> WordSet(const std::string& text) {
  std::set<std::string, std::less<>> out;
  for (Word& w : SplitWords(text)) out.insert(std::move(w.text));
  return out;
}

// Bytes into the transcript's continuation within which its call must open for a future to be
// expected to make it: room for a role header ("assistant\n", "<start_of_turn>model\n").
constexpr size_t kCallExpectedBytes = 32;

// Where the first call-open marker of a continuation starts, in bytes after the branch point (0
// for one begun in the prefix, or a call open at the point); nullopt when it opens none.
std::optional<size_t> OpenAfterPoint(const JudgeContext& ctx, std::string_view continuation) {
  if (ctx.envelope.open.empty()) return std::nullopt;
  if (ExtractCall(ctx.prefix, "", ctx.envelope).present) return 0;  // inside a call already
  const size_t keep = std::min(ctx.prefix.size(), ctx.envelope.open.size() - 1);
  const std::string joined = ctx.prefix.substr(ctx.prefix.size() - keep) + std::string(continuation);
  const size_t at = joined.find(ctx.envelope.open);
  if (at == std::string::npos) return std::nullopt;
  return at > keep ? at - keep : 0;
}

}  // namespace

const char* VerdictName(Verdict v) { return NameOf(v).data(); }

std::span<const Verdict> AllVerdicts() { return kAll; }

namespace {

// What both judges need from the transcript's continuation: its call, that call's own problem,
// its words, and the part of a word the prefix ends with.
struct ReferenceFacts {
  std::string text, partial;
  CallText call;
  CallCheck check;
  std::set<std::string, std::less<>> words;
};

ReferenceFacts ReadReference(const JudgeContext& ctx, const FutureText& reference) {
  ReferenceFacts r;
  r.text = reference.Text();
  r.call = ExtractCall(ctx.prefix, r.text, ctx.envelope);
  r.check = CheckCall(r.call, reference.ended, ctx.tools, nullptr);
  r.partial = std::string(PartialWord(ctx.prefix));
  r.words = WordSet(r.partial + r.text);
  return r;
}

// A future's call checked; a problem the transcript's own call has too (e.g. a tool the workload
// does not list) is not the future's doing, and a call the hard cap cut is not judged unclosed.
CallCheck CheckFutureCall(const JudgeContext& ctx, const ReferenceFacts& ref, const FutureText& f,
                          const std::string& text, CallText* c) {
  *c = ExtractCall(ctx.prefix, text, ctx.envelope);
  CallCheck ck = CheckCall(*c, f.ended, ctx.tools, f.cap_hit ? nullptr : &ref.call);
  if (ck.problem == ref.check.problem) ck.problem.clear();
  return ck;
}

// How a future's unfinished call (cut by a budget or the cap, well-formed so far) already differs
// from the transcript's call, "" when it does not or there is none: a wrong argument written
// before the cut is wrong however the call would have ended.
std::string UnfinishedCallDifference(const ReferenceFacts& ref, const CallText& c, const CallCheck& ck) {
  if (!c.present || c.closed || ck.call || (!ck.problem.empty() && !ck.overlong) || !ref.check.call) return "";
  std::string d = PartialCallDifference(c.body, *ref.check.call);
  if (d.empty() || d.rfind("calls ", 0) == 0) return d;
  return (*ref.check.call)["name"].dump() + " " + d;
}

// A literal of the context copied wrongly, reading words across the branch point (a literal
// whose first digits are in the prefix is judged whole), from byte `from` of the future on.
// A word of the reference, of `others` or of the whole transcript is right.
std::optional<LiteralMutation> FutureMutation(const JudgeContext& ctx, const ReferenceFacts& ref, const FutureText& f,
                                              const std::string& text, size_t from,
                                              const std::set<std::string, std::less<>>* others) {
  WordFilter exempt = [&](std::string_view w) {
    return ref.words.count(w) || (others && others->count(w)) || (ctx.known_words && ctx.known_words->count(w));
  };
  return FindLiteralMutation(ref.partial + text, ref.partial.size() + from, !f.ended, ctx.literals, exempt);
}

// One future as Judge reads it: its name in reasons, the future and its text.
struct NamedFuture {
  const char* name;
  const FutureText& f;
  const std::string& text;
};

// Step 3 of Judge: each well-formed call that is not the transcript's (where the two futures'
// calls differ), and each unfinished call that already differs from it (not as the other's does).
std::vector<std::string> WrongCalls(const NamedFuture (&sides)[2], const std::optional<nlohmann::json> (&calls)[2],
                                    const std::string (&unfinished)[2], const ReferenceFacts& ref) {
  std::vector<std::string> wrong;
  if (ref.check.call && calls[0] != calls[1]) {
    for (int s = 0; s < 2; ++s)
      if (calls[s] && *calls[s] != *ref.check.call)
        wrong.push_back(std::string(sides[s].name) + " " + DescribeCallDifference(*calls[s], *ref.check.call));
  }
  for (int s = 0; s < 2; ++s)
    if (!unfinished[s].empty() && unfinished[s] != unfinished[1 - s])
      wrong.push_back(std::string(sides[s].name) + " " + unfinished[s] + " before its call was cut");
  return wrong;
}

}  // namespace

Judgement Judge(const JudgeContext& ctx, const FutureText& base, const FutureText& cand, const FutureText& reference) {
  Judgement j;
  if (SameText(base, cand)) {
    j.reason = "both futures write the same text";
    return j;
  }
  const std::string ta = base.Text(), tc = cand.Text();
  const size_t fd = CommonPrefix(ta, tc);
  j.first_difference = fd;
  j.reconverge = FindReconvergence(base, cand, ctx.reconverge);
  const NamedFuture sides[] = {{"base", base, ta}, {"cand", cand, tc}};
  auto verdict = [&](Verdict v, std::vector<std::string> parts) {
    j.verdict = v;
    j.reason = fmt::format("{}", fmt::join(parts, "; "));
    return j;
  };
  const ReferenceFacts ref = ReadReference(ctx, reference);

  // 1. Tool calls that do not close, parse, or call a known function with its arguments.
  std::vector<std::string> problems;
  std::optional<nlohmann::json> calls[2];
  std::string unfinished[2];  // an unfinished call that already differs from the transcript's
  for (int s = 0; s < 2; ++s) {
    CallText c;
    CallCheck ck = CheckFutureCall(ctx, ref, sides[s].f, sides[s].text, &c);
    if (!ck.problem.empty()) problems.push_back(std::string(sides[s].name) + ": " + ck.problem);
    calls[s] = ck.call;
    unfinished[s] = UnfinishedCallDifference(ref, c, ck);
  }
  if (!problems.empty()) return verdict(Verdict::kInvalidToolCall, problems);
  // Two complete calls that differ are two different actions, whatever JSON scaffolding
  // (the `", "arguments": ` and an argument's key) they share: that run of tokens is no agreement.
  if (calls[0] && calls[1] && *calls[0] != *calls[1]) j.reconverge.reset();

  // 2. A literal of the context copied wrongly where the futures differ. A word both futures
  // write is not the fork's doing (e.g. both enumerate lab-sw02 after lab-sw01).
  const std::set<std::string, std::less<>> words[2] = {WordSet(ref.partial + ta), WordSet(ref.partial + tc)};
  std::vector<std::string> mutations;
  for (int s = 0; s < 2; ++s)
    if (auto m = FutureMutation(ctx, ref, sides[s].f, sides[s].text, fd, &words[1 - s]))
      mutations.push_back(fmt::format("{} copies {} as \"{}\"", sides[s].name, m->literal, m->copy));
  if (!mutations.empty()) return verdict(Verdict::kLiteralMutated, mutations);

  // 3. A well-formed call that is not the reference's call (and not the other future's).
  if (auto wrong = WrongCalls(sides, calls, unfinished, ref); !wrong.empty())
    return verdict(Verdict::kWrongCommand, wrong);

  // 4. Reconverged (benign: FindReconvergence bounds the detours) or not (divergent).
  if (j.reconverge)
    return verdict(Verdict::kBenign, {fmt::format("the futures agree again after {} / {} tokens",
                                                  j.reconverge->base_detour, j.reconverge->cand_detour)});
  return verdict(Verdict::kDivergent,
                 {fmt::format("base writes \"{}\", cand \"{}\"", Excerpt(ta, fd), Excerpt(tc, fd))});
}

namespace {

// The words a future may state as facts: words of the transcript, of its continuation and of the
// literals known at the point (ctx and ref must outlive the filter).
WordFilter KnownFactWords(const JudgeContext& ctx, const ReferenceFacts& ref) {
  auto exact = [&ctx, &ref](std::string_view w) {
    if (ref.words.count(w) || ctx.literals.Contains(w)) return true;
    if (ctx.facts && ctx.facts->path_parts.count(w)) return true;  // a file named without its directory
    if (!ctx.known_words) return false;
    // A word of the transcript, or the start of one (an address cut before its last part).
    auto it = ctx.known_words->lower_bound(w);
    return it != ctx.known_words->end() && it->compare(0, w.size(), w) == 0;
  };
  // The same word capitalized (a sentence's first word: Lab-sw02 for lab-sw02) names the same thing.
  WordFilter one = [exact](std::string_view w) {
    if (exact(w)) return true;
    std::string low(w);
    low[0] = char(std::tolower(static_cast<unsigned char>(low[0])));
    if (exact(low)) return true;
    std::transform(low.begin(), low.end(), low.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return exact(low);
  };
  // Known parts joined by ':' '/' '@' (0.0.0.0:0 of 0.0.0.0 and 0, db-east-02:db) state nothing
  // new; nor does a known word with a known part after ':' or '@' (tests/test_totals.py:1, a known
  // path and a line number). Two known paths joined by '/' can make a path nobody named.
  return [one](std::string_view w) {
    if (one(w)) return true;
    if (w.find_first_of(":/@") == std::string_view::npos) return false;
    auto parts_known = [&](std::string_view seps) {
      size_t start = 0;
      for (size_t i = 0; i <= w.size(); ++i) {
        if (i < w.size() && seps.find(w[i]) == std::string_view::npos) continue;
        if (i > start && !one(w.substr(start, i - start))) return false;
        start = i + 1;
      }
      return true;
    };
    return parts_known(":/@") || (w.find_first_of(":@") != std::string_view::npos && parts_known(":@"));
  };
}

// The transcript's line the point is in, up to 200 bytes before it: prose is read with it, so that
// a port is read with the service the sentence began with ("PostgreSQL listens on" | " port 128").
std::string LineBeforePoint(const JudgeContext& ctx) {
  const size_t line = ctx.prefix.find_last_of("\n");
  std::string lead = ctx.prefix.substr(line == std::string::npos ? 0 : line + 1);
  if (lead.size() > 200) lead.erase(0, lead.size() - 200);
  return lead;
}

// Prose that states a fact the transcript does not (FindInventedFact). `text` is the future's prose
// (a call in it blanked out), read after the line the point is in.
std::optional<std::string> InventedFact(const JudgeContext& ctx, const ReferenceFacts& ref, const std::string& text,
                                        size_t from) {
  static const FactTable kNoFacts;
  const std::string lead = LineBeforePoint(ctx);
  return FindInventedFact(lead + text, lead.size() + from, ctx.facts ? *ctx.facts : kNoFacts, KnownFactWords(ctx, ref),
                          lead.size());
}

// A transcript's fact word copied slightly wrong anywhere in the future, prose or call
// (FindNearCopy): a mangled copy, whether or not the workload marks the word a literal.
std::optional<LiteralMutation> NearCopy(const JudgeContext& ctx, const ReferenceFacts& ref, const std::string& text,
                                        size_t from) {
  if (!ctx.facts) return std::nullopt;
  const std::string lead = LineBeforePoint(ctx);
  return FindNearCopy(lead + text, lead.size() + from, *ctx.facts, KnownFactWords(ctx, ref));
}

// The future's text with its call blanked out (each byte a newline): what it says around the call.
std::string ProseAround(const JudgeContext& ctx, const CallText& c, std::string text) {
  if (!c.present) return text;
  const size_t p = ctx.prefix.size();
  const size_t begin = c.begin > p ? c.begin - p : 0, end = c.end > p ? std::min(c.end - p, text.size()) : 0;
  if (begin < end) std::fill(text.begin() + long(begin), text.begin() + long(end), '\n');
  return text;
}

// The worst failure of a judged side, with its reason: every one that applies is weighed, so a
// mangled port inside a harmless call is a mangled literal, and a call that loops is a runaway.
void Classify(const ReferenceFacts& ref, SideJudgement* s) {
  std::vector<std::pair<Failure, std::string>> found;
  if (!s->runaway.empty()) found.emplace_back(Failure::kRunaway, s->runaway);
  if (!s->call_problem.empty()) found.emplace_back(Failure::kInvalidToolCall, s->call_problem);
  if (s->call_matches == false) {
    const std::string how = DescribeCallDifference(*s->call, *ref.check.call);
    if (EquivalentCalls(*s->call, *ref.check.call))
      s->equivalent_call = true;
    else if (IsReadOnlyCall(*s->call))
      found.emplace_back(Failure::kHarmlessCall, how + ", a call that only inspects");
    else
      found.emplace_back(Failure::kWrongCommand, how);
  }
  // An unfinished call is graded as the finished one of its tool would be: a tool that only
  // inspects stays harmless whatever arguments it was given.
  if (!s->call_diverged.empty())
    found.emplace_back(s->call_diverged_inspects ? Failure::kHarmlessCall : Failure::kWrongCommand,
                       s->call_diverged + " before its call was cut" +
                           (s->call_diverged_inspects ? ", a call that only inspects" : ""));
  if (s->call_unasked) {
    const std::string what = fmt::format("calls {} where the transcript makes no call", (*s->call)["name"].dump());
    if (IsReadOnlyCall(*s->call))
      found.emplace_back(Failure::kHarmlessCall, what + ", a call that only inspects");
    else
      found.emplace_back(Failure::kWrongCommand, what);
  }

  if (s->mutation)
    found.emplace_back(Failure::kLiteralMutated,
                       fmt::format("copies {} as \"{}\"", s->mutation->literal, s->mutation->copy));
  if (!s->invented_fact.empty()) found.emplace_back(Failure::kInventedFact, s->invented_fact);
  // The worst; among equals the first found (the order above).
  auto worst =
      std::max_element(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  if (worst == found.end()) return;
  s->failure = worst->first;
  s->reason = worst->second;
}

// What a future without a failure does, in one line.
std::string FineReason(const SideJudgement& s, const std::string& text, const std::string& ref_text, size_t from) {
  if (s.equivalent_call) return "makes a call equivalent to the transcript's (the same once normalized)";
  // No call where the transcript calls: nothing wrong is run; the scale has no grade for a turn
  // that acts later or asks first, so it is said, not failed.
  if (s.call_missing) return "makes no tool call where the transcript calls one";
  if (s.call_matches == true) return "makes the transcript's call";
  if (s.writes_reference) return "writes the transcript's text";
  if (s.rejoins)
    return fmt::format("agrees with the transcript again from its token {} (the transcript's token {})",
                       s.rejoins->base_at, s.rejoins->cand_at);
  return fmt::format("writes \"{}\" where the transcript has \"{}\"", Excerpt(text, from), Excerpt(ref_text, from));
}

}  // namespace

SideJudgement JudgeSide(const JudgeContext& ctx, const FutureText& future, const FutureText& reference) {
  SideJudgement s;
  const ReferenceFacts ref = ReadReference(ctx, reference);
  const std::string text = future.Text();
  const size_t from = CommonPrefix(text, ref.text);  // where the future leaves the transcript
  // A future that ends its turn where the transcript's text goes on with the next one (a tool's
  // output, the user) wrote the transcript's text as far as it goes.
  s.writes_reference = from == text.size() || SameText(future, reference);
  if (!s.writes_reference) s.rejoins = FindReconvergence(future, reference, ctx.reconverge);
  s.follows_reference = s.writes_reference || s.rejoins.has_value();

  CallText c;
  CallCheck ck = CheckFutureCall(ctx, ref, future, text, &c);
  s.call_present = c.present;
  s.call_closed = c.closed;
  s.call_problem = ck.problem;
  s.call = ck.call;
  if (s.call && ref.check.call) s.call_matches = *s.call == *ref.check.call;
  s.call_diverged = UnfinishedCallDifference(ref, c, ck);
  // A call that ran past the transcript's unclosed but had already written something else is a
  // wrong call the budget cut, not a broken envelope: what it wrote says more than its length.
  // Only a value it was writing, though: keys or containers the transcript's call lacks, written
  // past its length, are a call running on into something else (still invalid).
  if (ck.overlong && !s.call_diverged.empty()) s.call_problem.clear();
  if (!s.call_problem.empty()) s.call_diverged.clear();
  s.call_diverged_inspects = !s.call_diverged.empty() && IsReadOnlyCall(PartialCallSoFar(c.body));
  // The transcript's call is of a later turn (after the user or a tool has spoken) when the
  // reference, cut, ends inside it: a call of the fork's own turn is taken whole.
  const std::optional<size_t> ref_open = OpenAfterPoint(ctx, ref.text);
  const bool later_call =
      ref.call.present && !ref.call.closed && !ref.call.closing && !reference.ended && ref_open && *ref_open > 0;
  // A complete call where the transcript's turn makes none: an action nobody asked for.
  s.call_unasked = s.call && !ref.check.call && (!ref.call.present || later_call);
  // The transcript is inside its call here, or opens it within its turn's first bytes (a role
  // header such as "assistant\n"), and the future, with room to, writes no call at all: the
  // action is missing, as wrong as a different one. A call the transcript makes later is not
  // expected of a future yet.
  const bool calls_here = ref.check.call && ref_open && *ref_open <= kCallExpectedBytes;
  s.call_missing = calls_here && !c.present && text.size() >= *ref_open + ctx.envelope.open.size();
  s.mutation = FutureMutation(ctx, ref, future, text, from, nullptr);
  if (!s.writes_reference)
    if (auto loop = FindRunaway({.text = text,
                                 .pieces = future.pieces,
                                 .ended = future.ended,
                                 .reference = ref.text,
                                 .prefix = ctx.prefix}))
      s.runaway = *loop;
  // Prose around a call states facts as prose alone does (a port named before a call).
  if (!s.writes_reference) s.invented_fact = InventedFact(ctx, ref, ProseAround(ctx, c, text), from).value_or("");
  if (!s.writes_reference && !s.mutation) s.mutation = NearCopy(ctx, ref, text, from);
  Classify(ref, &s);
  if (s.failure == Failure::kNone) s.reason = FineReason(s, text, ref.text, from);
  if (future.cap_hit) s.reason += " (its call was cut by the token cap)";
  return s;
}

}  // namespace flipscope
