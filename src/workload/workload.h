// workload: reads a transcript (OpenAI-style chat JSON or JSONL with tools and tool calls, plain
// text, or token ids), renders chats with the model's own chat template through llama.cpp's Jinja
// engine, tokenizes with the model's vocabulary, and marks spans (messages, tool calls, tool
// results, literals such as IPs, MACs, interface names and ports) as token ranges.
// The rendered text and its token ids are what every configuration is fed. docs/workloads.md
// describes the input formats, the tool-call fallbacks and how spans are found.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "util/names.h"
#include "util/status.h"

namespace flipscope {

// What a span marks; its name is the manifest's spelling ("kind" of a span).
enum class SpanKind { kMessage, kToolCall, kToolResult, kLiteral };
template <>
struct Names<SpanKind> {
  static constexpr std::pair<SpanKind, const char*> v[] = {{SpanKind::kMessage, "message"},
                                                           {SpanKind::kToolCall, "tool_call"},
                                                           {SpanKind::kToolResult, "tool_result"},
                                                           {SpanKind::kLiteral, "literal"}};
};

// A marked range of the token sequence.
struct Span {
  SpanKind kind = SpanKind::kMessage;
  int32_t begin = 0;  // token range [begin, end)
  int32_t end = 0;
  int index = 0;        // 1-based: message # (message, literal), tool call # (tool_call, tool_result)
  std::string role;     // role of the (first) message the span lies in, as written in the transcript
  std::string label;    // e.g. "message #4 assistant", "tool call #3 run_command", or a literal's text
  // literal: ipv4|ipv6|mac|interface|hostname|path|identifier|port|number (one per text, wherever
  // it appears); tool_call/_result: function
  std::string subkind;
  // An assistant message only: the tokens the model generated, [gen_begin, gen_end): its content
  // and tool calls and the end-of-turn token after them, without the role header the template
  // wrote before them (the generation prompt) and the template's text after the end of turn.
  // -1 when unknown (other messages, a capture written before the split): the whole span counts.
  int32_t gen_begin = -1, gen_end = -1;
};

// A workload file's format; kAuto goes by the file extension (and a .json file's content).
enum class WorkloadFormat { kAuto, kChat, kJsonl, kText, kTokens };
template <>
struct Names<WorkloadFormat> {
  static constexpr std::pair<WorkloadFormat, const char*> v[] = {{WorkloadFormat::kAuto, "auto"},
                                                                 {WorkloadFormat::kChat, "chat"},
                                                                 {WorkloadFormat::kJsonl, "jsonl"},
                                                                 {WorkloadFormat::kText, "text"},
                                                                 {WorkloadFormat::kTokens, "tokens"}};
};
// The format named `name`; else an error "<field> <name>: expected auto, chat, jsonl, text or tokens".
Result<WorkloadFormat> ParseWorkloadFormat(std::string_view name, std::string_view field);

// A loaded workload: the exact tokens fed to every configuration, and what they mean.
struct Workload {
  std::vector<int32_t> tokens;
  std::string text;         // the rendered text (for token ids: their pieces concatenated)
  std::vector<Span> spans;  // sorted by begin, then longer first
  nlohmann::json tools;     // the transcript's tool definitions (an array; empty without)
  WorkloadFormat format = WorkloadFormat::kAuto;  // the format it was read as (never kAuto once loaded)
  // How its template renders tool calls: "template" (the template's own form) or "<tool_call> in
  // content"; empty for a workload without messages.
  std::string tool_call_form;
  // What was accepted but is likely a mistake, one line each naming the file, the message and the
  // tool call ("w.json: message #3: tool call #1 (run): arguments are not JSON (...); kept as
  // written"); the caller shows them, and info records them under "warnings".
  std::vector<std::string> warnings;
  // The manifest part, its record written as is (stages read the members above): path, sha256 of
  // the file, format, n_tokens, n_chars, n_bytes, add_bos, template {name, sha256, source:
  // embedded|file|builtin}, tool_call_form, tool_result_form, tools_in_system, merged_messages,
  // span_mapping, and warnings (only when there are some).
  nlohmann::json info;
};

struct WorkloadOptions {
  WorkloadFormat format = WorkloadFormat::kAuto;
  std::string chat_template;    // --chat-template FILE|NAME; empty = the model's embedded template
};

// Loads, renders and tokenizes a workload with the model's vocabulary (the model is loaded
// vocab-only). Errors name the workload file (and line or message number) or the model.
Result<Workload> LoadWorkload(const std::string& workload_path, const std::string& model_path,
                              const WorkloadOptions& options);

// The tool-call grammar a llama.cpp server would constrain generation with, for the DecodeGrammar
// of grammar-constrained futures (docs/branch.md, "Decoding the futures").
struct ToolGrammar {
  std::string gbnf;  // start rule "root"
  bool lazy = true;  // constrains from a trigger on
  std::vector<std::string> trigger_patterns;  // regexes over the written text (words escaped)
  std::vector<int32_t> trigger_tokens;
  std::vector<std::string> triggers;  // the triggers as llama.cpp states them (for records)
  // "template": the workload's own chat template renders tool calls; "tool_call form": the
  // <tool_call> convention the workload wrote its calls in, by a template of that form.
  std::string source;
};
// The grammar for tools (the workload's tool definitions, in the transcript's key order: llama.cpp
// lays out an object's properties in its schema's order) under the workload's chat template
// option (template_renders_calls: it renders calls itself; else the <tool_call> form's template).
// An error when llama.cpp derives none (the template has no tool format) or cannot.
Result<ToolGrammar> LoadToolGrammar(const std::string& model_path, const std::string& chat_template,
                                    const nlohmann::ordered_json& tools, bool template_renders_calls);

// Spans as a JSON array of {"kind","begin","end","index","role","label","subkind"}.
nlohmann::json SpansToJson(const std::vector<Span>& spans);
// Reads spans written by SpansToJson; error on a malformed entry (a kind Names<SpanKind> does not list too).
Result<std::vector<Span>> SpansFromJson(const nlohmann::json& j);

// The innermost (shortest) span containing token position pos, or nullptr; on equal lengths
// literals win over tool calls/results, which win over messages.
const Span* InnermostSpan(const std::vector<Span>& spans, int32_t pos);
// The label of InnermostSpan (a literal's is "literal <type> <text>"), or "" when none.
std::string SpanLabelAt(const std::vector<Span>& spans, int32_t pos);
// Whether a deployed model writes token pos: it lies in a tool call, or in what an assistant
// message generated (Span::gen_begin/gen_end: its content, calls and end-of-turn token, not its
// role header; system and user text and tool results are read, not written). A
// workload without message spans (plain text, token ids) counts as written everywhere.
bool ModelWrites(const std::vector<Span>& spans, int32_t pos);

// The positions a position spec selects, sorted and unique: comma-separated inclusive ranges
// "A-B" and/or "tool_calls" (every position whose logits predict a token of a tool call),
// clipped to [0, last]. last is the workload's last scored position (n_tokens - 2: the final
// position predicts no token of the workload). Errors start with field ("full", "ranges") and
// name the item: malformed, or a range that starts past last.
Result<std::vector<int32_t>> SelectPositions(std::string_view spec, int32_t last, const std::vector<Span>& spans,
                                             std::string_view field);

// A literal found in text: byte range [begin, end) and its type (see Span::subkind).
struct Literal {
  std::string type;
  std::string text;
  size_t begin = 0;
  size_t end = 0;
};
// Finds IPv4/IPv6 addresses (with /prefix), MACs, interface names, hostnames, paths, identifiers
// (lab-sw01), ports (after ':', "port", "eq", "-p", or before "/tcp"), VLAN ids and numbers of 4+
// digits, non-overlapping, in text order; a text has one type wherever it appears, and every
// standalone occurrence of a literal's text is marked.
std::vector<Literal> FindLiterals(std::string_view text);

// Names of llama.cpp's built-in (non-Jinja) chat templates accepted by --chat-template NAME.
std::vector<std::string> BuiltinChatTemplates();

}  // namespace flipscope
