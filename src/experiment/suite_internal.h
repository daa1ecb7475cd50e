// The suite's internals (not the stage's interface): what one session measured probe by probe,
// shared by suite.cpp (running the sessions) and suite_pool.cpp (pooling them).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "experiment/experiment.h"
#include "results/suite_result.h"
#include "util/names.h"

namespace flipscope {

// The kind of text a probe's predicted token lies in (KindRow.kind).
enum class TextKind { kSystem, kUser, kToolResult, kAssistantProse, kToolCallArguments, kLiteral, kOther };
template <>
struct Names<TextKind> {
  static constexpr std::pair<TextKind, const char*> v[] = {{TextKind::kSystem, "system"},
                                                           {TextKind::kUser, "user"},
                                                           {TextKind::kToolResult, "tool result"},
                                                           {TextKind::kAssistantProse, "assistant prose"},
                                                           {TextKind::kToolCallArguments, "tool-call arguments"},
                                                           {TextKind::kLiteral, "literal"},
                                                           {TextKind::kOther, "template"}};
};
// The kind of the innermost span holding token position pos (template text when none).
TextKind TextKindAt(const std::vector<Span>& spans, int32_t pos);

// One comparison probe by probe: each probe's position, flip (0/1), KL(base||cand) and the kind
// of text its predicted token lies in.
struct ProbeSeries {
  std::vector<int32_t> position;
  std::vector<double> flip, kl;
  std::vector<TextKind> kind;
};

// One session as the pool reads it: its weight, tokens, results, each configuration's median
// repeat probe by probe (the baseline's: its second repeat, the floor) and the repeat floor's
// bit-identity.
struct SessionMeasure {
  SuiteSession session;
  ExperimentResults results;
  std::map<std::string, ProbeSeries> series;  // config -> its median repeat against base r0
  std::optional<ProbeSeries> floor;           // baseline r1 against r0
  bool floor_bit_identical = false;
};

struct PoolOptions {
  int block = 16;  // probes per block of the bootstrap
  int replicates = 2000;
  int64_t window = 8192;  // depth windows, in tokens
};

// Pools the sessions' figures into the suite's results (everything but the head and the recipe).
void PoolSessions(const std::vector<SessionMeasure>& sessions, const Experiment& exp, const PoolOptions& o,
                  SuiteResults& out);
// The configurations the pooled recipe must not rank, with the reason: refused, failed or left
// out of its own recipe's ranking in at least one session (the first such session is named).
std::vector<RecipeNotRanked> NotRankedInSomeSession(const std::vector<SessionMeasure>& sessions,
                                                    const std::string& baseline);
// The results the recipe ranks on: the first session's, with every summary row and the floor
// replaced by the pooled figures (served twins and the exact reference left out) and the rows of
// not_ranked removed.
ExperimentResults PooledForRecipe(const std::vector<SessionMeasure>& sessions, const SuiteResults& suite,
                                  const std::vector<RecipeNotRanked>& not_ranked);
// The recipe on the pooled figures: PooledForRecipe ranked, and every configuration
// NotRankedInSomeSession leaves out that the sessions measured listed in not_ranked with why.
RecipeResult PooledRecipe(const std::vector<SessionMeasure>& sessions, const SuiteResults& suite,
                          const ModelInfo& model);
// The sessions whose own recipe recommends another configuration or orders two the other way
// round from the pooled ranking.
std::vector<RankDifference> RankDifferences(const std::vector<SessionMeasure>& sessions, const RecipeResult& pooled);

}  // namespace flipscope
