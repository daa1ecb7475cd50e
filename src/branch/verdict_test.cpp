// The branch verdicts on network-automation futures, piece by piece as a BPE tokenizer cuts them:
// verdict names, texts that agree again, tool calls (invalid, wrong, different prose), tool specs.
#include "branch/verdict.h"

#include <gtest/gtest.h>

#include "support/future_text.h"
#include "support/judge_context.h"

using namespace flipscope;
using flipscope::fixtures::Context;
using flipscope::fixtures::F;
using flipscope::fixtures::kSession;
using flipscope::fixtures::kTools;

TEST(Verdict, NamesInPrecedenceOrder) {
  std::vector<std::string> names;
  for (Verdict v : AllVerdicts()) names.push_back(VerdictName(v));
  EXPECT_EQ(names,
            (std::vector<std::string>{"invalid_tool_call", "literal_mutated", "wrong_command", "divergent", "benign"}));
}

TEST(SameText, DifferentTokenizationOfTheSameText) {
  EXPECT_TRUE(SameText(F({"543", "2", " is"}), F({"5", "432", " is"})));
  // One cut by the budget, the other longer: the same as far as both go.
  EXPECT_TRUE(SameText(F({" port", " 543"}), F({" port", " 543", "2"})));
  // A future that ended there says something different from one that goes on.
  EXPECT_FALSE(SameText(F({" port", "<|im_end|>"}, true), F({" port", "<|im_end|>", "x"})));
  EXPECT_FALSE(SameText(F({" show", " run"}), F({" show", " mac"})));
  auto j = Judge(Context(kSession), F({"543", "2"}), F({"5", "432"}), F({"5432"}));
  EXPECT_EQ(j.verdict, Verdict::kBenign);
  EXPECT_FALSE(j.first_difference.has_value());
}

TEST(Reconvergence, InsertionAndDetours) {
  // cand inserts " quickly" then both go on identically.
  auto a = F({"I", " will", " check", " the", " port", " on", " the", " database", " host", " now"});
  auto b = F({"I", " will", " quickly", " check", " the", " port", " on", " the", " database", " host", " now"});
  auto r = FindReconvergence(a, b, 4);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->base_at, 2);
  EXPECT_EQ(r->cand_at, 3);
  EXPECT_EQ(r->base_detour, 0);
  EXPECT_EQ(r->cand_detour, 1);
  // Never agreeing for 4 tokens.
  EXPECT_FALSE(FindReconvergence(F({"a", "b", "c", "d", "e"}), F({"x", "b", "c", "y", "e"}), 4).has_value());
  // Short endings count when both futures end together.
  auto e1 = F({" Done", ".", "<|im_end|>"}, true), e2 = F({" Finished", ".", "<|im_end|>"}, true);
  r = FindReconvergence(e1, e2, 8);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->base_at, 1);
  auto j = Judge(Context(kSession), e1, e2, F({" Done"}));
  EXPECT_EQ(j.verdict, Verdict::kBenign) << j.reason;
  EXPECT_EQ(*j.first_difference, 1u);  // text-aligned: both futures start with " "
}

// Agreeing again means aligned runs at the matching place: the transcript's run starts at most K
// tokens after its own first differing token, as the future's does. Text found further on does
// not count.
TEST(Reconvergence, BoundsTheSkippedTranscriptToo) {
  // The future drops an address of 4 tokens, then writes what the transcript writes after it.
  auto ref = F({" via", " 10", ".20", ".3", ".17", " dev", " ens", "3", " proto", " static", " metric", " 100"});
  auto skip = F({" via", " dev", " ens", "3", " proto", " static", " metric", " 100"});
  auto r = FindReconvergence(skip, ref, 4);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->base_at, 1);
  EXPECT_EQ(r->cand_at, 5);
  EXPECT_EQ(r->cand_detour, 4);
  // With K = 3 the same skip is too long: 4 tokens of the transcript left out.
  EXPECT_FALSE(FindReconvergence(skip, ref, 3).has_value());
  // The future writes a string that the transcript holds only ~20 tokens later: no agreement.
  std::vector<std::string> later = {" 172", ".17", ".0", ".1", "\n"};
  for (int i = 0; i < 16; ++i) later.push_back(" x" + std::to_string(i));
  for (const char* p : {" 10", ".20", ".3", ".17", "\n", "172", ".17", ".0", ".0", "/16", " dev", " docker", "0"})
    later.push_back(p);
  auto future = F({" 10", ".20", ".3", ".17", "\n", "172", ".17", ".0", ".0", "/16", " dev", " docker", "0"});
  EXPECT_FALSE(FindReconvergence(future, F(later), 8).has_value());
  auto ctx = Context(kSession);
  SideJudgement s = JudgeSide(ctx, future, F(later));
  EXPECT_FALSE(s.follows_reference) << s.reason;
  EXPECT_FALSE(s.rejoins.has_value());
  // A run of one-digit tokens is a shared number, not a shared passage: 8 tokens but 8 bytes.
  auto d1 = F({" route", " 1", "0", ".", "2", "0", ".", "3", ".", "1", "7", ":", "5", "4"});
  auto d2 = F({" host", " 1", "0", ".", "2", "0", ".", "3", ".", "1", "7", ".", "j", "s"});
  EXPECT_FALSE(FindReconvergence(d1, d2, 8).has_value());
  // The shortest detour wins: the earliest place both agree again.
  auto a = F({"x", "a", "b", "c", "a", "b", "c"}), b = F({"y", "z", "a", "b", "c", "a", "b", "c"});
  r = FindReconvergence(a, b, 3);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->base_at, 1);
  EXPECT_EQ(r->cand_at, 2);
}

// A future that agrees with the transcript again says where, and its reason says so; the pair's
// verdict is divergent exactly when the futures have no reconvergence.
TEST(Reconvergence, SideAndPairSayTheSameThing) {
  auto ctx = Context(kSession);
  ctx.reconverge = 4;
  auto ref = F({" The", " port", " is", " open", " on", " db", "01", " now", "."});
  auto fut = F({" The", " socket", " is", " open", " on", " db", "01", " now", "."});
  SideJudgement s = JudgeSide(ctx, fut, ref);
  ASSERT_TRUE(s.rejoins.has_value());
  EXPECT_TRUE(s.follows_reference);
  EXPECT_EQ(s.reason, "agrees with the transcript again from its token 2 (the transcript's token 2)");
  const auto rejoins = SideRecord(s, fut).rejoins_at;
  ASSERT_TRUE(rejoins.has_value());
  EXPECT_EQ(rejoins->future, 2);
  EXPECT_EQ(rejoins->transcript, 2);
  // The transcript's own text, ended where the transcript goes on: follows without a rejoin.
  s = JudgeSide(ctx, F({" The", " port"}, true), ref);
  EXPECT_TRUE(s.follows_reference);
  EXPECT_TRUE(s.writes_reference);
  EXPECT_FALSE(SideRecord(s, F({" The", " port"}, true)).rejoins_at.has_value());
  // Prose that shares a K-run only far away is divergent, and says nothing about agreeing again.
  auto far =
      F({" I", " will", " look", " first", " at", " the", " logs", " and", " then", " The", " port", " is", " open"});
  auto j = Judge(ctx, ref, far, ref);
  EXPECT_EQ(j.verdict, Verdict::kDivergent) << j.reason;
  EXPECT_FALSE(j.reconverge.has_value());
  EXPECT_EQ(j.reason.find("agree"), std::string::npos) << j.reason;
}

TEST(ToolCall, JsonPrefixAndExtraction) {
  EXPECT_TRUE(IsJsonPrefix(R"({"name": "run_com)"));
  EXPECT_TRUE(IsJsonPrefix(R"({"name": "run_command", "arguments": {"port": 54)"));
  EXPECT_TRUE(IsJsonPrefix(R"({"a": tru)"));
  EXPECT_FALSE(IsJsonPrefix(R"({"name": run_command)"));
  EXPECT_FALSE(IsJsonPrefix(R"({"name": "x"}})"));
  ToolEnvelope env;
  // Inside a call at the branch point.
  auto c = ExtractCall("text <tool_call>\n{\"name\": \"run_", "command\"}\n</tool_call> done", env);
  EXPECT_TRUE(c.present);
  EXPECT_TRUE(c.closed);
  EXPECT_EQ(c.body, "\n{\"name\": \"run_command\"}\n");
  // A closed call in the prefix does not count; the open marker split across the boundary does.
  c = ExtractCall("<tool_call>{}</tool_call> and <tool_", "call>{\"name\"", env);
  EXPECT_TRUE(c.present);
  EXPECT_FALSE(c.closed);
  EXPECT_EQ(c.body, "{\"name\"");
  EXPECT_FALSE(ExtractCall("<tool_call>{}</tool_call>", " all done", env).present);
}

TEST(InvalidToolCall, EnvelopeJsonFunctionAndArguments) {
  auto ctx = Context(kSession);
  const std::string good = R"(<tool_call>
{"name": "run_command", "arguments": {"device": "core-sw1", "command": "show run"}}
</tool_call>)";
  auto ref = F({good});
  // Never closed: the future ends the turn inside the call.
  auto j = Judge(
      ctx, ref,
      F({"<tool_call>\n{\"name\": \"run_command\", \"arguments\": {\"device\": \"core-sw1\"}}", "<|im_end|>"}, true),
      ref);
  EXPECT_EQ(j.verdict, Verdict::kInvalidToolCall);
  EXPECT_EQ(j.reason, "cand: the tool-call envelope is never closed: the future ends first");
  // Runs far past the reference's whole call without closing.
  j = Judge(ctx, ref,
            F({"<tool_call>\n{\"name\": \"run_command\", \"arguments\": {\"device\": \"core-sw1\", ",
               "\"command\": \"show run\", \"timeout\": 30, \"retries\": 3, \"confirm\": false, \"x\": 1"}),
            ref);
  EXPECT_EQ(j.verdict, Verdict::kInvalidToolCall);
  EXPECT_NE(j.reason.find("not closed after"), std::string::npos) << j.reason;
  // Cut by the budget early: not judged.
  j = Judge(ctx, ref, F({"<tool_call>\n{\"name\": \"run_command\", \"arguments\": {\"host"}), ref);
  EXPECT_EQ(j.verdict, Verdict::kDivergent) << j.reason;
  // JSON that does not parse.
  j = Judge(ctx, ref,
            F({"<tool_call>\n{\"name\": \"run_command\", \"arguments\": {\"device\": core-sw1}}\n</tool_call>"}), ref);
  EXPECT_EQ(j.verdict, Verdict::kInvalidToolCall);
  EXPECT_NE(j.reason.find("cand: the tool-call JSON"), std::string::npos) << j.reason;
  // A function the workload does not have, caught before the call closes.
  j = Judge(ctx, ref, F({"<tool_call>\n{\"name\": \"run_cmd\", \"arguments\": {"}), ref);
  EXPECT_EQ(j.reason, "cand: calls \"run_cmd\", which is not among the workload's tools");
  // A required argument missing.
  j = Judge(ctx, ref,
            F({"<tool_call>\n{\"name\": \"run_command\", \"arguments\": {\"command\": \"show run\"}}\n</tool_call>"}),
            ref);
  EXPECT_EQ(j.verdict, Verdict::kInvalidToolCall);
  EXPECT_EQ(j.reason, "cand: \"run_command\" misses its required argument \"device\"");
  // A complete call that gives an argument a JSON schema as its value: the tool's definition
  // copied, no argument.
  j = Judge(ctx, ref,
            F({"<tool_call>\n{\"name\": \"run_command\", \"arguments\": {\"device\": \"core-sw1\", \"command\": "
               "{\"type\": \"string\"}}}\n</tool_call>"}),
            ref);
  EXPECT_EQ(j.verdict, Verdict::kInvalidToolCall);
  EXPECT_EQ(j.reason, "cand: \"run_command\" writes \"type\", a key of a tool definition, into its arguments");
  // Data under a definition's word is no definition: a list of items copied from a tool's output
  // (an array, where a schema's `items` is an object), a `type` that names no JSON type.
  for (const char* data : {"\"items\": [{\"sku\": \"A-1\", \"qty\": 2}]", "\"type\": \"refund\""}) {
    j = Judge(ctx, ref,
              F({"<tool_call>\n{\"name\": \"run_command\", \"arguments\": {\"device\": \"core-sw1\", \"command\": "
                 "\"show run\", ",
                 data}),
              ref);
    EXPECT_EQ(j.reason.find("a key of a tool definition"), std::string::npos) << data << ": " << j.reason;
  }
  // The same words with a schema's values are a definition, written whole or cut.
  j = Judge(ctx, ref,
            F({"<tool_call>\n{\"name\": \"run_command\", \"arguments\": {\"device\": \"core-sw1\", \"command\": "
               "\"show run\", \"items\": {\"type\": \"str"}),
            ref);
  EXPECT_EQ(j.verdict, Verdict::kInvalidToolCall) << j.reason;
  EXPECT_NE(j.reason.find("writes \"items\", a key of a tool definition"), std::string::npos) << j.reason;
}

TEST(InvalidToolCall, WinsOverALiteralMutation) {
  auto ctx = Context(kSession +
                     "<tool_call>\n{\"name\": \"check_port\", \"arguments\": {\"host\": \"10.20.30.4\", \"port\": ");
  auto base = F({"543", "2", "}}\n", "</tool_call>"});
  auto cand = F({"543", "ql", "}}\n", "</tool_call>"});  // not JSON either
  auto j = Judge(ctx, base, cand, base);
  EXPECT_EQ(j.verdict, Verdict::kInvalidToolCall);
  EXPECT_NE(j.reason.find("cand: the tool-call JSON does not parse"), std::string::npos) << j.reason;
  // As a string it parses, and then the mangled literal is what is wrong.
  ctx =
      Context(kSession +
              "<tool_call>\n{\"name\": \"run_command\", \"arguments\": {\"device\": \"db01\", \"command\": \"psql -p ");
  j = Judge(ctx, F({"543", "2", "\"}}\n", "</tool_call>"}), F({"543", "ql", "\"}}\n", "</tool_call>"}),
            F({"543", "2", "\"}}\n", "</tool_call>"}));
  EXPECT_EQ(j.verdict, Verdict::kLiteralMutated);
  EXPECT_EQ(j.reason, "cand copies 5432 as \"543ql\"");
}

TEST(WrongCommand, ShowRunVersusShowMacAddressTable) {
  auto ctx =
      Context(kSession +
              "<tool_call>\n{\"name\": \"run_command\", \"arguments\": {\"device\": \"core-sw1\", \"command\": \"show");
  auto base = F({" run", "\"}}\n", "</tool_call>", "<|im_end|>"}, true);
  auto cand = F({" mac", " address", "-table", "\"}}\n", "</tool_call>", "<|im_end|>"}, true);
  auto j = Judge(ctx, base, cand, base);
  EXPECT_EQ(j.verdict, Verdict::kWrongCommand);
  EXPECT_EQ(j.reason, "cand \"run_command\" sets \"command\" to \"show mac address-table\" instead of \"show run\"");
  // The other interface of the context as an argument: a wrong command, not a mutation.
  ctx = Context(kSession +
                "<tool_call>\n{\"name\": \"run_command\", \"arguments\": {\"device\": \"core-sw1\", "
                "\"command\": \"show interface ");
  base = F({"Gig", "abit", "Ethernet", "0", "/0", "/1", ".201", "\"}}", "</tool_call>"});
  cand = F({"Gig", "abit", "Ethernet", "0", "/1", "/4", "\"}}", "</tool_call>"});
  j = Judge(ctx, base, cand, base);
  EXPECT_EQ(j.verdict, Verdict::kWrongCommand) << j.reason;
  EXPECT_NE(
      j.reason.find("\"show interface GigabitEthernet0/1/4\" instead of \"show interface GigabitEthernet0/0/1.201\""),
      std::string::npos)
      << j.reason;
  // A different function.
  ctx = Context(kSession + "<tool_call>\n{\"name\": \"");
  j = Judge(ctx,
            F({"run", "_command", "\", \"arguments\": {\"device\": \"db01\", \"command\": \"uptime\"}}</tool_call>"}),
            F({"check", "_port", "\", \"arguments\": {\"host\": \"db01\", \"port\": 5432}}</tool_call>"}),
            F({"run_command\", \"arguments\": {\"device\": \"db01\", \"command\": \"uptime\"}}</tool_call>"}));
  EXPECT_EQ(j.verdict, Verdict::kWrongCommand);
  EXPECT_EQ(j.reason, "cand calls \"check_port\" instead of \"run_command\"");
}

TEST(Divergent, DifferentProseThatNeverAgreesAgain) {
  auto ctx = Context(kSession);
  auto base = F({"The", " uplink", " is", " down", " because", " the", " optic", " failed", "."});
  auto cand = F({"I", " will", " first", " look", " at", " the", " logs", " on", " core", "-sw", "1", "."});
  auto j = Judge(ctx, base, cand, base);
  EXPECT_EQ(j.verdict, Verdict::kDivergent);
  EXPECT_EQ(j.reason, "base writes \"The uplink is down because the o\", cand \"I will first look at the logs on\"");
  EXPECT_FALSE(j.reconverge.has_value());
}

TEST(ToolSpecs, ParsesOpenAiAndBareFormsAndRejectsBadOnes) {
  auto t = ParseToolSpecs(nlohmann::json::parse(kTools));
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[1].name, "check_port");
  EXPECT_EQ((*t)[1].required, (std::vector<std::string>{"host", "port"}));
  auto bare = ParseToolSpecs(nlohmann::json::parse(R"([{"name": "ping", "parameters": {"required": ["host"]}}])"));
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ((*bare)[0].required, (std::vector<std::string>{"host"}));
  EXPECT_EQ(ParseToolSpecs(nlohmann::json::parse(R"([{"parameters": {}}])")).status().message(),
            "tools[0] has no function name");
  EXPECT_FALSE(ParseToolSpecs(nlohmann::json::parse(R"({"name": "x"})")).ok());
}
