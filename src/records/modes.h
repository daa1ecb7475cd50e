// records/modes.h: the named modes every stage hands on (replay, store, engine kind, where and how
// futures fork and decode, verdict, failure, outcome), each an enum with its Names<E> table: the
// one spelling in files, flags and messages. Part of the records library (records/records.h).
#pragma once

#include <utility>

#include "util/names.h"

namespace flipscope {

// How the transcript is computed (not a llama.cpp setting; docs/served.md): prefill feeds every
// token in -b chunks; served feeds what the model wrote one token per llama_decode call, as a
// deployed agent loop decoded it, and prefills what it read.
enum class Replay { kPrefill, kServed };  // --replay prefill|served
template <>
struct Names<Replay> {
  static constexpr std::pair<Replay, const char*> v[] = {{Replay::kPrefill, "prefill"}, {Replay::kServed, "served"}};
};

// How rows are stored; the name is the capture format's ("f32" / "bf16").
enum class StoreDtype { kF32, kBF16 };
template <>
struct Names<StoreDtype> {
  static constexpr std::pair<StoreDtype, const char*> v[] = {{StoreDtype::kF32, "f32"}, {StoreDtype::kBF16, "bf16"}};
};

// The engine a capture runs: linked llama.cpp, the FP64 reference, or a server over HTTP.
enum class EngineKind { kLlama, kExact, kOpenai };
template <>
struct Names<EngineKind> {
  static constexpr std::pair<EngineKind, const char*> v[] = {
      {EngineKind::kLlama, "llama"}, {EngineKind::kExact, "exact"}, {EngineKind::kOpenai, "openai"}};
};

// Where a fork follower forks (branch's fork_where): kAssistant only where a deployed model
// writes the next token (assistant messages and their tool calls), kAll everywhere.
enum class ForkScope { kAssistant, kAll };
template <>
struct Names<ForkScope> {
  static constexpr std::pair<ForkScope, const char*> v[] = {{ForkScope::kAssistant, "assistant"},
                                                            {ForkScope::kAll, "all"}};
};

// Where the branch points are: kFlips where the stored argmax differ; kRanges every probed
// position of the branch stage's ranges.
enum class BranchAt { kFlips, kRanges };
template <>
struct Names<BranchAt> {
  static constexpr std::pair<BranchAt, const char*> v[] = {{BranchAt::kFlips, "flips"}, {BranchAt::kRanges, "ranges"}};
};

// How futures are asked to decode (the branch stage's decoding): kGrammar greedy under the
// tool-call grammar a llama.cpp server would build for the workload's tools; kFree unconstrained
// greedy; kAuto grammar where the workload's own chat template renders tool calls, else free.
enum class DecodingMode { kAuto, kGrammar, kFree };
template <>
struct Names<DecodingMode> {
  static constexpr std::pair<DecodingMode, const char*> v[] = {
      {DecodingMode::kAuto, "auto"}, {DecodingMode::kGrammar, "grammar"}, {DecodingMode::kFree, "free"}};
};

// How a future was decoded: under the fork grammar, or unconstrained (no grammar, or the
// transcript before the point already left it). Spelled "grammar" and "free" in the futures
// sidecar and the branch output.
enum class FutureDecoding { kFree, kGrammar };
template <>
struct Names<FutureDecoding> {
  static constexpr std::pair<FutureDecoding, const char*> v[] = {{FutureDecoding::kGrammar, "grammar"},
                                                                 {FutureDecoding::kFree, "free"}};
};

// A pair's verdict at a branch point, in precedence order: when several apply, the first one wins.
enum class Verdict { kInvalidToolCall, kLiteralMutated, kWrongCommand, kDivergent, kBenign };
template <>
struct Names<Verdict> {
  static constexpr std::pair<Verdict, const char*> v[] = {{Verdict::kInvalidToolCall, "invalid_tool_call"},
                                                          {Verdict::kLiteralMutated, "literal_mutated"},
                                                          {Verdict::kWrongCommand, "wrong_command"},
                                                          {Verdict::kDivergent, "divergent"},
                                                          {Verdict::kBenign, "benign"}};
};

// What is wrong with one future on its own, mildest first (kNone: nothing found); a future has
// the worst that applies (docs/branch.md, "Graded failures").
enum class Failure {
  kNone,
  kHarmlessCall,     // a different call that only inspects (show, list, --help, SELECT)
  kInventedFact,     // prose that states an address, port, host, path or number the transcript does not
  kWrongCommand,     // a call that does the wrong thing, or none where the transcript calls
  kLiteralMutated,   // a literal of the context copied wrongly (in a call too: the more specific cause)
  kInvalidToolCall,  // a call that does not parse, close or name a tool with its required arguments
  kRunaway,          // a loop: one unit repeated to the budget, never ending
};
// As branch records spell them: a failure that is also a pair verdict has its name.
template <>
struct Names<Failure> {
  static constexpr std::pair<Failure, const char*> v[] = {{Failure::kNone, "none"},
                                                          {Failure::kHarmlessCall, "harmless_call"},
                                                          {Failure::kInventedFact, "invented_fact"},
                                                          {Failure::kWrongCommand, "wrong_command"},
                                                          {Failure::kLiteralMutated, "literal_mutated"},
                                                          {Failure::kInvalidToolCall, "invalid_tool_call"},
                                                          {Failure::kRunaway, "runaway"}};
};

// What the change (base -> cand) did at a branch point, from the two futures' judgements.
enum class Outcome { kDamage, kRepair, kBothFail, kDifferentButFine, kBenign };
template <>
struct Names<Outcome> {
  static constexpr std::pair<Outcome, const char*> v[] = {{Outcome::kDamage, "damage"},
                                                          {Outcome::kRepair, "repair"},
                                                          {Outcome::kBothFail, "both_fail"},
                                                          {Outcome::kDifferentButFine, "different_but_fine"},
                                                          {Outcome::kBenign, "benign"}};
};

}  // namespace flipscope
