// LoadWorkload on the tiny model: every input format, the tool fallbacks, spans, errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/workload_test_util.h"
#include "util/util.h"

namespace flipscope {
namespace {

using namespace testing_workload;  // NOLINT: test helpers

const char* kTools = R"([{"type": "function", "function": {"name": "run_command", "description": "Run a show command",
  "parameters": {"type": "object", "properties": {"device": {"type": "string"}, "command": {"type": "string"}}}}},
  {"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {"target": {"type": "string"}}}}}])";

// system, user, assistant with two calls, two tool results, assistant.
std::vector<std::string> Messages() {
  return {R"({"role": "system", "content": "You are a test agent."})",
          R"({"role": "user", "content": "Where is 10.0.0.1?"})",
          R"({"role": "assistant", "content": "Checking.", "tool_calls": [
          {"id": "c1", "type": "function", "function": {"name": "run_command", "arguments": "{\"device\": \"sw1\", \"command\": \"show arp\"}"}},
          {"id": "c2", "type": "function", "function": {"name": "ping", "arguments": {"target": "10.0.0.1"}}}]})",
          R"({"role": "tool", "tool_call_id": "c1", "content": "Internet 10.0.0.1 0050.56a1.3c7e Gi0/1"})",
          R"({"role": "tool", "tool_call_id": "c2", "content": "Success rate is 100 percent"})",
          R"({"role": "assistant", "content": "It is on Gi0/1, port 5432 is open."})"};
}

std::string ChatJson(const std::vector<std::string>& msgs) {
  std::string s = std::string("{\"tools\": ") + kTools + ", \"messages\": [";
  for (size_t i = 0; i < msgs.size(); ++i) s += (i ? ",\n" : "\n") + msgs[i];
  return s + "]}";
}

std::string ChatJsonl(const std::vector<std::string>& msgs) {
  using J = nlohmann::ordered_json;  // the key order of the tools is part of the rendering
  std::string s = J{{"tools", J::parse(kTools)}}.dump() + "\n";
  for (const auto& m : msgs) s += J::parse(m).dump() + "\n";
  return s;
}

TEST(Workload, ChatJsonRendersToolFallbacksWithChatML) {
  auto w = Load(Write("chat.json", ChatJson(Messages())), TinyModel());
  ASSERT_TRUE(w.ok()) << w.status().message();
  // The tiny ChatML template renders neither tools nor tool calls, but takes a "tool" role.
  EXPECT_EQ(w->info["format"], "chat");
  EXPECT_EQ(w->info["tool_call_form"], "<tool_call> in content");
  EXPECT_EQ(w->info["tool_result_form"], "tool role");
  EXPECT_EQ(w->info["tools_in_system"], true);
  EXPECT_EQ(w->info["template"]["source"], "embedded");
  EXPECT_EQ(w->info["span_mapping"], "exact");
  EXPECT_EQ(w->info["n_tool_calls"], 2);
  EXPECT_EQ(w->info["sha256"], Sha256File(w->info["path"].get<std::string>()).value());
  // The tools' own key order survives for the tool-call grammar ("device" before "command"),
  // where the sorted JSON of `tools` loses it.
  EXPECT_EQ(w->info["tools_text"], nlohmann::ordered_json::parse(kTools).dump());
  const std::string text = w->info["tools_text"];
  EXPECT_LT(text.find("\"device\""), text.find("\"command\"")) << text;
  EXPECT_GT(w->tools.dump().find("\"device\""), w->tools.dump().find("\"command\""));
  EXPECT_EQ(w->text.rfind("<|im_start|>system\nYou are a test agent.\n\n# Tools\n", 0), 0u);
  EXPECT_NE(w->text.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"run_command\", \"description\": "
                         "\"Run a show command\", \"parameters\": {\"type\": \"object\""),
            std::string::npos);
  const std::string call1 =
      R"(<tool_call>{"name": "run_command", "arguments": {"device": "sw1", "command": "show arp"}}</tool_call>)";
  const std::string call2 = R"(<tool_call>{"name": "ping", "arguments": {"target": "10.0.0.1"}}</tool_call>)";
  EXPECT_TRUE(EndsWith(w->text, "<|im_start|>user\nWhere is 10.0.0.1?<|im_end|>\n<|im_start|>assistant\nChecking.\n" +
                                    call1 + "\n" + call2 +
                                    "<|im_end|>\n<|im_start|>tool\nInternet 10.0.0.1 0050.56a1.3c7e Gi0/1<|im_end|>\n"
                                    "<|im_start|>tool\nSuccess rate is 100 percent<|im_end|>\n"
                                    "<|im_start|>assistant\nIt is on Gi0/1, port 5432 is open.<|im_end|>\n"))
      << w->text;

  // Tokens are llama.cpp's own tokenization with special tokens (BOS added: add_bos is set).
  Vocab v(TinyModel());
  EXPECT_EQ(w->tokens, v.Tokenize(w->text));
  EXPECT_EQ(w->tokens.front(), llama_vocab_bos(v.vocab));
  EXPECT_EQ(w->info["n_tokens"], w->tokens.size());

  auto messages = Kind(*w, "message");
  ASSERT_EQ(messages.size(), 6u);
  const char* roles[] = {"system", "user", "assistant", "tool", "tool", "assistant"};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(messages[i]->index, int(i + 1));
    EXPECT_EQ(messages[i]->role, roles[i]);
    if (i) {
      EXPECT_EQ(messages[i]->begin, messages[i - 1]->end) << "messages tile the tokens";
    }
  }
  EXPECT_EQ(messages.back()->end, int32_t(w->tokens.size()));
  // (The tiny SentencePiece vocabulary puts a space after each special token: " user".)
  EXPECT_NE(v.Decode(w->tokens, messages[1]->begin, messages[1]->end).find("<|im_start|> user\nWhere is 10.0.0.1?"),
            std::string::npos);
  auto calls = Kind(*w, "tool_call");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]->label, "tool call #1 run_command");
  EXPECT_NE(v.Decode(w->tokens, calls[0]->begin, calls[0]->end).find(call1), std::string::npos);
  EXPECT_NE(v.Decode(w->tokens, calls[1]->begin, calls[1]->end).find(call2), std::string::npos);
  EXPECT_EQ(v.Decode(w->tokens, calls[1]->begin, calls[1]->end).find("run_command"), std::string::npos);
  auto results = Kind(*w, "tool_result");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1]->label, "tool result #2 ping");
  EXPECT_NE(v.Decode(w->tokens, results[1]->begin, results[1]->end).find("Success rate is 100 percent"),
            std::string::npos);

  const Span* ip = LiteralSpan(*w, "10.0.0.1");
  ASSERT_NE(ip, nullptr);
  EXPECT_EQ(ip->subkind, "ipv4");
  EXPECT_EQ(ip->index, 2);  // first seen in the user's message
  const Span* port = LiteralSpan(*w, "5432");
  ASSERT_NE(port, nullptr);
  EXPECT_EQ(port->subkind, "port");
  EXPECT_EQ(port->role, "assistant");
  EXPECT_EQ(v.Decode(w->tokens, port->begin, port->end).find("5432") != std::string::npos, true);
  EXPECT_EQ(LiteralSpan(*w, "0050.56a1.3c7e")->role, "tool");
  EXPECT_EQ(SpanLabelAt(w->spans, port->begin), "literal port 5432");
}

TEST(Workload, JsonlGivesTheSameWorkloadAsJson) {
  auto a = Load(Write("same.json", ChatJson(Messages())), TinyModel());
  auto b = Load(Write("same.jsonl", ChatJsonl(Messages())), TinyModel());
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().message() << b.status().message();
  EXPECT_EQ(b->info["format"], "jsonl");
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(SpansToJson(a->spans), SpansToJson(b->spans));
  EXPECT_EQ(a->tools, b->tools);
  EXPECT_EQ(a->tools.size(), 2u);
}

// A call whose arguments string is not JSON is accepted as written (a model may well have written
// broken arguments) with one warning per such call naming the file, the message and the call; the
// manifest's record lists them. Well-formed calls give none, and nothing is recorded then.
TEST(Workload, ArgumentsThatAreNotJsonAreAcceptedWithAWarningPerCall) {
  auto msgs = Messages();
  msgs[2] = R"({"role": "assistant", "content": "Checking.", "tool_calls": [
          {"id": "c1", "type": "function", "function": {"name": "run_command", "arguments": "{\"device\": \"sw1\", \"command\": "}},
          {"id": "c2", "type": "function", "function": {"name": "ping", "arguments": "target=10.0.0.1"}}]})";
  const std::string path = Write("broken-args.json", ChatJson(msgs));
  auto w = Load(path, TinyModel());
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_EQ(w->warnings.size(), 2u);
  EXPECT_EQ(w->warnings[0].rfind(path + ": message #3: tool call #1 (run_command): arguments are not JSON (", 0), 0u)
      << w->warnings[0];
  EXPECT_EQ(w->warnings[1].rfind(path + ": message #3: tool call #2 (ping): arguments are not JSON (", 0), 0u)
      << w->warnings[1];
  for (const auto& line : w->warnings) {
    EXPECT_NE(line.find("; kept as written"), std::string::npos) << line;
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  }
  EXPECT_EQ(w->info["warnings"], nlohmann::json(w->warnings));
  EXPECT_NE(w->text.find("target=10.0.0.1"), std::string::npos);  // the text as written is what is fed
  // JSONL names the line as well.
  const std::string jl = Write("broken-args.jsonl", ChatJsonl(msgs));
  auto l = Load(jl, TinyModel());
  ASSERT_TRUE(l.ok()) << l.status().message();
  ASSERT_EQ(l->warnings.size(), 2u);
  EXPECT_EQ(l->warnings[1].rfind(jl + ":4: message #3: tool call #2 (ping): ", 0), 0u) << l->warnings[1];
  auto fine = Load(Write("fine-args.json", ChatJson(Messages())), TinyModel());
  ASSERT_TRUE(fine.ok());
  EXPECT_TRUE(fine->warnings.empty());
  EXPECT_FALSE(fine->info.contains("warnings"));
}

TEST(Workload, PlainText) {
  const std::string text = "show arp on 192.168.1.1 port 22\n";
  auto w = Load(Write("plain.txt", text), TinyModel());
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->info["format"], "text");
  EXPECT_TRUE(w->info["template"].is_null());
  EXPECT_EQ(w->text, text);
  Vocab v(TinyModel());
  EXPECT_EQ(w->tokens, v.Tokenize(text));
  EXPECT_EQ(Kind(*w, "message").size(), 0u);
  ASSERT_NE(LiteralSpan(*w, "192.168.1.1"), nullptr);
  ASSERT_NE(LiteralSpan(*w, "22"), nullptr);
  EXPECT_EQ(v.Decode(w->tokens, LiteralSpan(*w, "22")->begin, LiteralSpan(*w, "22")->end), "22");
}

TEST(Workload, TokenIds) {
  auto w = Load(Write("ids.tokens", "1 5 6,7\n 300, 301"), TinyModel());
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->tokens, (std::vector<int32_t>{1, 5, 6, 7, 300, 301}));
  EXPECT_EQ(w->info["format"], "tokens");
  auto j = Load(Write("ids.json", "[1, 5, 6]"), TinyModel());
  ASSERT_TRUE(j.ok()) << j.status().message();
  EXPECT_EQ(j->tokens, (std::vector<int32_t>{1, 5, 6}));
  EXPECT_EQ(j->info["format"], "tokens");

  auto range = Load(Write("range.ids", "1 2 99999"), TinyModel());
  ASSERT_FALSE(range.ok());
  EXPECT_NE(range.status().message().find("range.ids: token #3 (id 99999) is out of range"), std::string::npos)
      << range.status().message();
  auto junk = Load(Write("junk.ids", "1 x2"), TinyModel());
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.status().message().find("token #2 'x2' is not an integer"), std::string::npos);
}

// Each bad input gives one error that names the file and what is wrong.
TEST(Workload, Errors) {
  const std::string& m = TinyModel();
  ExpectError(Load(fixtures::TempPath("workload-missing.json"), m), {"workload-missing.json"});
  ExpectError(Load(Write("bad.jsonl", "{\"role\": \"user\", \"content\": \"a\"}\n\n{\"role\": \"user\",\n"), m),
              {"bad.jsonl:3: invalid JSON"});
  ExpectError(Load(Write("bad.json", "{\"messages\": [}"), m), {"bad.json: invalid JSON"});
  auto msgs = Messages();
  msgs[3] = R"({"role": "tool", "tool_call_id": "c9", "content": "x"})";
  ExpectError(Load(Write("dangling.json", ChatJson(msgs)), m),
              {"dangling.json: message #4: tool_call_id 'c9' refers to no earlier tool call"});
  msgs[3] = R"({"role": "tool", "content": "x"})";
  ExpectError(Load(Write("noid.jsonl", ChatJsonl(msgs)), m), {"noid.jsonl:5: message #4: a tool message needs"});
  msgs[3] = R"({"role": "robot", "content": "x"})";
  ExpectError(Load(Write("role.json", ChatJson(msgs)), m), {"role.json: message #4: unknown role 'robot'"});
  ExpectError(Load(Write("nomsg.json", "{\"tools\": []}"), m), {"nomsg.json", "\"messages\""});
  // The gemma format folds a system prompt into the first user turn: alone, it renders nothing.
  ExpectError(Load(Write("system-only.json", ChatJson({Messages()[0]})), m, "gemma"),
              {"system-only.json: gives 1 token(s)", "0 characters rendered", "at least 2"});  // BOS alone
  ExpectError(Load(Write("ok.json", ChatJson(Messages())), TinyModel(false)),
              {TinyModel(false), "no embedded chat template", "--chat-template"});
  ExpectError(Load(Write("ok.json", ChatJson(Messages())), m, "no-such-template"),
              {"no-such-template", "neither a file nor a llama.cpp built-in", "chatml"});
  ExpectError(Load(Write("ok.json", ChatJson(Messages())), fixtures::TempPath("no-model.gguf")), {"no-model.gguf"});
  ExpectError(Load(Write("ok.json", ChatJson(Messages())), m, "", "yaml"), {"--format yaml"});
  ExpectError(Load(Write("session.xyz", "x"), m), {"session.xyz", "--format"});
  const std::string raising = Write("raise.jinja", "{{ raise_exception('boom: roles are wrong') }}");
  ExpectError(Load(Write("ok.json", ChatJson(Messages())), m, raising),
              {"workload-ok.json: the chat template " + raising, "boom: roles are wrong"});
}

TEST(Workload, BuiltinTemplateByName) {
  // The model has no template: a built-in name renders it (and a name is not Jinja source).
  auto w = Load(Write("builtin.json", ChatJson(Messages())), TinyModel(false), "gemma");
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->info["template"]["source"], "builtin");
  EXPECT_EQ(w->info["template"]["name"], "gemma");
  EXPECT_EQ(w->info["tool_result_form"], "<tool_response> in user message");
  EXPECT_EQ(w->info["merged_messages"], 1);  // the two tool results
  EXPECT_EQ(w->text.rfind("<start_of_turn>user\nYou are a test agent.", 0), 0u) << w->text;
  EXPECT_NE(w->text.find("<start_of_turn>user\n<tool_response>Internet 10.0.0.1 0050.56a1.3c7e Gi0/1</tool_response>\n"
                         "<tool_response>Success rate is 100 percent</tool_response><end_of_turn>\n"),
            std::string::npos)
      << w->text;
  auto messages = Kind(*w, "message");
  ASSERT_EQ(messages.size(), 4u);
  EXPECT_EQ(messages[0]->label, "messages #1-#2 (merged by the template)");
  EXPECT_EQ(messages[2]->label, "messages #4-#5 (merged, as user)");
  EXPECT_EQ(Kind(*w, "tool_result").size(), 2u);
  auto chatml = Load(Write("builtin.json", ChatJson(Messages())), TinyModel(false), "chatml");
  ASSERT_TRUE(chatml.ok()) << chatml.status().message();
  EXPECT_EQ(chatml->text.rfind("<|im_start|>system\nYou are a test agent.", 0), 0u);
}

// Gemma 3's template in miniature: no tool role, and turns must alternate.
const char* kAlternating =
    "{%- if messages[0]['role'] == 'system' -%}{%- set first = messages[0]['content'] + '\\n\\n' -%}"
    "{%- set loop_messages = messages[1:] -%}{%- else -%}{%- set first = '' -%}{%- set loop_messages = messages -%}"
    "{%- endif -%}{%- for message in loop_messages -%}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{%- endif -%}"
    "{%- if message['role'] == 'assistant' -%}{%- set role = 'model' -%}{%- else -%}{%- set role = message['role'] -%}"
    "{%- endif -%}{{ '<start_of_turn>' + role + '\\n' + (first if loop.first else '') + message['content'] | trim + "
    "'<end_of_turn>\\n' }}{%- endfor -%}";

TEST(Workload, AlternatingJinjaTemplateMergesToolResults) {
  auto w = Load(Write("alt.json", ChatJson(Messages())), TinyModel(), Write("alt.jinja", kAlternating));
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->info["template"]["source"], "file");
  EXPECT_EQ(w->info["template"]["requires_alternation"], true);
  EXPECT_EQ(w->info["template"]["tool_role"], false);
  EXPECT_EQ(w->info["merged_messages"], 1);
  // The template merges the system prompt into the first user turn: windows keep 3 messages.
  EXPECT_EQ(w->info["span_method"], "windows/3/placeholders");
  EXPECT_NE(w->text.find("<start_of_turn>user\n<tool_response>Internet 10.0.0.1 0050.56a1.3c7e Gi0/1</tool_response>\n"
                         "<tool_response>Success rate is 100 percent</tool_response><end_of_turn>\n"),
            std::string::npos)
      << w->text;
  Vocab v(TinyModel());
  auto results = Kind(*w, "tool_result");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_NE(v.Decode(w->tokens, results[0]->begin, results[0]->end).find("Gi0/1</tool_response>"), std::string::npos);
  EXPECT_EQ(v.Decode(w->tokens, results[0]->begin, results[0]->end).find("Success"), std::string::npos);
}

// A template that renders tools and tool calls itself.
const char* kNative =
    "{%- if tools -%}<|im_start|>system\n{% for t in tools %}tool {{ t['function']['name'] }}\n{% endfor %}<|im_end|>\n"
    "{% endif -%}{%- for m in messages -%}<|im_start|>{{ m['role'] }}\n{% if m['content'] %}{{ m['content'] }}{% endif "
    "%}"
    "{%- if m['tool_calls'] -%}{%- for c in m['tool_calls'] -%}<call>{{ c['function']['name'] }} "
    "{{ c['function']['arguments'] | tojson }}</call>{%- endfor -%}{%- endif -%}<|im_end|>\n{% endfor -%}";

TEST(Workload, TemplateRenderedToolCallsGetSpans) {
  auto w = Load(Write("native.json", ChatJson(Messages())), TinyModel(), Write("native.jinja", kNative));
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->info["tool_call_form"], "template") << w->info.dump();
  EXPECT_EQ(w->info["span_method"], "windows/1/placeholders");
  EXPECT_EQ(w->info["tools_in_system"], false);
  EXPECT_EQ(w->text.rfind("<|im_start|>system\ntool run_command\ntool ping\n<|im_end|>\n", 0), 0u) << w->text;
  Vocab v(TinyModel());
  auto calls = Kind(*w, "tool_call");
  ASSERT_EQ(calls.size(), 2u);
  std::string c1 = v.Decode(w->tokens, calls[0]->begin, calls[0]->end);
  std::string c2 = v.Decode(w->tokens, calls[1]->begin, calls[1]->end);
  EXPECT_NE(c1.find("<call>run_command"), std::string::npos) << c1;
  EXPECT_EQ(c1.find("ping"), std::string::npos) << c1;
  EXPECT_NE(c2.find("<call>ping"), std::string::npos) << c2;
  EXPECT_EQ(c2.find("<|im_end|>"), std::string::npos) << c2;
}

TEST(Workload, TemplateWhosePrefixesChangeFallsBackToContentSearch) {
  // The message count printed first: no rendering of a prefix is a prefix of the full one.
  const std::string tmpl = Write("count.jinja",
                                 "{{ messages | length }} messages\n{% for m in messages %}[{{ m['role'] }}] "
                                 "{{ m['content'] }}\n{% endfor %}");
  auto w = Load(Write("count.json", ChatJson(Messages())), TinyModel(), tmpl);
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->info["span_method"], "content-search");
  Vocab v(TinyModel());
  auto messages = Kind(*w, "message");
  ASSERT_EQ(messages.size(), 6u);
  EXPECT_NE(v.Decode(w->tokens, messages[5]->begin, messages[5]->end).find("It is on Gi0/1"), std::string::npos);
  EXPECT_NE(v.Decode(w->tokens, messages[3]->begin, messages[3]->end).find("Internet 10.0.0.1"), std::string::npos);
}

TEST(Workload, LastMessageRenderedSpeciallyUsesTheSentinelLocator) {
  // Like Qwen3: only the last assistant message opens a think block, so no rendering of a
  // prefix that ends in an assistant message is a prefix of the full one.
  const std::string tmpl = Write("last.jinja",
                                 "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if loop.last and m['role'] == "
                                 "'assistant' %}<think></think>{% endif %}{{ m['content'] }}<|im_end|>\n{% endfor %}");
  auto w = Load(Write("last.json", ChatJson(Messages())), TinyModel(), tmpl);
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->info["span_method"], "windows/1/placeholders/sentinel");
  EXPECT_TRUE(
      EndsWith(w->text, "<|im_start|>assistant\n<think></think>It is on Gi0/1, port 5432 is open.<|im_end|>\n"));
  Vocab v(TinyModel());
  auto messages = Kind(*w, "message");
  ASSERT_EQ(messages.size(), 6u);
  // (The tiny SentencePiece vocabulary puts a space after each special token.)
  const char* starts[] = {"<|im_start|> system\nYou are",      "<|im_start|> user\nWhere",
                          "<|im_start|> assistant\nChecking.", "<|im_start|> tool\nInternet",
                          "<|im_start|> tool\nSuccess",        "<|im_start|> assistant\n<think>"};
  for (size_t i = 0; i < 6; ++i) {
    std::string text = v.Decode(w->tokens, messages[i]->begin, messages[i]->end);
    EXPECT_EQ(text.rfind(starts[i], 0), 0u) << i << ": " << text;
    EXPECT_TRUE(EndsWith(text, "<|im_end|> \n")) << i << ": " << text;  // (the space: as above)
  }
}

TEST(Workload, RefusedWindowsMergeMessages) {
  // Like Llama 3.1's, which puts the tools into the first user message: no rendering without one.
  const std::string tmpl =
      Write("refuse.jinja",
            "{% if messages | length < 2 %}{{ raise_exception('no first user message') }}{% endif %}"
            "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}");
  auto w = Load(Write("refuse.json", ChatJson(Messages())), TinyModel(), tmpl);
  ASSERT_TRUE(w.ok()) << w.status().message();
  auto messages = Kind(*w, "message");
  ASSERT_EQ(messages.size(), 5u);
  EXPECT_EQ(messages[0]->label, "messages #1-#2 (merged by the template)");
  EXPECT_EQ(messages[0]->begin, 1);  // after BOS
  EXPECT_EQ(messages[1]->label, "message #3 assistant");
  EXPECT_EQ(Kind(*w, "tool_call").size(), 2u);
  EXPECT_EQ(w->info["span_refused_windows"], 1);
}

TEST(Workload, SpanHelpers) {
  std::vector<Span> spans = {{SpanKind::kMessage, 0, 100, 1, "user", "message #1 user", ""},
                             {SpanKind::kToolCall, 10, 30, 1, "assistant", "tool call #1 run_command", "run_command"},
                             {SpanKind::kLiteral, 12, 14, 1, "assistant", "5432", "port"}};
  EXPECT_EQ(InnermostSpan(spans, 13), &spans[2]);
  EXPECT_EQ(InnermostSpan(spans, 20), &spans[1]);
  EXPECT_EQ(InnermostSpan(spans, 100), nullptr);
  EXPECT_EQ(SpanLabelAt(spans, 5), "message #1 user");
  EXPECT_EQ(SpanLabelAt(spans, 12), "literal port 5432");
  EXPECT_EQ(SpanLabelAt(spans, 200), "");
  auto back = SpansFromJson(SpansToJson(spans));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(SpansToJson(*back), SpansToJson(spans));
  EXPECT_EQ(SpansToJson(spans)[1]["label"], "tool call #1 run_command");
  EXPECT_FALSE(SpansFromJson(nlohmann::json::parse(R"([{"kind": "message"}])")).ok());
}

// Where a deployed model writes: assistant text and tool calls; not system, user or tool-result
// text, nor the template's text between messages; a workload without messages everywhere.
TEST(Workload, AssistantSpansMarkWhatTheModelGenerated) {
  auto w = Load(Write("gen.json", ChatJson(Messages())), TinyModel());
  ASSERT_TRUE(w.ok()) << w.status().message();
  Vocab v(TinyModel());
  auto messages = Kind(*w, "message");
  ASSERT_EQ(messages.size(), 6u);
  const char* first_words[] = {"Checking", "It"};
  int k = 0;
  for (size_t i : {size_t(2), size_t(5)}) {
    const Span& m = *messages[i];
    ASSERT_GT(m.gen_begin, m.begin) << m.label;
    ASSERT_LT(m.gen_begin, m.gen_end);
    ASSERT_LE(m.gen_end, m.end);
    const std::string header = v.Decode(w->tokens, m.begin, m.gen_begin);
    const std::string generated = v.Decode(w->tokens, m.gen_begin, m.gen_end);
    const std::string after = v.Decode(w->tokens, m.gen_end, m.end);
    EXPECT_NE(header.find("<|im_start|>"), std::string::npos) << header;
    EXPECT_NE(header.find("assistant"), std::string::npos) << header;
    EXPECT_NE(generated.find(first_words[k++]), std::string::npos) << generated;
    EXPECT_EQ(generated.find("assistant"), std::string::npos) << "the role header is not generated: " << generated;
    EXPECT_TRUE(EndsWith(generated, "<|im_end|>")) << "the end-of-turn token is the model's last: " << generated;
    EXPECT_EQ(after.find("<|im_end|>"), std::string::npos) << after;
    EXPECT_FALSE(ModelWrites(w->spans, m.begin)) << "<|im_start|>";
    EXPECT_FALSE(ModelWrites(w->spans, m.gen_begin - 1)) << "the header's last token";
    EXPECT_TRUE(ModelWrites(w->spans, m.gen_begin));
    EXPECT_TRUE(ModelWrites(w->spans, m.gen_end - 1)) << "<|im_end|>";
    if (m.gen_end < m.end) {
      EXPECT_FALSE(ModelWrites(w->spans, m.gen_end)) << "the newline after <|im_end|>";
    }
  }
  for (size_t i : {size_t(0), size_t(1), size_t(3), size_t(4)}) EXPECT_EQ(messages[i]->gen_begin, -1);
  for (const Span* c : Kind(*w, "tool_call")) {
    EXPECT_GE(c->begin, messages[2]->gen_begin) << "calls lie inside what the model generated";
    EXPECT_LE(c->end, messages[2]->gen_end);
  }

  // The spans round-trip through a manifest; spans written before the split (no "generated")
  // count the whole assistant message, as they always did; a bad range is refused.
  auto back = SpansFromJson(SpansToJson(w->spans));
  ASSERT_TRUE(back.ok()) << back.status().message();
  for (size_t i = 0; i < back->size(); ++i) {
    EXPECT_EQ((*back)[i].gen_begin, w->spans[i].gen_begin);
    EXPECT_EQ((*back)[i].gen_end, w->spans[i].gen_end);
  }
  nlohmann::json old = SpansToJson(w->spans);
  for (auto& e : old) e.erase("generated");
  auto before = SpansFromJson(old);
  ASSERT_TRUE(before.ok());
  EXPECT_TRUE(ModelWrites(*before, messages[2]->begin)) << "no split known: the header counts as written";
  nlohmann::json bad = SpansToJson(w->spans);
  for (auto& e : bad)
    if (e.contains("generated")) e["generated"] = {e["end"].get<int>(), e["end"].get<int>() + 5};
  auto refused = SpansFromJson(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("generated must be [begin, end] inside the span"), std::string::npos);
}

TEST(Workload, ModelWritesOnlyAssistantMessagesAndTheirToolCalls) {
  std::vector<Span> spans = {{SpanKind::kMessage, 1, 10, 1, "system", "message #1 system", ""},
                             {SpanKind::kMessage, 10, 20, 2, "user", "message #2 user", ""},
                             {SpanKind::kMessage, 20, 60, 3, "assistant", "message #3 assistant", ""},
                             {SpanKind::kToolCall, 30, 40, 1, "assistant", "tool call #1 run_command", "run_command"},
                             {SpanKind::kLiteral, 32, 34, 3, "assistant", "5432", "port"},
                             {SpanKind::kToolResult, 45, 55, 1, "tool", "tool result #1 run_command", "run_command"},
                             {SpanKind::kLiteral, 50, 52, 3, "assistant", "10.0.0.1", "ipv4"},
                             {SpanKind::kMessage, 60, 70, 4, "tool", "message #4 tool", ""}};
  EXPECT_FALSE(ModelWrites(spans, 0)) << "before the first message: the template's";
  EXPECT_FALSE(ModelWrites(spans, 5)) << "system";
  EXPECT_FALSE(ModelWrites(spans, 15)) << "user";
  EXPECT_TRUE(ModelWrites(spans, 20)) << "assistant text";
  EXPECT_TRUE(ModelWrites(spans, 33)) << "a literal inside a tool call";
  EXPECT_TRUE(ModelWrites(spans, 42)) << "assistant text after the call";
  EXPECT_FALSE(ModelWrites(spans, 51)) << "a literal inside a tool result, inside the assistant's message";
  EXPECT_FALSE(ModelWrites(spans, 65)) << "a tool message";
  EXPECT_FALSE(ModelWrites(spans, 70)) << "past the last message";
  const std::vector<Span> plain = {{SpanKind::kLiteral, 3, 5, 0, "", "5432", "port"}};
  EXPECT_TRUE(ModelWrites(plain, 4)) << "plain text has no messages: written everywhere";
  EXPECT_TRUE(ModelWrites({}, 4));
}

}  // namespace
}  // namespace flipscope
