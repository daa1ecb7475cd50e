// The branch stage's result (docs/branch.md), typed: how it ran (its settings, both sides, the
// futures' decoding), one judged record per branch point, and the counts. The branch stage
// builds a BranchResult; only results/ turns it into JSON and back. Reading is tolerant (outside
// input): a field of another type reads as its default; the groups older versions did not write
// (a record's attribution, a future's decoding, the outcome counts) stay empty and are not written
// back, while a single field they lack (a side's stop, the tools) reads as none and is written as
// null; unknown fields are kept in `extra` and written back. Verdict, outcome and failure names
// stay words here: a file of a later version may hold one this version does not know, and the
// report shows it as written.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "records/records.h"

namespace flipscope {

// One side's decoded future at a branch point (records[].base_future, .cand_future).
struct ForkFuture {
  std::string text;                 // the pieces concatenated, invalid UTF-8 replaced
  std::vector<int64_t> tokens;      // token ids, the first one the side's own choice (or the grammar's)
  std::vector<double> probs;        // each token's probability under the side's own model
  std::vector<std::string> pieces;  // each token's text
  // How it was decoded ("free" or "grammar") and whether the grammar put another first token in
  // place of the side's own choice; nullopt in files written before futures could use a grammar.
  std::optional<std::string> decoding;
  bool first_masked = false;
  nlohmann::json extra = nlohmann::json::object();
};

// The tool call of a future judged on its own (records[].base.tool_call).
struct ForkToolCall {
  bool closed = false;
  std::optional<std::string> problem;     // why it is not a valid call; none when well-formed
  nlohmann::json call;                    // the closed, well-formed call {"name", "arguments"}, or null
  std::optional<bool> matches_reference;  // against the transcript's call; none when either is incomplete
  nlohmann::json extra = nlohmann::json::object();
};

// One future judged on its own against the transcript (records[].base, .cand).
struct ForkSideJudgement {
  std::string failure = "none";  // a failure's name: none, harmless_call, invented_fact, literal_mutated, ...
  // Its grade on the outcome scale (none, equivalent_call, or the failure's name); none in files
  // written before futures were graded.
  std::optional<std::string> grade;
  std::string reason;                     // one line
  std::optional<ForkToolCall> tool_call;  // none when the future is in no call
  struct Mutation {
    std::string literal, copy;  // the context's literal, and the future's wrong copy of it
  };
  std::optional<Mutation> literal_mutation;
  bool follows_reference = false;
  struct Rejoin {
    int64_t future = 0, transcript = 0;  // token indexes where the future agrees with the transcript again
  };
  std::optional<Rejoin> rejoins_at;
  bool ended = false;               // it ended with an end-of-generation token
  std::optional<std::string> stop;  // how it stopped: end_of_generation, budget, call_cap
  bool call_cap_hit = false;
  nlohmann::json extra = nlohmann::json::object();
};

// What the change (base -> cand) did at one branch point, each future judged on its own; absent
// from files written before outcomes were attributed.
struct ForkAttribution {
  std::string outcome;              // damage, repair, both_fail, different_but_fine, benign
  std::optional<std::string> kind;  // the failure behind it (outcome_kind); none when nothing failed
  std::string reason;               // one line (outcome_reason)
  bool call_cap_hit = false;        // either future was cut at the call cap
  ForkSideJudgement base, cand;

  // The outcome as its mode; none for a name this version does not know.
  std::optional<Outcome> OutcomeMode() const { return FromName<Outcome>(outcome); }
};

// One branch point judged (records[]).
struct ForkRecord {
  int64_t position = 0;             // the probe position both sides chose at
  std::optional<std::string> span;  // the transcript span of the futures' first token; none outside any
  int64_t base_token = 0, cand_token = 0;
  std::string base_text, cand_text;
  ForkFuture base_future, cand_future;
  std::string reference_text;             // the transcript's own continuation (reference.text)
  std::vector<int64_t> reference_tokens;  // (reference.tokens)
  std::string prefix_tail;                // the last ~200 bytes before the point
  // Token indexes where the futures agree again (base's, cand's); none when they do not.
  std::optional<int64_t> reconverge_at, reconverge_cand_at;
  // The first differing byte of the texts and the token of each future that holds it.
  std::optional<int64_t> first_difference, first_difference_cand, first_difference_byte;
  std::string verdict;  // the pair's verdict: a verdict's name
  std::string reason;   // one line
  std::optional<ForkAttribution> attribution;
  bool reproduced = true;  // both sides' recomputed rows matched their captures' digests
  nlohmann::json extra = nlohmann::json::object();

  // The verdict as its mode; none when unjudged or for a name this version does not know.
  std::optional<Verdict> VerdictMode() const { return FromName<Verdict>(verdict); }
};

// Damage or repair by the kind of failure behind it (counts.outcomes.damage, .repair). The three
// kinds every version wrote are always written; the graded ones (harmless_call, invented_fact,
// runaway) when counted, so that a file of an earlier version is written back as it was.
struct FailureTally {
  int64_t total = 0, invalid_tool_call = 0, literal_mutated = 0, wrong_command = 0;
  int64_t harmless_call = 0, invented_fact = 0, runaway = 0;
  // The count of a failure; null for none.
  int64_t* Of(Failure failure);
  // The count of a failure's name; null for another name (or none).
  int64_t* Of(std::string_view failure);
  const int64_t* Of(std::string_view failure) const { return const_cast<FailureTally*>(this)->Of(failure); }
  // Every kind's name and count, by name.
  std::vector<std::pair<std::string, int64_t>> KindsByName() const;
};
struct OutcomeTally {
  FailureTally damage, repair;
  int64_t both_fail = 0, different_but_fine = 0, benign = 0;
};

// The counts of a branch run (counts, free_counts): verdicts, outcomes, points.
struct BranchCounts {
  int64_t benign = 0, divergent = 0, invalid_tool_call = 0, literal_mutated = 0, wrong_command = 0;
  int64_t total = 0;                           // records judged
  std::optional<int64_t> branch_points;        // forkable flips before max_branches
  std::optional<int64_t> teacher_forced_only;  // flips where the model reads, never forked
  std::optional<OutcomeTally> outcomes;        // none in files written before outcomes
  nlohmann::json extra = nlohmann::json::object();

  // The count of a verdict.
  int64_t* OfVerdict(Verdict verdict);
  // The count of a verdict's name; null for another name.
  int64_t* OfVerdict(std::string_view verdict);
  const int64_t* OfVerdict(std::string_view verdict) const {
    return const_cast<BranchCounts*>(this)->OfVerdict(verdict);
  }
  // Each verdict's name and count and "total", in the order the document lists them (by name).
  std::vector<std::pair<std::string, int64_t>> VerdictsByName() const;
  // Each outcome's name and total, by name (the document's order).
  std::vector<std::pair<std::string, int64_t>> OutcomesByName() const;
};

// How the futures were decoded (config.decoding): asked and used, and why, or the grammar's facts.
struct ForkDecodingInfo {
  std::string asked, used;
  std::optional<std::string> why;                    // why free was used
  std::optional<std::string> source;                 // the grammar's source
  std::optional<bool> lazy;                          // the grammar applies from its triggers on
  std::optional<std::vector<std::string>> triggers;  // the grammar's triggers as llama.cpp states them
  std::optional<std::string> gbnf_sha256;            // the grammar text's hash
  std::optional<std::string> key_order;              // a note on the arguments' key order
  nlohmann::json extra = nlohmann::json::object();

  // The decoding used as its mode; none for a name this version does not know.
  std::optional<FutureDecoding> UsedMode() const { return FromName<FutureDecoding>(used); }
};

// One side of a branch run (config.base, .cand): its capture, model, settings and pass.
struct ForkSideInfo {
  std::string capture, model, model_sha256;
  nlohmann::json knobs;               // the capture's settings record (null for a server)
  std::string flags;                  // as llama.cpp or server flags
  std::optional<std::string> engine;  // llama or openai; none in older files
  bool forked = false;                // its pass forked the memory (else re-prefilled)
  double seconds = 0;
  int64_t rows_checked = 0, rows_reproduced = 0, branches_reproduced = 0;
  std::optional<std::string> decoded_during_capture;  // where its futures were decoded, if not here
  nlohmann::json extra = nlohmann::json::object();
};

// How a branch run went (config in the branch output, branch_config in results.json): the
// options, both sides, what it found and warned. Fields of files before they were written stay none.
struct BranchRunInfo {
  std::optional<ForkSideInfo> base, cand;
  std::string at;  // flips or ranges
  std::optional<std::string> ranges;
  int64_t max_tokens = 0;
  std::optional<int64_t> max_call_tokens;
  int64_t max_branches = 0;
  std::optional<std::string> pick;
  int64_t reconverge = 0;
  std::optional<std::string> fork_where;
  std::optional<ForkDecodingInfo> decoding;
  std::optional<int64_t> n_tokens, branch_points, n_branches;
  struct ReadOnly {
    int64_t position = 0;
    std::optional<std::string> span;
  };
  std::optional<std::vector<ReadOnly>> teacher_forced_only;     // flips where the model reads
  std::optional<std::pair<std::string, std::string>> envelope;  // tool-call markers (open, close)
  std::optional<std::vector<std::string>> tools;                // tool names; none when unknown (null)
  std::vector<std::string> warnings;
  std::optional<double> seconds;
  nlohmann::json extra = nlohmann::json::object();

  // The settings as their modes; none for a name this version does not know (or, fork_where, in
  // files written before it was).
  std::optional<BranchAt> AtMode() const { return FromName<BranchAt>(at); }
  std::optional<ForkScope> ForkWhereMode() const {
    return fork_where ? FromName<ForkScope>(*fork_where) : std::nullopt;
  }
};

// The branch stage's whole result.
struct BranchResult {
  BranchRunInfo config;
  std::vector<ForkRecord> records;  // in branch point order
  BranchCounts counts;

  // The branch output's document ({"config", "records", "counts"}; docs/branch.md).
  nlohmann::json ToJson() const;
  // Never fails: what is missing or mistyped reads as empty.
  static BranchResult FromJson(const nlohmann::json& j);
};

nlohmann::json ToJson(const ForkRecord& r);
ForkRecord ForkRecordFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const BranchCounts& c);
BranchCounts BranchCountsFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const BranchRunInfo& c);
BranchRunInfo BranchRunInfoFromJson(const nlohmann::json& j);

}  // namespace flipscope
