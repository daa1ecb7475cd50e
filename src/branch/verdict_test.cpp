// The branch verdicts on network-automation futures, piece by piece as a BPE tokenizer cuts them.
#include "branch/verdict.h"

#include <gtest/gtest.h>

#include "support/future_text.h"

using namespace flipscope;
using flipscope::fixtures::F;

namespace {

const char* kTools = R"([
  {"type": "function", "function": {"name": "run_command", "description": "Run a CLI command on a device",
   "parameters": {"type": "object", "properties": {"device": {"type": "string"}, "command": {"type": "string"}},
                  "required": ["device", "command"]}}},
  {"type": "function", "function": {"name": "check_port", "parameters": {"type": "object",
   "properties": {"host": {"type": "string"}, "port": {"type": "integer"}}, "required": ["host", "port"]}}}
])";

// A session prefix: the user names the literals; the assistant is about to answer or call a tool.
JudgeContext Context(std::string prefix) {
  JudgeContext ctx;
  ctx.prefix = std::move(prefix);
  ctx.literals.AddText(ctx.prefix);
  ctx.tools = *ParseToolSpecs(nlohmann::json::parse(kTools));
  return ctx;
}

const std::string kSession =
    "<|im_start|>user\nThe database on db01.lab.example.net (10.20.30.4) listens on port 5432. Check the "
    "subinterface GigabitEthernet0/0/1.201 on core-sw1 (mac 00:1a:2b:3c:4d:5e) and the uplink "
    "GigabitEthernet0/1/4.<|im_end|>\n<|im_start|>assistant\n";

}  // namespace

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

TEST(Words, SplitAndLiteralLike) {
  auto w = SplitWords("on GigabitEthernet0/0/1.201, port 5432. Host db01.lab.example.net: up");
  std::vector<std::string> texts;
  for (auto& x : w) texts.push_back(x.text);
  EXPECT_EQ(texts, (std::vector<std::string>{"on", "GigabitEthernet0/0/1.201", "port", "5432", "Host",
                                             "db01.lab.example.net", "up"}));
  EXPECT_EQ(w[1].offset, 3u);
  EXPECT_TRUE(IsLiteralLike("5432"));
  EXPECT_TRUE(IsLiteralLike("core-sw1"));
  EXPECT_TRUE(IsLiteralLike("edge-router"));
  EXPECT_FALSE(IsLiteralLike("show"));
  EXPECT_FALSE(IsLiteralLike("201"));  // too short to copy-check
}

TEST(LiteralMutated, Port5432Becomes543ql) {
  auto ctx = Context(kSession);
  auto base = F({"Connecting", " to", " port", " ", "543", "2", " on", " db", "01"});
  auto cand = F({"Connecting", " to", " port", " ", "543", "ql", " on", " db", "01"});
  auto j = Judge(ctx, base, cand, base);
  EXPECT_EQ(j.verdict, Verdict::kLiteralMutated);
  EXPECT_EQ(j.reason, "cand copies 5432 as \"543ql\"");
  EXPECT_EQ(*j.first_difference, std::string("Connecting to port 543").size());
}

TEST(LiteralMutated, WordSplitAcrossTheBranchPoint) {
  // The branch point is inside the literal: the prefix already holds "54".
  auto ctx = Context(kSession + "Checking port 54");
  auto j = Judge(ctx, F({"32", " now"}), F({"3", "ql", " now"}), F({"32", " now"}));
  EXPECT_EQ(j.verdict, Verdict::kLiteralMutated);
  EXPECT_EQ(j.reason, "cand copies 5432 as \"543ql\"");
}

TEST(LiteralMutated, AddressesAndInterfaces) {
  auto ctx = Context(kSession);
  auto ok = F({"The", " mac", " is", " 00", ":1a", ":2b", ":3c", ":4d", ":5e", "."});
  auto bad = F({"The", " mac", " is", " 00", ":1a", ":2b", ":3c", ":4d", ":5f", "."});
  auto j = Judge(ctx, ok, bad, ok);
  EXPECT_EQ(j.verdict, Verdict::kLiteralMutated);
  EXPECT_EQ(j.reason, "cand copies 00:1a:2b:3c:4d:5e as \"00:1a:2b:3c:4d:5f\"");
  // An address extended by a digit.
  j = Judge(ctx, F({"ping", " 10", ".20", ".30", ".4", " now"}), F({"ping", " 10", ".20", ".30", ".41", " now"}),
            F({"ping"}));
  EXPECT_EQ(j.verdict, Verdict::kLiteralMutated);
  EXPECT_EQ(j.reason, "cand copies 10.20.30.4 as \"10.20.30.41\"");
  // The head of an address dropped: the reason names the address, not a shorter literal.
  ctx.literals.AddLiteral("20.3");  // e.g. a software version, sharing the copy's first bytes
  j = Judge(ctx, F({"10", ".20", ".30", ".4", " is", " at"}), F({"20", ".30", ".4", " is", " at"}), F({"x"}));
  EXPECT_EQ(j.verdict, Verdict::kLiteralMutated);
  EXPECT_EQ(j.reason, "cand copies 10.20.30.4 as \"20.30.4\"");
  // An interface the context never names, starting like one it does.
  j = Judge(ctx, F({" GigabitEthernet", "0", "/0", "/1", ".201"}), F({" GigabitEthernet", "0", "/0", "/3", " is"}),
            F({" GigabitEthernet0/0/1.201"}));
  EXPECT_EQ(j.verdict, Verdict::kLiteralMutated);
  EXPECT_EQ(j.reason, "cand copies GigabitEthernet0/0/1.201 as \"GigabitEthernet0/0/3\"");
}

TEST(LiteralMutated, KnownLiteralsAndCutsAreNotMutations) {
  auto ctx = Context(kSession);
  ctx.reconverge = 4;
  // Another interface the context holds: a different choice, not a mangled copy.
  auto j = Judge(ctx, F({" GigabitEthernet", "0", "/0", "/1", ".201", " first", " then", " the", " rest"}),
                 F({" GigabitEthernet", "0", "/1", "/4", " first", " then", " the", " rest", " of"}),
                 F({" GigabitEthernet0/0/1.201"}));
  EXPECT_EQ(j.verdict, Verdict::kBenign) << j.reason;  // reconverges after one token
  // host:port joined from two literals the context holds separately.
  j = Judge(ctx, F({"connect", " 10", ".20", ".30", ".4"}), F({"connect", " 10", ".20", ".30", ".4", ":", "5432"}),
            F({"x"}));
  EXPECT_NE(j.verdict, Verdict::kLiteralMutated) << j.reason;
  // Cut by the budget while still a prefix of a known literal: undecided, not a mutation
  // (also when the cut leaves a separator the word lost to trimming).
  j = Judge(ctx, F({" port", " 5432"}), F({" socket", " 543"}), F({" port"}));
  EXPECT_EQ(j.verdict, Verdict::kDivergent) << j.reason;
  j = Judge(ctx, F({" on", " GigabitEthernet", "0", "/0", "/1", ".201"}), F({" uplink", " GigabitEthernet", "0", "/"}),
            F({" on"}));
  EXPECT_EQ(j.verdict, Verdict::kDivergent) << j.reason;
  // ...but followed by a space it is a truncated copy.
  j = Judge(ctx, F({" port", " 5432", " ok"}), F({" port", " 543", " ok"}), F({" port"}));
  EXPECT_EQ(j.verdict, Verdict::kLiteralMutated) << j.reason;
  // Both futures enumerate the next switch: not the fork's doing.
  j = Judge(ctx, F({"- lab", "-sw", "02", " (Catalyst"}), F({"- lab", "-sw", "02", " (ISR"}), F({"x"}));
  EXPECT_NE(j.verdict, Verdict::kLiteralMutated) << j.reason;
  // A literal the session names later (known_words) is a real one, not a mangled copy.
  j = Judge(ctx, F({" core", "-sw", "1", " and"}), F({" core", "-sw", "2", " and"}), F({"x"}));
  EXPECT_EQ(j.verdict, Verdict::kLiteralMutated) << j.reason;
  EXPECT_EQ(j.reason, "cand copies core-sw1 as \"core-sw2\"");
  std::set<std::string, std::less<>> transcript = {"core-sw2"};
  ctx.known_words = &transcript;
  j = Judge(ctx, F({" core", "-sw", "1", " and"}), F({" core", "-sw", "2", " and"}), F({"x"}));
  EXPECT_NE(j.verdict, Verdict::kLiteralMutated) << j.reason;
  ctx.known_words = nullptr;
  // A word the reference continuation writes is correct by definition.
  j = Judge(ctx, F({" vlan", " 2011", " on"}), F({" vlan", " 2012", " on"}), F({" vlan", " 2012", " on"}));
  EXPECT_NE(j.verdict, Verdict::kLiteralMutated) << j.reason;
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

// A mutation changes the literal's own characters: text glued after an exact copy, an ordinary
// hyphenated word, or a count the transcript never uses as a literal is none.
TEST(LiteralMutated, OnlyTheLiteralsOwnCharacters) {
  auto ctx = Context(kSession +
                     "The firewall allows 5432/tcp from 10.20.0.0/20. The orders database has "
                     "user-defined types; the import processed 123 rows.\n");
  // 10.20.0.0/20 copied exactly, then ".ArgumentParser" glued on by the tokenizer's word.
  auto j = Judge(ctx, F({" subnet", " 10", ".20", ".0", ".0", "/20", ".Argument", "Parser", "("}),
                 F({" subnet", " 10", ".20", ".0", ".0", "/20", " is", " right"}), F({" x"}));
  EXPECT_NE(j.verdict, Verdict::kLiteralMutated) << j.reason;
  // A plain hyphenated word is no literal, so "user-defined-types" mangles nothing.
  j = Judge(ctx, F({" two", " user", "-defined", "-types", ":"}), F({" two", " user", "-defined", " types", ":"}),
            F({" x"}));
  EXPECT_NE(j.verdict, Verdict::kLiteralMutated) << j.reason;
  // 123 is a count in prose, not a literal: "12345" copies nothing.
  j = Judge(ctx, F({" id", " 123", "45", " ok"}), F({" id", " 9", " ok"}), F({" x"}));
  EXPECT_NE(j.verdict, Verdict::kLiteralMutated) << j.reason;
  // The same shapes on real literals are mutations: digits after a copy change the literal.
  j = Judge(ctx, F({" port", " 5432", " ok"}), F({" port", " 5432", "1", " ok"}), F({" x"}));
  EXPECT_EQ(j.reason, "cand copies 5432 as \"54321\"");
  j = Judge(ctx, F({" net", " 10", ".20", ".0", ".0", "/20", " ok"}),
            F({" net", " 10", ".20", ".0", ".0", "/24", " ok"}), F({" x"}));
  EXPECT_EQ(j.reason, "cand copies 10.20.0.0/20 as \"10.20.0.0/24\"");
  // Text appended after an exact copy by a separator: a file under a directory the context names.
  ctx = Context(kSession + "grep -rn 10.20.3.17 /etc/netplan/ /etc/docker/daemon.json\n");
  j = Judge(ctx, F({"/etc", "/net", "plan", "/60", "-static", "-routes", ".yaml", ":7"}),
            F({"/etc", "/net", "plan", "/60", "-static", "-daemon", ".json", ":7"}), F({" x"}));
  EXPECT_NE(j.verdict, Verdict::kLiteralMutated) << j.reason;
  // A port the transcript uses as such is one literal wherever it appears: 5432 of "5432/tcp".
  KnownLiterals known;
  known.AddText("ufw allow 5432/tcp and psql -p 5432");
  EXPECT_EQ(known.sources(), std::vector<std::string>{"5432"});
}

TEST(LiteralMutated, ThePartBeforeAJoinerIsKnown) {
  // The network of a prefix the context names, and the host of a host:port, are right.
  KnownLiterals known;
  known.AddText("VLAN 225 (10.20.225.0/24) and db01.lab:5432");
  EXPECT_FALSE(FindLiteralMutation(" route 10.20.225.0 via", 0, false, known, nullptr).has_value());
  EXPECT_FALSE(FindLiteralMutation(" host db01.lab now", 0, false, known, nullptr).has_value());
  auto m = FindLiteralMutation(" route 10.20.226.0 via", 0, false, known, nullptr);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->copy, "10.20.226.0");
}
