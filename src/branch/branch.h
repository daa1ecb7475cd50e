// branch: follows the fork. At every disagreement between two captures (or every position of
// chosen ranges) each configuration decodes its own greedy future from its own choice, in its
// own configuration; each future is judged on its own against the transcript's real continuation,
// the outcome is attributed to the change (damage, repair, both fail, different but fine, benign)
// and the pair gets a verdict. Contract of the output: docs/branch.md.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "capture/capture.h"
#include "engine/engine.h"
#include "records/records.h"
#include "results/branch_result.h"
#include "util/names.h"
#include "util/status.h"
#include "util/util.h"

namespace flipscope {

// Where the branch points are (BranchAt) and how futures decode (DecodingMode) are modes of
// records/modes.h.

// Checked by RunBranches; its errors name these fields (e.g. "max_tokens must be >= 1").
struct BranchOptions {
  BranchAt at = BranchAt::kFlips;
  std::string ranges;   // "A-B,C-D" (inclusive positions) or "tool_calls" (positions predicting a call's token)
  int max_tokens = 64;  // future length, first token included
  int max_call_tokens =
      256;               // hard cap on a future whose tool call is still open (0: calls get no more than max_tokens)
  int max_branches = 0;  // 0 = all; else N branch points, chosen by pick
  ForkPick pick = ForkPick::kFirst;  // which N flips: the first by position, or spread over the session
  int reconverge = 8;                // K: agreement run for reconvergence, and the longest benign detour
  // kAssistant: fork only where a deployed model writes the next token (assistant messages and
  // their tool calls); the others are counted as teacher-forced only. kAll: everywhere.
  ForkScope fork_where = ForkScope::kAssistant;
  // How the futures are decoded (docs/branch.md, "Decoding the futures"); ResolveDecoding
  // resolves kAuto for a capture.
  DecodingMode decoding = DecodingMode::kAuto;
  bool allow_fork = true;  // false: re-prefill every branch (the slow baseline, for benchmarks)
  Log log;                 // status lines and progress bars (bars on a terminal only)
};

struct BranchRequest {
  std::string base_path, cand_path;  // capture files
  BranchOptions options;
  // The transcript's spans, tool definitions and tool-call form, in place of the captures' own
  // (which captures of token ids do not have: a history's workers are fed the rendered ids); its
  // `record` is unused. nullopt: the base capture's manifest.
  std::optional<ManifestWorkload> transcript;
  // Both sides' futures must come from `decoded` (each side's own llama.cpp decoded them: a
  // history's versions); a side they do not cover is an error, never a pass of this binary's.
  bool decoded_only = false;
  // Per side (base, cand): futures decoded already; a side they cover entirely (every branch
  // point, the same first token, at least max_tokens long or ended) needs no pass of its own.
  std::optional<DecodedFutures> decoded[2];
  // Model file -> SHA-256, kept by a caller that branches several pairs of one model (an
  // experiment's variants against its baseline) so each file is hashed once; null: per call.
  std::map<std::string, std::string>* model_hashes = nullptr;
};

// Re-creates both captures' engines from their manifests (model file checked by SHA-256),
// decodes both futures at every branch point and judges them: how it ran (with its warnings),
// one record per branch point and the counts (docs/branch.md; results/ writes its document).
Result<BranchResult> RunBranches(const BranchRequest& req);

// How the futures over a capture's transcript decode: `used`, the grammar (with `used` grammar),
// and `info` for the output's config (asked, used, why, and for a grammar its source, laziness,
// triggers and hash).
struct ForkDecoding {
  FutureDecoding used = FutureDecoding::kFree;
  std::optional<DecodeGrammar> grammar;
  ForkDecodingInfo info;
};
// Resolves a decoding mode for the capture's workload, model and chat template (from its
// manifest); an error for grammar where llama.cpp derives no tool-call grammar (it says why).
Result<ForkDecoding> ResolveDecoding(const std::string& capture_path, DecodingMode mode);
// The config's decoding for a server's futures: free, and why (what the request sends).
ForkDecodingInfo ServedDecodingInfo();

// The decode-budget extension for forks over a capture's transcript ("let calls finish"): past
// max_tokens a future inside a tool call decodes on until the call closes, runs clearly past the
// transcript's call (not under a grammar: constrained), or reaches max_call_tokens.
Result<ExtendFn> CallExtension(const std::string& capture_path, int max_tokens, int max_call_tokens,
                               bool constrained = false);

// Counts per verdict over records and their total, and the outcomes (damage and repair by failure
// kind, the others plain) counted from each record's attribution. (RunBranches adds branch_points
// and teacher_forced_only, which records cannot tell.)
BranchCounts CountVerdicts(const std::vector<ForkRecord>& records);
// Terminal lines summarising counts: the damage and repair the change did, then the verdicts; a
// subset of the branch points is named by how it was picked (the first N, or N spread out).
std::string SummaryText(const BranchCounts& counts, ForkPick pick = ForkPick::kFirst);

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
  ExtendFn extend;                       // may decode a future past max_tokens (CallExtension); empty: never
  std::optional<DecodeGrammar> grammar;  // futures decode under it (ResolveDecoding); none: free
  bool allow_fork = true;
  std::string progress_label;  // progress-bar label; empty = no bar
};
struct SidePass {
  std::vector<std::vector<int32_t>> tokens;       // per point: the future, first token included
  std::vector<std::vector<float>> probs;          // per point: each chosen token's probability
  std::vector<FutureStop> stops;                  // per point: why its future stopped
  std::vector<FutureDecoding> decodings;          // per point (Future::decoding)
  std::vector<bool> first_masked;                 // per point: the grammar replaced the side's first token
  std::vector<bool> reproduced;                   // per point: the recomputed row has the capture's digest
  int64_t rows_checked = 0, rows_reproduced = 0;  // over every probe (when digests are given)
  bool forked = true;                             // false: re-prefilled per branch
  double seconds = 0;
  std::string decoded_during;  // non-empty: futures taken from this capture's own pass
};
// A side's pass made of futures decoded during a capture, taken as they are, when they cover every
// point with the same first tokens (or the grammar's replacement) under the same max_tokens,
// max_call_tokens and decoding (a future is never cut back: where it would have stopped depends
// on the rule it was decoded under); nullopt otherwise.
std::optional<SidePass> SideFromDecoded(const DecodedFutures& d, const std::vector<int32_t>& points,
                                        const std::vector<int32_t>& firsts, int max_tokens, int max_call_tokens,
                                        FutureDecoding decoding);
// Runs one side on an engine created with n_seq_max = 2; errors name the bad point.
Result<SidePass> RunSide(LlamaEngine& engine, const SideInputs& in);

}  // namespace flipscope
