// LoadWorkload on the real SmolLM2 and Gemma 3 models with the default example (checked
// independently by tests/ref/workload_ref.py), and the example generator's determinism.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "support/workload_test_util.h"
#include "util/util.h"

namespace flipscope {
namespace {

using namespace testing_workload;  // NOLINT: test helpers

const std::string kExample = std::string(FLIPSCOPE_SOURCE_DIR) + "/examples/netops-session.json";

int Shell(const std::string& cmd) { return std::system(cmd.c_str()); }

TEST(WorkloadExample, RegeneratingWithTheSameSeedGivesTheSameFile) {
  auto doc = nlohmann::json::parse(ReadFile(kExample).value());
  const auto& meta = doc["metadata"];
  std::string out = fixtures::TempPath("workload-regenerated.json");
  std::string cmd = fmt::format("{} {}/examples/gen_session.py --seed {} --target-tokens {} --chars-per-token {} -o {}",
                                FLIPSCOPE_PYTHON, FLIPSCOPE_SOURCE_DIR, meta["seed"].get<int>(),
                                meta["target_tokens"].get<int>(), meta["chars_per_token"].get<double>(), out);
  ASSERT_EQ(Shell(cmd), 0) << cmd;
  EXPECT_EQ(ReadFile(out).value(), ReadFile(kExample).value()) << cmd;
  std::string other = fixtures::TempPath("workload-other-seed.json");
  ASSERT_EQ(Shell(fmt::format("{} {}/examples/gen_session.py --seed 2 --target-tokens 3000 -o {}", FLIPSCOPE_PYTHON,
                              FLIPSCOPE_SOURCE_DIR, other)),
            0);
  EXPECT_NE(ReadFile(other).value(), ReadFile(kExample).value());
}

// The demo's session: the default one cut at a message boundary (examples/cut_session.py), about
// 4,000 tokens, with its tool calls and the PostgreSQL port literal kept.
TEST(WorkloadExample, DemoSessionIsTheDefaultOneCut) {
  const std::string demo = std::string(FLIPSCOPE_SOURCE_DIR) + "/examples/netops-demo.json";
  auto doc = nlohmann::json::parse(ReadFile(demo).value());
  const int n = doc["metadata"]["cut"]["messages"].get<int>();
  std::string out = fixtures::TempPath("workload-demo-recut.json");
  std::string cmd = fmt::format("{} {}/examples/cut_session.py {} --messages {} -o {}", FLIPSCOPE_PYTHON,
                                FLIPSCOPE_SOURCE_DIR, kExample, n, out);
  ASSERT_EQ(Shell(cmd), 0) << cmd;
  EXPECT_EQ(ReadFile(out).value(), ReadFile(demo).value()) << cmd;
  const std::string model = fixtures::SmolLM2Path();
  ASSERT_FALSE(model.empty()) << "SmolLM2 is not in the cache (make test fetches it)";
  auto w = Load(demo, model);
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_GE(w->tokens.size(), 3500u);
  EXPECT_LE(w->tokens.size(), 4300u);
  EXPECT_GE(Kind(*w, "tool_call").size(), 10u);
  EXPECT_NE(LiteralSpan(*w, "5432"), nullptr);
  // A prefix of the default session's tokens: the same conversation, only shorter.
  auto full = Load(kExample, model);
  ASSERT_TRUE(full.ok()) << full.status().message();
  size_t same = 0;
  while (same < w->tokens.size() && w->tokens[same] == full->tokens[same]) ++same;
  EXPECT_GT(same, w->tokens.size() - 8) << "the cut differs from the default session at token " << same;
}

// The session `make demo` runs: the same cut without messages 1-12 (examples/cut_session.py
// --from 13), shorter by a fifth, keeping the system prompt and the turns with the port literal:
// its tokens after the system prompt's end are the 31-message cut's last tokens.
TEST(WorkloadExample, ShortDemoSessionKeepsTheEndOfTheCut) {
  const std::string demo = std::string(FLIPSCOPE_SOURCE_DIR) + "/examples/netops-demo-short.json";
  auto doc = nlohmann::json::parse(ReadFile(demo).value());
  const auto& cut = doc["metadata"]["cut"];
  std::string out = fixtures::TempPath("workload-demo-short-recut.json");
  std::string cmd =
      fmt::format("{} {}/examples/cut_session.py {} --from {} --messages {} -o {}", FLIPSCOPE_PYTHON,
                  FLIPSCOPE_SOURCE_DIR, kExample, cut["first"].get<int>(), cut["messages"].get<int>(), out);
  ASSERT_EQ(Shell(cmd), 0) << cmd;
  EXPECT_EQ(ReadFile(out).value(), ReadFile(demo).value()) << cmd;
  ASSERT_NE(Shell(fmt::format("{} {}/examples/cut_session.py {} --from 12 --messages 31 -o {} 2>/dev/null",
                              FLIPSCOPE_PYTHON, FLIPSCOPE_SOURCE_DIR, kExample, out)),
            0)
      << "--from must start at a user turn";
  const std::string model = fixtures::SmolLM2Path();
  ASSERT_FALSE(model.empty()) << "SmolLM2 is not in the cache (make test fetches it)";
  auto w = Load(demo, model);
  auto longer = Load(std::string(FLIPSCOPE_SOURCE_DIR) + "/examples/netops-demo.json", model);
  ASSERT_TRUE(w.ok() && longer.ok());
  EXPECT_LE(w->tokens.size(), longer->tokens.size() * 9 / 10);
  EXPECT_GE(Kind(*w, "tool_call").size(), 5u);
  EXPECT_NE(LiteralSpan(*w, "5432"), nullptr);
  size_t same = 0;  // counted from the end
  while (same < w->tokens.size() &&
         w->tokens[w->tokens.size() - 1 - same] == longer->tokens[longer->tokens.size() - 1 - same])
    ++same;
  EXPECT_GT(same, w->tokens.size() / 2) << "the short cut's end differs from the cut's " << same << " tokens back";
}

// The session `make demo` runs: the first 11 messages of the PostgreSQL recovery session
// (examples/cut_session.py --messages 11), about 1,600 tokens, so that the whole method runs in
// about two minutes: four tool calls, the port literal inside one of them, two windows of 1,024.
TEST(WorkloadExample, DemoSessionIsTheRecoverySessionsStart) {
  const std::string session = std::string(FLIPSCOPE_SOURCE_DIR) + "/examples/pg-recovery-session.json";
  const std::string demo = std::string(FLIPSCOPE_SOURCE_DIR) + "/examples/pg-recovery-demo.json";
  auto doc = nlohmann::json::parse(ReadFile(demo).value());
  std::string out = fixtures::TempPath("workload-pg-demo-recut.json");
  std::string cmd = fmt::format("{} {}/examples/cut_session.py {} --messages {} -o {}", FLIPSCOPE_PYTHON,
                                FLIPSCOPE_SOURCE_DIR, session, doc["metadata"]["cut"]["messages"].get<int>(), out);
  ASSERT_EQ(Shell(cmd), 0) << cmd;
  EXPECT_EQ(ReadFile(out).value(), ReadFile(demo).value()) << cmd;
  const std::string model = fixtures::SmolLM2Path();
  ASSERT_FALSE(model.empty()) << "SmolLM2 is not in the cache (make test fetches it)";
  auto w = Load(demo, model);
  auto full = Load(session, model);
  ASSERT_TRUE(w.ok() && full.ok());
  EXPECT_GT(w->tokens.size(), 1024u) << "the demo's window is 1,024 tokens: it should see two";
  EXPECT_LE(w->tokens.size(), 1800u);
  EXPECT_GE(Kind(*w, "tool_call").size(), 4u);
  EXPECT_NE(LiteralSpan(*w, "5432"), nullptr);
  bool in_call = false;  // some occurrence of the port inside some call's arguments
  for (const Span* port : Kind(*w, "literal"))
    for (const Span* call : Kind(*w, "tool_call"))
      in_call |= port->label == "5432" && call->begin <= port->begin && port->end <= call->end;
  EXPECT_TRUE(in_call) << "the port literal should lie inside a tool call";
  size_t same = 0;
  while (same < w->tokens.size() && w->tokens[same] == full->tokens[same]) ++same;
  EXPECT_GT(same, w->tokens.size() - 8) << "the cut differs from the whole session at token " << same;
}

// The tool-call grammar of the <tool_call> form lays out each call's arguments in the workload's
// own key order (device before command), as llama-server does with a request's tools: the
// example's calls follow it. With the keys sorted it would want command first.
TEST(WorkloadExample, ToolGrammarFollowsTheSchemasKeyOrder) {
  const std::string model = fixtures::SmolLM2Path();
  ASSERT_FALSE(model.empty()) << "SmolLM2 is not in the cache (make test fetches it)";
  auto w = LoadWorkload(kExample, model, {});
  ASSERT_TRUE(w.ok()) << w.status().message();
  const auto tools = nlohmann::ordered_json::parse(w->info["tools_text"].get<std::string>());
  auto g = LoadToolGrammar(model, "", tools, false);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_NE(g->gbnf.find("tool-run-command-schema ::= \"{\" space tool-run-command-schema-device-kv \",\" space "
                         "tool-run-command-schema-command-kv"),
            std::string::npos)
      << g->gbnf;
  auto sorted = LoadToolGrammar(model, "", nlohmann::ordered_json::parse(w->tools.dump()), false);
  ASSERT_TRUE(sorted.ok()) << sorted.status().message();
  EXPECT_NE(sorted->gbnf.find("tool-run-command-schema ::= \"{\" space tool-run-command-schema-command-kv"),
            std::string::npos)
      << sorted->gbnf;
}

TEST(WorkloadExample, SmolLM2) {
  const std::string model = fixtures::SmolLM2Path();
  ASSERT_FALSE(model.empty()) << "SmolLM2 is not in the cache (make test fetches it)";
  auto w = Load(kExample, model);
  ASSERT_TRUE(w.ok()) << w.status().message();
  // About 7,000 tokens, leaving generation room in SmolLM2's 8,192-token context.
  EXPECT_GE(w->tokens.size(), 6500u);
  EXPECT_LT(w->tokens.size(), 7600u);
  EXPECT_EQ(w->info["span_mapping"], "exact");
  EXPECT_EQ(w->info["span_method"], "windows/1/placeholders");
  Vocab v(model);
  EXPECT_EQ(w->tokens, v.Tokenize(w->text));
  auto doc = nlohmann::json::parse(ReadFile(kExample).value());
  std::vector<std::string> names;
  for (const auto& m : doc["messages"])
    if (m.contains("tool_calls"))
      for (const auto& c : m["tool_calls"]) names.push_back(c["function"]["name"]);
  auto calls = Kind(*w, "tool_call");
  ASSERT_EQ(calls.size(), names.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    std::string text = v.Decode(w->tokens, calls[i]->begin, calls[i]->end);
    EXPECT_NE(text.find("<tool_call>{\"name\": \"" + names[i] + "\""), std::string::npos) << text;
    EXPECT_EQ(calls[i]->subkind, names[i]);
  }
  ASSERT_NE(LiteralSpan(*w, "5432"), nullptr);

  // Independent check: the documented rendering rebuilt in Python from the JSON, and the spans
  // decoded through the GGUF's own token strings.
  std::string text = Write("smol.txt", w->text);
  std::string tokens = Write("smol.tokens.json", nlohmann::json(w->tokens).dump());
  std::string spans = Write("smol.spans.json", SpansToJson(w->spans).dump());
  std::string cmd =
      fmt::format("{} {}/tests/ref/workload_ref.py --session {} --gguf {} --text {} --tokens {} --spans {}",
                  FLIPSCOPE_PYTHON, FLIPSCOPE_SOURCE_DIR, kExample, model, text, tokens, spans);
  EXPECT_EQ(Shell(cmd), 0) << cmd;
}

TEST(WorkloadExample, Gemma3WithTheBuiltinGemmaTemplate) {
  const std::string model = fixtures::Gemma3Path();
  ASSERT_FALSE(model.empty()) << "Gemma 3 270M is not in the cache (make test fetches it)";
  // The GGUF has no embedded template: an error without --chat-template, the built-in with it.
  ExpectError(Load(kExample, model), {model, "no embedded chat template"});
  auto w = Load(kExample, model, "gemma");
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_GE(w->tokens.size(), 6500u);
  EXPECT_LT(w->tokens.size(), 7600u);
  EXPECT_EQ(w->info["span_mapping"], "exact");
  EXPECT_EQ(w->info["tool_result_form"], "<tool_response> in user message");
  EXPECT_EQ(w->info["add_bos"], true);
  Vocab v(model);
  EXPECT_EQ(w->tokens, v.Tokenize(w->text));
  for (const Span* c : Kind(*w, "tool_call"))
    EXPECT_NE(v.Decode(w->tokens, c->begin, c->end).find("\"name\": \"" + c->subkind + "\""), std::string::npos);
  auto messages = Kind(*w, "message");
  ASSERT_FALSE(messages.empty());
  EXPECT_EQ(messages[0]->label, "messages #1-#2 (merged by the template)");
}

}  // namespace
}  // namespace flipscope
