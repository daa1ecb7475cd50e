// Attribution: each future judged on its own against the transcript, then who broke what.
#include <gtest/gtest.h>

#include "branch/verdict.h"
#include "support/future_text.h"

using namespace flipscope;
using flipscope::fixtures::F;

namespace {

const char* kPortTools = R"([{"type": "function", "function": {"name": "check_port", "parameters": {"type": "object",
   "properties": {"host": {"type": "string"}, "port": {"type": "integer"}}, "required": ["host", "port"]}}}])";

JudgeContext Context() {
  JudgeContext ctx;
  ctx.prefix = "<|im_start|>user\nIs db01 (10.20.30.4) listening on port 5432?<|im_end|>\n<|im_start|>assistant\n";
  ctx.literals.AddText(ctx.prefix);
  ctx.tools = *ParseToolSpecs(nlohmann::json::parse(kPortTools));
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
  // The reference configuration fails by itself, worse: the change did no damage there, and its
  // milder failure (a mangled port against a call that never closes) is a repair.
  Attribution milder = Attribute(kUnclosed, kMangled);
  EXPECT_EQ(milder.outcome, Outcome::kRepair) << milder.reason;
  EXPECT_EQ(milder.kind, Failure::kInvalidToolCall);
  // Failures of the same grade fail alike.
  const FutureText unclosed_other =
      F({"<tool_call>", "{\"name\": \"check_port\", \"arguments\": {\"port\": 5432", "<|im_end|>"}, true);
  Attribution alike = Attribute(kUnclosed, unclosed_other);
  EXPECT_EQ(alike.outcome, Outcome::kBothFail) << alike.reason;
  EXPECT_EQ(alike.kind, Failure::kInvalidToolCall);
  EXPECT_EQ(Attribute(kRight, kRight).outcome, Outcome::kBenign);
  // Two different answers in prose where the transcript answers in prose, neither mangling anything.
  const FutureText a = F({"I", " will", " check", " whether", " the", " database", " answers", " first", "."}, true);
  const FutureText b = F({"Sure", ",", " let", " me", " look", " at", " its", " listeners", " now", "."}, true);
  const FutureText prose = F({"Yes", ",", " it", " listens", " on", " 5432", "."}, true);
  Attribution fine = Attribute(a, b, prose);
  EXPECT_EQ(fine.outcome, Outcome::kDifferentButFine) << fine.reason;
  EXPECT_EQ(fine.kind, Failure::kNone);
  // Where the transcript calls right away, a future that writes no call runs nothing wrong: it is
  // said, not failed (the scale has no grade for a turn that acts later or asks first).
  Attribution missed = Attribute(kRight, a);
  EXPECT_EQ(missed.outcome, Outcome::kDifferentButFine) << missed.reason;
  EXPECT_EQ(missed.kind, Failure::kNone);
  EXPECT_NE(missed.reason.find("makes no tool call"), std::string::npos) << missed.reason;
}

TEST(Attribute, ACallTheCapCutIsNeverUnclosed) {
  JudgeContext ctx = Context();
  // Open, far longer than the transcript's whole call, and still going when decoding stopped.
  FutureText longer = F({"<tool_call>", "{\"name\": \"check_port\", \"arguments\": {\"host\": \"",
                         "10.20.30.4 and then the replica behind the proxy in the east wing of the lab"});
  // Past the transcript's call unclosed, but what it wrote is a wrong value: a call the budget cut
  // that differs, whether or not the cap cut it, graded as a finished call of check_port would be
  // (a tool that only inspects: harmless).
  EXPECT_EQ(JudgeSide(ctx, longer, kRef).failure, Failure::kHarmlessCall);
  // One that runs on into a key the transcript's call lacks is a call gone astray: invalid.
  const FutureText astray = F({"<tool_call>", "{\"name\": \"check_port\", \"arguments\": {\"host\": \"10.20.30.4\", ",
                               "\"port\": 5432, \"schema\": {\"type\": \"object\", \"properties\": {\"x\""});
  EXPECT_EQ(JudgeSide(ctx, astray, kRef).failure, Failure::kInvalidToolCall);
  longer.cap_hit = true;
  SideJudgement cut = JudgeSide(ctx, longer, kRef);
  EXPECT_NE(cut.failure, Failure::kInvalidToolCall) << cut.reason;
  EXPECT_TRUE(cut.call_problem.empty()) << cut.call_problem;
  EXPECT_NE(cut.reason.find("cut by the token cap"), std::string::npos);
  // Not unclosed; but its host is no longer the transcript's "10.20.30.4", however it would end.
  EXPECT_EQ(cut.failure, Failure::kHarmlessCall) << cut.reason;
  EXPECT_NE(cut.reason.find("sets \"host\" to \"10.20.30.4 and then"), std::string::npos) << cut.reason;
  // One that repeats its address until the cap loops: a runaway, whether the cap or the budget cut it.
  FutureText loop = F({"<tool_call>", "{\"name\": \"check_port\", \"arguments\": {\"host\": \"",
                       "10.20.30.4 10.20.30.4 10.20.30.4 10.20.30.4 10.20.30.4 10.20.30.4 10.20.30.4"});
  EXPECT_EQ(JudgeSide(ctx, loop, kRef).failure, Failure::kRunaway);
  loop.cap_hit = true;
  EXPECT_EQ(JudgeSide(ctx, loop, kRef).failure, Failure::kRunaway);
  // Cut by the cap while still writing the transcript's call: nothing to judge it by.
  FutureText on_track = F({"<tool_call>", "{\"name\": \"check_port\", \"arguments\": {\"host\": \"10.20"});
  on_track.cap_hit = true;
  SideJudgement fine = JudgeSide(ctx, on_track, kRef);
  EXPECT_EQ(fine.failure, Failure::kNone) << fine.reason;
}

// What an unfinished call has already decided, whatever it would write next.
TEST(PartialCallDifference, DecidedBeforeTheCut) {
  const nlohmann::json ref = {{"name", "apply_config"},
                              {"arguments",
                               {{"device", "lab-core01"},
                                {"lines", {"ip access-list extended VLAN206-IN", "30 permit tcp any any eq 5432"}},
                                {"comment", "CHG1"}}}};
  const std::string head = R"({"name": "apply_config", "arguments": {"device": "lab-core01", "lines": [)";
  // Still on the transcript's call (a key being written is no value yet; a value cut short).
  for (const std::string tail : {"", "\"ip access-list", "\"ip access-list extended VLAN206-IN\", \"30 per",
                                 "\"ip access-list extended VLAN206-IN\", \"30 permit tcp any any eq 5432\"], \"comm"})
    EXPECT_EQ(PartialCallDifference(head + tail, ref), "") << tail;
  EXPECT_EQ(PartialCallDifference(R"({"name": "apply_con)", ref), "");
  EXPECT_EQ(PartialCallDifference(R"({"name": "apply_config", "argu)", ref), "");
  // Already different: an unfinished string that left the transcript's value, a finished value,
  // a function name, a key the transcript's call lacks, a list closed short.
  EXPECT_NE(
      PartialCallDifference(head + "\"ip access-list extended VLAN206-IN (10.22.214.198) (10.22", ref)
          .find("sets \"lines[0]\" to \"ip access-list extended VLAN206-IN (10.22.214.19...\" (unfinished) instead of "
                "\"ip access-list extended VLAN206-IN\""),
      std::string::npos);
  EXPECT_NE(PartialCallDifference(R"({"name": "apply_config", "arguments": {"device": "lab-core02", "li)", ref)
                .find("sets \"device\" to \"lab-core02\" instead of \"lab-core01\""),
            std::string::npos);
  EXPECT_NE(PartialCallDifference(R"({"name": "run_command", "arguments": {"dev)", ref).find("calls \"run_command\""),
            std::string::npos);
  EXPECT_NE(PartialCallDifference(R"({"name": "apply_config", "arguments": {"host": "x)", ref).find("adds \"host\""),
            std::string::npos);
  EXPECT_NE(PartialCallDifference(head + "\"ip access-list extended VLAN206-IN\"], \"comment", ref)
                .find("closes \"lines\" with 1 items instead of 2"),
            std::string::npos);
}

// Gemma 3, a fresh session, KV q8_0, position 1781: the base future finishes the call's JSON, then
// writes `, "comment": ...}` again and again; the candidate repeats two addresses inside the
// first config line until the cap. Neither makes a call a server could run, and both loop: both
// fail alike. Cut before its loop, the candidate's line is already not the transcript's.
TEST(Attribute, GarbageAfterTheJsonAgainstALoopTheCapCut) {
  JudgeContext ctx;
  ctx.prefix = R"(<start_of_turn>model
Adding the rule.
<tool_call>{"name": "apply_config", "arguments": {"device": "lab-core01", "lines": ["ip access-list extended VLAN206-IN)";
  ctx.literals.AddText(ctx.prefix);
  ctx.tools = *ParseToolSpecs(nlohmann::json::parse(
      R"([{"name": "apply_config", "parameters": {"required": ["device", "lines", "comment"]}}])"));
  const FutureText ref = F({"\", \"30 permit tcp 10.22.206.0 0.0.0.255 host 10.22.214.199 eq 5432\"], ",
                            "\"comment\": \"CHG83416 allow cache02 to db02:5432\"}}", "</tool_call>", "<end_of_turn>"});
  FutureText base = F({"\"],", " \"comment\": \"Change record for the audit log\"},",
                       " \"comment\": \"Change record for the audit log\"},",
                       " \"comment\": \"Change record for the audit log\"},", " \"comment\": \"Change record"});
  base.cap_hit = true;
  // (The real future runs to the cap of 256 tokens; three rounds of its two addresses here.)
  FutureText cand = F({" (10.22.214.198)", " (10.22.214.199)", " (10.22.214.198)", " (10.22.214.199)",
                       " (10.22.214.198)", " (10.22.214.199)", " ("});
  cand.cap_hit = true;
  const SideJudgement b = JudgeSide(ctx, base, ref), c = JudgeSide(ctx, cand, ref);
  EXPECT_EQ(b.failure, Failure::kRunaway) << b.reason;
  EXPECT_EQ(c.failure, Failure::kRunaway) << c.reason;
  const ForkSideJudgement record = SideRecord(c, cand);
  ASSERT_TRUE(record.tool_call.has_value());
  EXPECT_EQ(record.tool_call->matches_reference, std::optional<bool>(false));
  EXPECT_EQ(record.grade, std::optional<std::string>("runaway"));
  const Attribution a = Attribute(b, c, Judge(ctx, base, cand, ref), ctx.reconverge);
  EXPECT_EQ(a.outcome, Outcome::kBothFail) << a.reason;
  EXPECT_EQ(a.kind, Failure::kRunaway);
  // Its first line cut before it loops: already not the transcript's.
  FutureText early = F({" (10.22.214.198)", " (10.22"});
  early.cap_hit = true;
  const SideJudgement e = JudgeSide(ctx, early, ref);
  EXPECT_EQ(e.failure, Failure::kWrongCommand) << e.reason;
  EXPECT_NE(e.reason.find("\"apply_config\" sets \"lines[0]\""), std::string::npos) << e.reason;
}
