// Attribution: each future judged on its own against the transcript, then who broke what.
#include <gtest/gtest.h>

#include "branch/verdict.h"

using namespace flipscope;

namespace {

FutureText F(std::vector<std::string> pieces, bool ended = false) { return FutureText{std::move(pieces), ended}; }

const char* kTools = R"([{"type": "function", "function": {"name": "check_port", "parameters": {"type": "object",
   "properties": {"host": {"type": "string"}, "port": {"type": "integer"}}, "required": ["host", "port"]}}}])";

JudgeContext Context() {
  JudgeContext ctx;
  ctx.prefix = "<|im_start|>user\nIs db01 (10.20.30.4) listening on port 5432?<|im_end|>\n<|im_start|>assistant\n";
  ctx.literals.AddText(ctx.prefix);
  ctx.tools = *ParseToolSpecs(nlohmann::json::parse(kTools));
  return ctx;
}

// The transcript's call, and futures that make it, mangle its port, or never close it.
const FutureText kRef = F({"<tool_call>", "{\"name\": \"check_port\", \"arguments\": {\"host\": \"10.20.30.4\", ",
                           "\"port\": 5432}}", "</tool_call>", "<|im_end|>"},
                          true);
const FutureText kRight = kRef;
const FutureText kMangled = F({"<tool_call>", "{\"name\": \"check_port\", \"arguments\": {\"host\": \"10.20.30.4\", ",
                               "\"port\": 543", "1}}", "</tool_call>", "<|im_end|>"},
                              true);
const FutureText kUnclosed =
    F({"<tool_call>", "{\"name\": \"check_port\", \"arguments\": {\"host\": \"10.20.30.4\"", "<|im_end|>"}, true);

Attribution Attribute(const FutureText& base, const FutureText& cand, const FutureText& ref = kRef) {
  JudgeContext ctx = Context();
  return Attribute(JudgeSide(ctx, base, ref), JudgeSide(ctx, cand, ref), Judge(ctx, base, cand, ref), ctx.reconverge);
}

}  // namespace

TEST(JudgeSide, EachFutureOnItsOwn) {
  JudgeContext ctx = Context();
  SideJudgement right = JudgeSide(ctx, kRight, kRef);
  EXPECT_EQ(right.failure, Failure::kNone);
  EXPECT_TRUE(right.follows_reference);
  EXPECT_EQ(right.call_matches, true);
  SideJudgement mangled = JudgeSide(ctx, kMangled, kRef);
  EXPECT_EQ(mangled.failure, Failure::kLiteralMutated) << mangled.reason;
  SideJudgement unclosed = JudgeSide(ctx, kUnclosed, kRef);
  EXPECT_EQ(unclosed.failure, Failure::kInvalidToolCall);
  EXPECT_NE(unclosed.reason.find("never closed"), std::string::npos) << unclosed.reason;
}

TEST(Attribute, DamageRepairBothFailAndFine) {
  Attribution damage = Attribute(kRight, kMangled);
  EXPECT_EQ(damage.outcome, Outcome::kDamage);
  EXPECT_EQ(damage.kind, Failure::kLiteralMutated);
  Attribution repair = Attribute(kUnclosed, kRight);
  EXPECT_EQ(repair.outcome, Outcome::kRepair);
  EXPECT_EQ(repair.kind, Failure::kInvalidToolCall);
  // The reference configuration fails by itself: the change did no damage there.
  EXPECT_EQ(Attribute(kUnclosed, kMangled).outcome, Outcome::kBothFail);
  EXPECT_EQ(Attribute(kRight, kRight).outcome, Outcome::kBenign);
  // Two different answers in prose where the transcript answers in prose, neither mangling anything.
  const FutureText a = F({"I", " will", " check", " whether", " the", " database", " answers", " first", "."}, true);
  const FutureText b = F({"Sure", ",", " let", " me", " look", " at", " its", " listeners", " now", "."}, true);
  const FutureText prose = F({"Yes", ",", " it", " listens", " on", " 5432", "."}, true);
  Attribution fine = Attribute(a, b, prose);
  EXPECT_EQ(fine.outcome, Outcome::kDifferentButFine) << fine.reason;
  EXPECT_EQ(fine.kind, Failure::kNone);
  // Where the transcript calls right away, a future that writes no call misses the action.
  Attribution missed = Attribute(kRight, a);
  EXPECT_EQ(missed.outcome, Outcome::kDamage) << missed.reason;
  EXPECT_EQ(missed.kind, Failure::kWrongCommand);
  EXPECT_NE(missed.reason.find("makes no tool call"), std::string::npos) << missed.reason;
}

TEST(Attribute, ACallTheCapCutIsNeverUnclosed) {
  JudgeContext ctx = Context();
  // Open, far longer than the transcript's whole call, and still going when decoding stopped.
  FutureText longer = F({"<tool_call>", "{\"name\": \"check_port\", \"arguments\": {\"host\": \"",
                         "10.20.30.4 10.20.30.4 10.20.30.4 10.20.30.4 10.20.30.4 10.20.30.4 10.20.30.4"});
  EXPECT_EQ(JudgeSide(ctx, longer, kRef).failure, Failure::kInvalidToolCall);
  longer.cap_hit = true;
  SideJudgement cut = JudgeSide(ctx, longer, kRef);
  EXPECT_EQ(cut.failure, Failure::kNone) << cut.reason;
  EXPECT_NE(cut.reason.find("cut by the token cap"), std::string::npos);
}
