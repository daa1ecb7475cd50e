// branch: follows the fork. At every disagreement between two captures (or every position of
// chosen ranges) each configuration decodes its own greedy future from its own choice, in its
// own configuration; the two futures are compared with each other and with the transcript's real
// continuation, and each branch gets a verdict. Contract of the output: docs/branch.md.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "util/status.h"

namespace flipscope {

// ---- Verdicts: pure functions over texts ---------------------------------------------------

// Verdicts in precedence order: when several apply, the first one wins.
enum class Verdict { kInvalidToolCall, kLiteralMutated, kWrongCommand, kDivergent, kBenign };
// The JSON name: "invalid_tool_call", "literal_mutated", "wrong_command", "divergent", "benign".
const char* VerdictName(Verdict v);
// Every verdict, in precedence order.
std::span<const Verdict> AllVerdicts();

// A decoded continuation, one text piece per token.
struct FutureText {
  std::vector<std::string> pieces;
  bool ended = false;  // stopped at end of generation (or of the context), not at the token budget
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
};
// Reads tool definitions, OpenAI style ({"type":"function","function":{"name","parameters"}})
// or bare ({"name","parameters"}); error names the bad entry.
Result<std::vector<ToolSpec>> ParseToolSpecs(const nlohmann::json& tools);

// Literals the context holds: every word of the context (exact matches are never mutations) and
// the literal-like ones (numbers, addresses, interface and host names) that a copy can mangle.
class KnownLiterals {
 public:
  // Adds every word of text; the literal-like ones become copy sources.
  void AddText(std::string_view text);
  // Adds one literal (e.g. a workload span's label) as a copy source.
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
// ':', '/' or '@' (host:port) are not mutations.
std::optional<LiteralMutation> FindLiteralMutation(std::string_view text, size_t from, bool cut,
                                                   const KnownLiterals& known,
                                                   const WordFilter& exempt);

// A tool call as text: the call the branch point is inside, or the first one a continuation
// starts.
struct CallText {
  bool present = false;  // inside a call at the branch point, or the continuation opens one
  bool closed = false;   // the close marker follows within the continuation
  std::string body;      // between the markers (up to the end of the continuation when unclosed)
};
// Finds the call in prefix + continuation that is open at the boundary or starts after it
// (an open marker split across the boundary counts).
CallText ExtractCall(std::string_view prefix, std::string_view continuation, const ToolEnvelope& env);

// Whether text is the beginning of some JSON document (it may be incomplete, not wrong).
bool IsJsonPrefix(std::string_view text);

// The verdict on one call: "" when well-formed (then `call` holds {"name","arguments"} if
// closed), else the one-line problem. `ended`: the continuation stopped at end of generation.
// `reference`: the same call in the transcript's continuation, to tell a call that runs past
// the reference's length unclosed from one merely cut by the token budget.
struct CallCheck {
  std::string problem;
  std::optional<nlohmann::json> call;
};
CallCheck CheckCall(const CallText& c, bool ended, const std::vector<ToolSpec>& tools, const CallText* reference);

// Byte length of the common prefix of a and b.
size_t CommonPrefix(std::string_view a, std::string_view b);
// Whether two futures say the same: equal texts, or one text a prefix of the other when the
// shorter was cut by the token budget.
bool SameText(const FutureText& a, const FutureText& b);

// Where two futures agree again after they first differ: the first base token index i (and
// cand index j) with k equal pieces a[i..i+k) == b[j..j+k), or equal tails when both ended.
struct Reconvergence {
  int base_at = 0, cand_at = 0;
  int base_detour = 0, cand_detour = 0;  // tokens from the first differing token to the match
};
std::optional<Reconvergence> FindReconvergence(const FutureText& a, const FutureText& b, int k);

// What the judge knows about a branch point's context.
struct JudgeContext {
  std::string prefix;       // the transcript's text before the branch point
  KnownLiterals literals;   // literals the context holds (add the prefix's text to it)
  // Words known to be right although the context before the branch point does not hold them
  // (e.g. every word of the whole transcript: a literal the session names later is a real
  // one, not a mangled copy); may be null. Not owned.
  const std::set<std::string, std::less<>>* known_words = nullptr;
  std::vector<ToolSpec> tools;  // empty = unknown: function names are not checked
  ToolEnvelope envelope;
  int reconverge = 8;       // K
};

struct Judgement {
  Verdict verdict = Verdict::kBenign;
  std::string reason;                      // one line
  std::optional<size_t> first_difference;  // byte offset where the future texts first differ
  std::optional<Reconvergence> reconverge;
};
// Judges a branch: invalid_tool_call > literal_mutated > wrong_command > divergent > benign.
// Futures with the same text are benign whatever they hold (the fork changed nothing).
Judgement Judge(const JudgeContext& ctx, const FutureText& base, const FutureText& cand,
                const FutureText& reference);

// ---- The stage ------------------------------------------------------------------------------

struct BranchOptions {
  std::string at = "flips";  // "flips": where the stored argmax differ; "ranges": every probed position of `ranges`
  std::string ranges;        // "A-B,C-D" (inclusive positions) or "tool_calls" (positions predicting a call's token)
  int max_tokens = 64;       // future length, first token included
  int max_branches = 0;      // 0 = all; else the first N branch points by position
  int reconverge = 8;        // K: agreement run for reconvergence, and the longest benign detour
  bool allow_fork = true;    // false: re-prefill every branch (the slow baseline, for benchmarks)
  bool progress = true;      // progress bar (on a terminal only)
};

// Futures one side already decoded while it was captured (the experiment runner forks during
// its captures): position -> the future from that side's own first token there. `reproduced`:
// the row at each position is bit-for-bit the side's capture's (true for the capture's own
// pass; for a repeat of the baseline, whether the repeat's row equals the compared capture's).
struct DecodedFutures {
  std::map<int32_t, Future> at;
  std::map<int32_t, bool> reproduced;
  int max_tokens = 0;  // the token budget they were decoded with
  std::string source;  // the capture file that decoded them
};

struct BranchRequest {
  std::string base_path, cand_path;  // capture files
  BranchOptions options;
  // Per side (base, cand): futures decoded already; a side they cover entirely (every branch
  // point, the same first token, at least max_tokens long or ended) needs no pass of its own.
  std::optional<DecodedFutures> decoded[2];
};

// Re-creates both captures' engines from their manifests (model file checked by SHA-256),
// decodes both futures at every branch point and judges them. Returns
// {"config": {..., "warnings": [...]}, "records": [...], "counts": {...}} (docs/branch.md).
Result<nlohmann::json> RunBranches(const BranchRequest& req);

// Counts per verdict over records, every verdict present (zeros included) plus "total".
nlohmann::json CountVerdicts(const nlohmann::json& records);
// Terminal lines summarising counts, e.g. "36 structurally invalid branches (invalid_tool_call)".
std::string SummaryText(const nlohmann::json& counts);

// One side's pass: teacher-forced over the transcript with the capture's probes (so the rows
// keep the capture's numerics), forking at each branch point, or re-prefilling each branch's
// prefix where the model cannot fork (recurrent/hybrid) or forking is disallowed.
struct SideInputs {
  std::span<const int32_t> tokens;
  std::span<const int32_t> probes;          // the capture's probe positions (ascending)
  std::span<const uint64_t> probe_digests;  // the capture's row digests (as many as probes), or empty
  std::vector<int32_t> points;              // branch positions, ascending, each one of the probes
  std::vector<int32_t> firsts;              // the side's own first token at each point
  int max_tokens = 64;
  bool allow_fork = true;
  std::string progress_label;               // progress-bar label; empty = no bar
};
struct SidePass {
  std::vector<std::vector<int32_t>> tokens;  // per point: the future, first token included
  std::vector<std::vector<float>> probs;     // per point: each chosen token's probability
  std::vector<bool> reproduced;              // per point: the recomputed row has the capture's digest
  int64_t rows_checked = 0, rows_reproduced = 0;  // over every probe (when digests are given)
  bool forked = true;                        // false: re-prefilled per branch
  double seconds = 0;
  std::string decoded_during;                // non-empty: futures taken from this capture's own pass
};
// A side's pass made of futures decoded during a capture, when they cover every point with the
// same first tokens under a budget of at least max_tokens (cut to it); nullopt otherwise.
std::optional<SidePass> SideFromDecoded(const DecodedFutures& d, const std::vector<int32_t>& points,
                                        const std::vector<int32_t>& firsts, int max_tokens);
// Runs one side on an engine created with n_seq_max = 2; errors name the bad point.
Result<SidePass> RunSide(LlamaEngine& engine, const SideInputs& in);

}  // namespace flipscope
