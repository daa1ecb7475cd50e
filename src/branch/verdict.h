// Verdicts of the branch stage: pure functions over texts that judge two futures, each on its own
// against the transcript and as a pair, and attribute the outcome. Internal to the stage (its
// tests and the record builder use it); the stage's interface is branch/branch.h.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "records/records.h"
#include "results/branch_result.h"
#include "util/status.h"

namespace flipscope {

// Verdicts (records/modes.h) are in precedence order: when several apply, the first one wins.
// The JSON name: "invalid_tool_call", "literal_mutated", "wrong_command", "divergent", "benign".
const char* VerdictName(Verdict v);
// Every verdict, in precedence order.
std::span<const Verdict> AllVerdicts();

// A decoded continuation, one text piece per token.
struct FutureText {
  std::vector<std::string> pieces;
  bool ended = false;    // stopped at an end-of-generation token (never by a budget or the context)
  bool cap_hit = false;  // cut by the hard cap inside an unclosed tool call (--max-call-tokens)
  std::string stop{};    // how it stopped: "end_of_generation", "budget", "call_cap", "context" ("" unknown)
  // The pieces concatenated.
  std::string Text() const;
};

// The markers around a tool call's JSON: the `<tool_call>{...}</tool_call>` convention, or the
// chat template's own.
struct ToolEnvelope {
  std::string open = "<tool_call>";
  std::string close = "</tool_call>";
};

// A tool the workload offers: its function name and the arguments its JSON schema requires.
struct ToolSpec {
  std::string name;
  std::vector<std::string> required;
  std::vector<std::string> properties;  // every argument its schema names
};
// Reads tool definitions, OpenAI style ({"type":"function","function":{"name","parameters"}})
// or bare ({"name","parameters"}); error names the bad entry.
Result<std::vector<ToolSpec>> ParseToolSpecs(const nlohmann::json& tools);

// Literals the context holds: every word of the context (exact matches are never mutations) and
// its literals (addresses, ports, interfaces, host names, paths, identifiers, numbers: what the
// workload's FindLiterals marks) that a copy can mangle.
class KnownLiterals {
 public:
  // Adds every word of text as known; the literals FindLiterals finds in it become copy sources.
  void AddText(std::string_view text);
  // Adds one literal (e.g. a workload span's label) as a copy source; its parts before a ':' '/'
  // or '@' (10.20.225.0 of 10.20.225.0/24) become known words.
  void AddLiteral(const std::string& literal);
  bool Contains(std::string_view word) const { return words_.count(std::string(word)) > 0; }
  const std::vector<std::string>& sources() const { return sources_; }

 private:
  std::set<std::string, std::less<>> words_;
  std::vector<std::string> sources_;
  std::set<std::string, std::less<>> source_set_;
};

// The words of text: maximal runs of [A-Za-z0-9_.:/@-] with trailing punctuation trimmed, each
// with its byte offset.
struct Word {
  std::string text;
  size_t offset = 0;
};
std::vector<Word> SplitWords(std::string_view text);
// Whether c can be part of a word: [A-Za-z0-9_.:/@-].
bool IsWordChar(char c);
// Whether a word looks like a literal worth copying exactly: it holds a digit, or it is a
// dotted/dashed name (host names, interface names), and has at least 4 characters.
bool IsLiteralLike(std::string_view word);

// A predicate over words (true: the word is known to be right).
using WordFilter = std::function<bool(std::string_view)>;

// A literal copied wrongly: the context holds `literal`, the future wrote `copy`.
struct LiteralMutation {
  std::string literal, copy;
};
// The first word of text ending at or after byte `from` that starts like a known literal
// (common prefix >= 3 bytes and >= half the literal), or is a known literal's tail after a
// separator with its head dropped (>= 4 bytes, >= half), and that is neither a known literal
// nor exempt (`exempt(word)` true: e.g. a word of the reference continuation, of the other
// future, or of the whole transcript). A last word cut by the token
// budget (`cut`) counts only once it has diverged. Words made of known literals joined by
// ':', '/' or '@' (host:port) are not mutations, nor is an exact copy with text appended after a
// separator (10.20.0.0/20.ArgumentParser, /etc/netplan/x.yaml): the literal's own characters are intact.
std::optional<LiteralMutation> FindLiteralMutation(std::string_view text, size_t from, bool cut,
                                                   const KnownLiterals& known, const WordFilter& exempt);

// A tool call as text: the call the branch point is inside, or the first one a continuation
// starts.
struct CallText {
  bool present = false;  // inside a call at the branch point, or the continuation opens one
  bool closed = false;   // the close marker follows within the continuation
  // Not closed, but the continuation ends right after a complete JSON body or inside the close
  // marker after one ("}}</tool"): cut while closing (body excludes the marker's part).
  bool closing = false;
  std::string body;  // between the markers (up to the end of the continuation when unclosed)
  // Bytes of prefix + continuation: where the open marker starts, and past the close marker (or
  // the end of the text when unclosed).
  size_t begin = 0, end = 0;
};
// Finds the call in prefix + continuation that is open at the boundary or starts after it
// (an open marker split across the boundary counts; the two markers with nothing between them
// name the markers, they are no call).
CallText ExtractCall(std::string_view prefix, std::string_view continuation, const ToolEnvelope& env);

// Bytes an unclosed call may run past the transcript's whole call before it counts as never
// closing: room for different whitespace and a slightly longer argument.
constexpr size_t kCallCloseSlack = 16;

// Whether text is the beginning of some JSON document (it may be incomplete, not wrong).
bool IsJsonPrefix(std::string_view text);
// s without its leading and trailing whitespace (spaces, tabs, line breaks).
std::string_view TrimSpace(std::string_view s);

// The verdict on one call: "" when well-formed (then `call` holds {"name","arguments"} if
// closed), else the one-line problem. `ended`: the continuation stopped at end of generation.
// `reference`: the same call in the transcript's continuation, to tell a call that runs past
// the reference's length unclosed from one merely cut by the token budget. An unfinished call
// that writes a key beside its name and arguments, or a tool definition's key (`type`,
// `parameters`, `description`, ...) that its tool takes no argument of, has run on into something
// else: a problem, however long it is.
struct CallCheck {
  std::string problem;
  std::optional<nlohmann::json> call;
  // The problem is only that the call ran past the reference's length unclosed (its JSON so far is
  // well-formed): what it wrote may still say how it differs (an unfinished wrong call).
  bool overlong = false;
};
CallCheck CheckCall(const CallText& c, bool ended, const std::vector<ToolSpec>& tools, const CallText* reference);

// For a call that is not closed (a budget or the cap cut it) but still a JSON prefix: how what it
// has written already differs from the reference call `ref` ({"name","arguments"}) whatever it
// would go on to write: another function name, an argument key or finished value the reference
// does not have, a container closed with another size, or an unfinished string that is no longer
// a prefix of the reference's value at its place. "" when it may still become the reference's call.
std::string PartialCallDifference(std::string_view body, const nlohmann::json& ref);
// How a complete call ({"name","arguments"}) differs from the reference's: the function, or the
// first differing argument ("the same call" when none).
std::string DescribeCallDifference(const nlohmann::json& call, const nlohmann::json& ref);
// What an unfinished call has finished ({"name", "arguments"}: its name and its arguments' finished
// values, containers still open left out), for grading it as the tool it calls; null before its
// name is written.
nlohmann::json PartialCallSoFar(std::string_view body);

// Byte length of the common prefix of a and b.
size_t CommonPrefix(std::string_view a, std::string_view b);
// Whether two futures say the same: equal texts, or one text a prefix of the other when the
// shorter was cut by the token budget.
bool SameText(const FutureText& a, const FutureText& b);

// Where two texts (two futures, or a future and the transcript) agree again after they first
// differ at tokens ia of a and ib of b (the tokens holding the first differing byte): the token
// indices i >= ia, j >= ib from which a run of equal pieces holds at least k pieces and 2k bytes
// (or equal tails to the end when both ended), each detour (i - ia, j - ib) at most k tokens; the
// smallest total detour, then the smaller detour of a. Nullopt: they do not agree again so.
struct Reconvergence {
  int base_at = 0, cand_at = 0;
  int base_detour = 0, cand_detour = 0;  // tokens from the first differing token to the match
};
std::optional<Reconvergence> FindReconvergence(const FutureText& a, const FutureText& b, int k);

struct FactTable;

// What the judge knows about a branch point's context.
struct JudgeContext {
  std::string prefix;      // the transcript's text before the branch point
  KnownLiterals literals;  // literals the context holds (add the prefix's text to it)
  // Words known to be right although the context before the branch point does not hold them
  // (e.g. every word of the whole transcript: a literal the session names later is a real
  // one, not a mangled copy); may be null. Not owned.
  const std::set<std::string, std::less<>>* known_words = nullptr;
  std::vector<ToolSpec> tools;  // empty = unknown: function names are not checked
  ToolEnvelope envelope;
  int reconverge = 8;  // K
  // The facts the whole transcript states (ports by service), for prose that invents them; may be
  // null (then only words the transcript nowhere holds are invented facts). Not owned.
  const FactTable* facts = nullptr;
};

struct Judgement {
  Verdict verdict = Verdict::kBenign;
  std::string reason;                      // one line
  std::optional<size_t> first_difference;  // byte offset where the future texts first differ
  std::optional<Reconvergence> reconverge;
};
// Judges a branch: invalid_tool_call > literal_mutated > wrong_command > divergent > benign.
// Futures with the same text are benign whatever they hold (the fork changed nothing).
Judgement Judge(const JudgeContext& ctx, const FutureText& base, const FutureText& cand, const FutureText& reference);

// ---- Attribution: each future on its own, then who broke what ----------------------------------

// What is wrong with one future on its own (Failure, records/modes.h), mildest first; a future
// has the worst that applies (docs/branch.md, "Graded failures").
// The JSON name: "none", "harmless_call", "invented_fact", "wrong_command", "literal_mutated",
// "invalid_tool_call", "runaway".
const char* FailureName(Failure f);
// Every failure but none, mildest first.
std::span<const Failure> AllFailures();

// A future's place on the one scale outcomes compare, best first: a failure, or below every
// failure the transcript's own text or call (none) and a call a reviewer accepts as it.
enum class Grade {
  kNone,
  kEquivalentCall,
  kHarmlessCall,
  kInventedFact,
  kWrongCommand,
  kLiteralMutated,
  kInvalidToolCall,
  kRunaway
};
// The JSON name: "none", "equivalent_call", or the failure's name.
const char* GradeName(Grade g);
// Whether a grade is a failure (harmless_call or worse).
inline bool IsFailure(Grade g) { return g >= Grade::kHarmlessCall; }

// A loop repeats its unit at least this often, over at least this many bytes (or, where the
// future's pieces are known, written by at least this many pieces), in the last quarter of a
// future (of its bytes or of its pieces) or more.
constexpr size_t kRunawayRepeats = 3;
constexpr size_t kRunawayBytes = 15;
constexpr size_t kRunawayPieces = 8;
// Copies that are alike only with their digits counted alike (an enumeration: .198, .199, .200)
// must repeat this often.
constexpr size_t kRunawayCountingRepeats = 6;
// A future read for loops: its text, its pieces (empty: unknown), whether it ended, the
// transcript's continuation at the point and the transcript's text before it.
struct RunawayText {
  std::string_view text;
  std::span<const std::string> pieces{};
  bool ended = false;
  std::string_view reference{}, prefix{};
};
// A runaway loop in a future that never ended: its tail repeats one unit (digits counted alike,
// so that a loop counting .198, .199 repeats) kRunawayRepeats times over kRunawayBytes or
// kRunawayPieces (copies alike only so: kRunawayCountingRepeats times), a unit that is not
// whitespace alone and whose repetition the transcript does not hold (its continuation; for a unit
// inside one word, such as zeros, its text before the point too); or its last kRunawayRepeats list
// items or more each extend the one before by the same text. The reason, or none.
std::optional<std::string> FindRunaway(const RunawayText& f);
// FindRunaway over a text alone (no pieces, no text before the point).
std::optional<std::string> FindRunaway(std::string_view text, bool ended, std::string_view reference);
// Whether a call is the transcript's once normalized: the same function, arguments equal with
// whitespace collapsed and trailing output filters of a command dropped (`| head -40`).
bool EquivalentCalls(const nlohmann::json& call, const nlohmann::json& ref);
// Whether a call only inspects: a read-only tool (get_, list_, show_, check_ ...), or every
// command it runs reads (show, ls, ss, --help, psql -c "SELECT ...") and none writes.
bool IsReadOnlyCall(const nlohmann::json& call);

// What a transcript states that prose must not contradict: for each name on a line that also
// names a port (postgres on the line of 127.0.0.1:5432), the ports given with it.
struct FactTable {
  std::map<std::string, std::set<std::string>, std::less<>> ports_of;
  // Per transcript line, its fact words (an address, a MAC, an interface, a host name, a path, a
  // number of 3+ digits), and per such word the lines that hold it: what the transcript gives a
  // thing is what the lines naming it hold.
  std::vector<std::vector<std::string>> line_facts;
  std::map<std::string, std::vector<size_t>, std::less<>> lines_of;
  // Per fact word given as a JSON field's value ("eta": "2026-03-19"), the fields (lower case)
  // that hold it anywhere in the transcript: what the value is.
  std::map<std::string, std::set<std::string>, std::less<>> fields_of;
  // Per innermost JSON object of the transcript (a tool's output, a call's arguments) holding two
  // or more fact words, its fields (key in lower case -> value); per such value, the objects that
  // hold it: which order a tracking number, an amount or an ETA belongs to.
  std::vector<std::map<std::string, std::string>> records;
  std::map<std::string, std::vector<size_t>, std::less<>> records_of;
  // The file names the transcript writes only as a part of a longer word (token_expiry.py of
  // src/auth/token_expiry.py, test_token_expiry.py of tests/test_token_expiry.py::test_x): a file
  // named without its directory is the same file, no invented one.
  std::set<std::string, std::less<>> path_parts;
  // Per number of 3+ digits, what the transcript's text says it measures, by the unit written with
  // it (time, share, factor, size, tests, rows, segments, packets: QuantityOf in subjects.cpp); per
  // endpoint (an address, a host, an interface, a path), the roles its sentences give it ('s' after
  // `from`/`source`, 't' after `to`/`target`).
  std::map<std::string, std::set<std::string>, std::less<>> quantities_of;
  std::map<std::string, std::set<char>, std::less<>> roles_of;
  // Reads every line of the transcript's text.
  static FactTable FromText(std::string_view transcript);
};
// Whether a word states a fact that must come from somewhere: an address, a path, a host or file
// name, a version, a number of 3+ digits (not a standard's name, nor digits that only number words).
bool IsFactWord(std::string_view w);
// An invented fact in prose from byte `from` on: a fact-like word (an address, path, host or file
// name, version, a number of 3+ digits; not a number that only counts or orders words: `20-The`,
// `test_function_1`, code's `a.name`, nor the percentage of a stock phrase: `100% correct`, `99%
// sure`) that `known` does not hold (a word the end of the text
// cuts is `known` when it is the start of a known word), or a port given to a service whose
// transcript lines give it only one or two others, or a value of one kind (a MAC, a pid, an
// interface) written on a line beside a thing whose transcript lines give it only one or two
// other values of that kind and never this one (a row of one address with another's MAC), or a
// value written right after a field's name (`tracking number 2026-03-19`) that the transcript's
// JSON gives only as other fields (`"eta": "2026-03-19"`), never as that one, or a value of another
// quantity, role, field or record (ValueOfAnotherSubject). The reason, or none.
// `own`: where the future's text starts in `text` (what comes before it is the transcript's
// sentence so far, read for the service a "port N" belongs to).
std::optional<std::string> FindInventedFact(std::string_view text, size_t from, const FactTable& facts,
                                            const WordFilter& known, size_t own = 0);

// A value of one record given to another in a sentence, from byte `from` on: a sentence that names
// a record's subject (`NW-2025-1675`, the value of the records' `order_id`) and a value that the
// transcript's JSON gives only in records of another subject of that key (`1Z423EB1CB` in the
// record of `"order_id": "NW-2025-6100"`), where that subject is not in the sentence and no record
// holds both. The reason, or none.
std::optional<std::string> ValueOfAnotherRecord(std::string_view text, size_t from, const FactTable& facts);
// Fills a table's quantities_of and roles_of from the transcript's text (FactTable::FromText does).
void ReadQuantitiesAndRoles(std::string_view transcript, FactTable* t);
// A known value given to a subject the transcript gives it no part of, from byte `from` on: a value
// written after a field's name (`tracking number 2026-03-19`) or before a thing's name (`a
// 2026-03-20 order`) that the transcript's JSON gives only as other fields; a number with a unit
// of another quantity than every one the transcript writes it with (`121 times faster` for `121
// passed`); an endpoint in the other role than the transcript's sentences give it (`from
// 10.24.235.112` for the ping's target); a value of another record (ValueOfAnotherRecord).
std::optional<std::string> ValueOfAnotherSubject(std::string_view text, size_t from, const FactTable& facts);

// A near copy is of a fact word at least kNearCopyMinBytes long (a short name one byte off is a
// sibling: lab-sw04 beside lab-sw03), at most one edit per kNearCopyBytes bytes of it off.
constexpr size_t kNearCopyMinBytes = 12, kNearCopyBytes = 8;
// A copy of a transcript's fact word gone slightly wrong, from byte `from` on: a fact word that
// `known` does not hold, starts with the first byte of a transcript fact word of kNearCopyMinBytes
// or more (or differs from it in that byte alone, the rest more than kNearCopyMinBytes long:
// `amar.haddad@example.com`) and is within one edit per kNearCopyBytes bytes of it, in one of its
// parts (split at '.', '/', ':', '@'; as many parts as it), yet neither holds the other (a WAL
// segment with a digit lost, `postgresql-2015-main.log` for `postgresql-15-main.log`); or a fact
// word the transcript does not hold, written whole, that is a transcript fact word cut short: its
// tail after a '-' or '_' with a digit (`2974` of `NW-2025-2974`; not a path's last part), or a
// decimal cut or rounded to fewer decimals, or with decimals added (`43.3` of `43.33`, `28.7056` of
// `28.70`; not the same number). The transcript's word and the copy, or none.
std::optional<LiteralMutation> FindNearCopy(std::string_view text, size_t from, const FactTable& facts,
                                            const WordFilter& known);

// One future judged against the transcript alone.
struct SideJudgement {
  Failure failure = Failure::kNone;
  bool equivalent_call = false;  // no failure: a call the transcript's once normalized (EquivalentCalls)
  std::string reason;            // one line: the failure, or what the future does
  bool call_present = false;     // inside a tool call at the point, or opens one
  bool call_closed = false;
  std::string call_problem;            // "" when well-formed (or a problem the transcript's call has too)
  std::optional<nlohmann::json> call;  // the closed, well-formed call {"name","arguments"}
  std::optional<bool> call_matches;    // against the transcript's call; unset when either is incomplete
  std::string call_diverged;           // an unfinished call already differs from the transcript's: how
  // The unfinished call that differs calls a tool that only inspects (IsReadOnlyCall of what it has
  // finished: a read_file of another path, run_tests with another filter), however it would end.
  bool call_diverged_inspects = false;
  bool call_missing = false;  // the transcript calls right at the point, the future writes no call
  bool call_unasked = false;  // a complete call where the transcript's continuation makes none
  std::optional<LiteralMutation> mutation;
  std::string runaway;            // how it loops ("" when it does not)
  std::string invented_fact;      // the fact its prose invents ("" when none)
  bool writes_reference = false;  // the transcript's text as far as the future goes (or the same text)
  // Where the future agrees with the transcript again (base_*: the future, cand_*: the
  // transcript), by FindReconvergence; unset when it writes the transcript's text or never does.
  std::optional<Reconvergence> rejoins;
  bool follows_reference = false;  // writes_reference || rejoins: the one rule, nothing looser
};
// Judges a future against the transcript's continuation alone: its call (valid, or with its
// reason; against the transcript's call), literals it mangles, whether it rejoins the transcript.
SideJudgement JudgeSide(const JudgeContext& ctx, const FutureText& future, const FutureText& reference);
// A side judgement's grade on the outcome scale.
Grade GradeOf(const SideJudgement& s);
// A side judgement as a branch record holds it (records[].base, .cand in docs/branch.md), with
// how its future ended; strings as they are (the record builder makes them valid UTF-8).
ForkSideJudgement SideRecord(const SideJudgement& s, const FutureText& f);

// The outcome of a branch (Outcome, records/modes.h), from the two judgements: what the change
// (base -> cand) did.
// The JSON name: "damage", "repair", "both_fail", "different_but_fine", "benign".
const char* OutcomeName(Outcome o);
// Every outcome, worst first.
std::span<const Outcome> AllOutcomes();
struct Attribution {
  Outcome outcome = Outcome::kBenign;
  Failure kind = Failure::kNone;  // damage: cand's failure; repair: base's; both fail: cand's
  std::string reason;             // one line
};
// By the grades: damage when the candidate's is a failure worse than the base's, repair the other
// way round, both fail only for equal failing grades; neither fails and the futures differ for
// good (different but fine) or write the same / agree again within K tokens (benign:
// `pair.reconverge`, which FindReconvergence already bounds by K; `k` is kept for callers).
Attribution Attribute(const SideJudgement& base, const SideJudgement& cand, const Judgement& pair, int k);

}  // namespace flipscope
