// Letting calls finish: when a future inside a tool call decodes past its budget, and how it stopped.
#include <gtest/gtest.h>

#include "branch/internal.h"

using namespace flipscope;
using flipscope::branch::CallBudget;
using flipscope::branch::Transcript;

namespace {

enum : int32_t { kOpen, kName, kArgs, kClose, kHi, kMore, kX };

// "hi<tool_call>{"name": "check_port", "arguments": {}}</tool_call>hi": the transcript's call.
Transcript Session() {
  Transcript t;
  t.vocab = {"<tool_call>",
             "{\"name\": \"check_port\", ",
             "\"arguments\": {}}",
             "</tool_call>",
             "hi",
             " and a long run of words",
             "x"};
  t.tokens = {kHi, kOpen, kName, kArgs, kClose, kHi};
  t.Index();
  return t;
}

}  // namespace

TEST(CallBudget, ExtendsAnOpenCallUntilItClosesRunsPastOrHitsTheCap) {
  const Transcript t = Session();
  const CallBudget budget(t, 2, 6);  // budget 2 tokens, cap 6
  std::vector<int32_t> open = {kOpen, kName};
  EXPECT_TRUE(budget.Extend(0, open));
  EXPECT_FALSE(budget.Extend(0, std::vector<int32_t>{kOpen, kName, kArgs, kClose})) << "closed";
  EXPECT_FALSE(budget.Extend(0, std::vector<int32_t>{kHi, kHi})) << "no call";
  // Longer than the transcript's whole call (plus slack) and still open: it ran past it.
  EXPECT_FALSE(budget.Extend(0, std::vector<int32_t>{kOpen, kName, kMore, kMore}));
  // At the cap, an open call stops; the record says the cap cut it, and that it did not end.
  std::vector<int32_t> capped = {kOpen, kX, kX, kX, kX, kX};
  const CallBudget tight(t, 2, 6);
  EXPECT_FALSE(tight.Extend(0, capped));
  FutureText f;
  tight.Classify(0, capped, FutureStop::kBudget, &f);
  EXPECT_TRUE(f.cap_hit);
  EXPECT_FALSE(f.ended);
  EXPECT_EQ(f.stop, "call_cap");
}

// Only the decoder knows why a future stopped: its length says nothing (a future the budget cut
// while the call was open, e.g. one decoded without the extension, is not one that ended).
TEST(CallBudget, EndedOnlyByAnEndOfGenerationTokenNeverByTheBudget) {
  const Transcript t = Session();
  const CallBudget budget(t, 2, 6);
  FutureText f;
  const std::vector<int32_t> open = {kOpen, kName};
  budget.Classify(0, open, FutureStop::kBudget, &f);
  EXPECT_FALSE(f.ended) << "an open call at the budget was cut, not ended";
  EXPECT_FALSE(f.cap_hit) << "below the cap";
  EXPECT_EQ(f.stop, "budget");
  budget.Classify(0, open, FutureStop::kEnd, &f);
  EXPECT_TRUE(f.ended);
  EXPECT_EQ(f.stop, "end_of_generation");
  // Shorter than the budget but cut by the context: not ended either.
  budget.Classify(0, std::vector<int32_t>{kHi}, FutureStop::kContext, &f);
  EXPECT_FALSE(f.ended);
  EXPECT_EQ(f.stop, "context");
  budget.Classify(0, std::vector<int32_t>{kHi}, FutureStop::kEnd, &f);
  EXPECT_TRUE(f.ended);
  // At the budget outside a call: cut by the budget, no cap.
  budget.Classify(0, std::vector<int32_t>{kHi, kHi}, FutureStop::kBudget, &f);
  EXPECT_FALSE(f.ended);
  EXPECT_FALSE(f.cap_hit);
  EXPECT_EQ(f.stop, "budget");
}

// A call whose JSON is complete, its close marker begun ("}}</tool") or not yet, is closing: judged
// as the complete call it is, and let decode on; under a grammar a call is let run to the cap.
TEST(CallBudget, ACallClosingOrUnderAGrammarDecodesOn) {
  Transcript t = Session();
  const int32_t kPartial = int32_t(t.vocab.size()), kLongArgs = kPartial + 1, kLongOpen = kPartial + 2;
  t.vocab.push_back("</tool");
  t.vocab.push_back("\"arguments\": {\"command\": \"a long argument, longer than the transcript's\"}}");
  t.vocab.push_back("\"arguments\": {\"command\": \"a long argument, longer than the transcript's");
  t.Index();
  const CallBudget budget(t, 2, 12);
  EXPECT_TRUE(budget.Extend(0, std::vector<int32_t>{kOpen, kName, kLongArgs, kPartial})) << "closing";
  EXPECT_TRUE(budget.Extend(0, std::vector<int32_t>{kOpen, kName, kLongArgs})) << "complete JSON: the marker is next";
  EXPECT_FALSE(budget.Extend(0, std::vector<int32_t>{kOpen, kName, kLongOpen})) << "ran past the transcript's call";
  const CallBudget constrained(t, 2, 12, true);
  EXPECT_TRUE(constrained.Extend(0, std::vector<int32_t>{kOpen, kName, kLongArgs}));
  EXPECT_FALSE(constrained.Extend(0, std::vector<int32_t>{kOpen, kName, kArgs, kClose})) << "closed";

  const ToolEnvelope env{"<tool_call>", "</tool_call>"};
  const CallText c = ExtractCall("hi", "<tool_call>{\"name\": \"check_port\", \"arguments\": {}}</tool", env);
  EXPECT_TRUE(c.closing);
  EXPECT_FALSE(c.closed);
  EXPECT_TRUE(CheckCall(c, false, {}, nullptr).problem.empty()) << CheckCall(c, false, {}, nullptr).problem;
  EXPECT_FALSE(CheckCall(c, true, {}, nullptr).problem.empty()) << "ended inside its marker: never closed";
  // A "<" inside an unfinished string is the JSON's, not the marker's.
  EXPECT_FALSE(ExtractCall("hi", "<tool_call>{\"name\": \"<", env).closing);
}
