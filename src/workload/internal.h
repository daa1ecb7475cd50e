// workload internals shared by the stage's .cpp files; not part of the stage's interface
// (workload.h is).
#pragma once

#include <cctype>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"
#include "workload/workload.h"

struct llama_model;
struct llama_vocab;
struct common_chat_templates;

namespace flipscope::workload {

using OrderedJson = nlohmann::ordered_json;  // keeps the transcript's key order when re-serialized

struct ToolCall {
  int index = 0;  // 1-based over the whole transcript
  std::string id, name;
  OrderedJson arguments;       // parsed arguments (an object), or a string when not JSON
  std::string arguments_text;  // arguments as written (a JSON string's value, or the object dumped)
};

struct Message {
  int index = 0;  // 1-based message number in the transcript
  std::string role, content;
  std::vector<ToolCall> calls;  // assistant only
  std::string tool_call_id;     // tool only
  int answers_call = 0;         // tool only: the index of the call it answers
  std::string tool_name;        // tool only: that call's function name
};

struct Transcript {
  std::vector<Message> messages;
  OrderedJson tools = OrderedJson::array();
  int n_calls = 0;
  // What was accepted but is likely a mistake, one line each naming the file, the message and the
  // call (a call whose arguments are not JSON): Workload::warnings.
  std::vector<std::string> warnings;
};

// Parses a chat JSON object {"tools": [...], "messages": [...]} (or a bare messages array).
Result<Transcript> ParseChatJson(const std::string& text, const std::string& path);
// Parses chat JSONL: one message per line; a line {"tools": [...]} is allowed; blank lines skipped.
Result<Transcript> ParseChatJsonl(const std::string& text, const std::string& path);

// JSON as Python's json.dumps writes it ("key": value, items separated by ", "), key order kept:
// the form of the <tool_call> convention.
std::string DumpSpaced(const OrderedJson& j);

// A message as handed to the chat template (after the tool-call fallbacks and merging).
struct RenderMessage {
  std::string role, content;
  std::vector<const ToolCall*> calls;  // rendered by the template itself
  std::string tool_call_id, tool_name;
};

// The tool-call grammar of common_chat_templates_apply(tmpls, one user message, tools, tool_choice
// auto), its triggers read as llama-server reads them (grammar.cpp); source left empty.
Result<ToolGrammar> GrammarOf(const common_chat_templates* tmpls, const nlohmann::ordered_json& tools,
                              const llama_vocab* vocab);

// A chat template (the model's embedded one, a Jinja file, or a llama.cpp built-in by name) with
// what it can render, found from llama.cpp's capabilities and by probing.
class ChatTemplate {
 public:
  // Loads the template named by option (see WorkloadOptions::chat_template); errors name the
  // model (no embedded template) or the option.
  static Result<std::unique_ptr<ChatTemplate>> Load(const llama_model* model, const std::string& model_path,
                                                    const std::string& option);
  ~ChatTemplate();
  // Renders messages without a generation prompt; tools are passed when supports_tools. The
  // error is the template engine's message. fast skips llama.cpp's output-parser generation
  // (force_pure_content): the same template, but only for locating spans, never for the text.
  Result<std::string> Render(const std::vector<RenderMessage>& messages, const OrderedJson& tools,
                             bool fast = false) const;
  // The tool-call grammar llama.cpp's chat handling derives from this template for tools
  // (GrammarOf); an error for a built-in (non-Jinja) template.
  Result<ToolGrammar> Grammar(const nlohmann::ordered_json& tools, const llama_vocab* vocab) const;
  // "tokenizer.chat_template of MODEL", "FILE" or "NAME (llama.cpp built-in)".
  const std::string& display_name() const;
  // {name, sha256, source, caps}.
  nlohmann::json Info() const;

  bool supports_tools = false;       // renders tool definitions
  bool supports_tool_calls = false;  // renders assistant tool_calls
  bool tool_role = false;            // accepts role "tool" and shows its content
  bool alternation = false;          // refuses two consecutive messages of one role

 private:
  struct Impl;
  explicit ChatTemplate(std::unique_ptr<Impl> impl);
  // The template's source named by option (Load), not yet parsed; errors as Load's.
  static Result<std::unique_ptr<Impl>> Locate(const llama_model* model, const std::string& model_path,
                                              const std::string& option);
  // Sets what the parsed template can render: llama.cpp's capabilities, then probes.
  void FindCapabilities();
  std::unique_ptr<Impl> impl_;
};

// A string inserted into a message's content (a tool call or result in its fallback form) whose
// position is looked up after rendering; empty text: a call the template renders itself.
struct Marked {
  SpanKind kind = SpanKind::kToolCall;  // kToolCall or kToolResult
  std::string text;
  int index = 0;  // the tool call #
  std::string name;
};

// A message as it will be rendered, with the transcript messages it came from.
struct Planned {
  RenderMessage msg;
  std::vector<int> origins;  // transcript message numbers (0: the system message added for tools)
  std::vector<Marked> marks;
  std::string label;
};

// Applies the fallbacks for what the template cannot render (docs/workloads.md): tool calls into
// the content as <tool_call>{...}</tool_call>, tool results as user messages, tools listed in
// the system message, consecutive same-role messages merged where the template alternates.
// Records the forms used in info.
std::vector<Planned> Plan(const Transcript& t, const ChatTemplate& tmpl, nlohmann::json* info);

// A span over bytes of the rendered text, before mapping to tokens.
struct CharSpan {
  SpanKind kind = SpanKind::kMessage;
  size_t begin = 0, end = 0;
  int index = 0;
  std::string role, label, subkind;
  size_t gen_begin = 0, gen_end = 0;  // an assistant message: the characters the model generated (empty: unknown)
};

struct Rendered {
  std::string text;
  std::vector<CharSpan> spans;  // messages, tool calls, tool results
  nlohmann::json info;          // template, forms used, span method
};

// Renders a transcript with the chat template chosen by chat_template (see WorkloadOptions).
Result<Rendered> RenderChat(const Transcript& t, const llama_model* model, const std::string& model_path,
                            const std::string& chat_template, const std::string& workload_path);

// ---- Literals: rules shared by the scanner (literals.cpp) and its one-type pass (literal_types.cpp) ----

inline bool Alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
inline bool Digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
// Whether a literal of text t ending at i is not part of a longer token.
bool LiteralEnds(std::string_view t, size_t i, bool allow_port = false);
// Gives each literal text of found (over t) one type everywhere, marks its standalone occurrences
// the scanner missed, and keeps found sorted by begin.
void UnifyLiterals(std::string_view t, std::vector<Literal>* found);

// ---- Where one rendering inserts text into another (insertion.cpp) ----

// The points [earliest, latest] where inserting one string into before gives after, or {npos, npos}.
std::pair<size_t, size_t> InsertionRange(const std::string& before, const std::string& after);
// The most bracket-like of those points (the latest on ties); npos when after is no insertion.
size_t InsertionPoint(const std::string& before, const std::string& after);
// The inserted text's start in after and in full (at or after from), or npos; !whole: the longest
// prefix of the text is looked for in full (a last message renders differently).
std::pair<size_t, size_t> LocateInsertion(const std::string& before, const std::string& after, const std::string& full,
                                          size_t from, bool whole);

// Token ids of text and where each token starts in it.
struct Tokenized {
  std::vector<int32_t> tokens;
  std::vector<size_t> offsets;  // n_tokens + 1 entries: token t covers [offsets[t], offsets[t+1])
  bool exact = true;            // pieces matched the text; otherwise offsets are proportional
};
// Tokenizes text (special tokens parsed; BOS/EOS added per the vocabulary's flags).
Result<Tokenized> Tokenize(const llama_vocab* vocab, const std::string& text, const std::string& path);
// Offsets of given token ids over their concatenated pieces (special tokens rendered).
Tokenized PiecesOf(const llama_vocab* vocab, std::vector<int32_t> tokens, std::string* text);
// Parses token ids (whitespace/comma separated integers or a JSON array), checked against n_vocab.
Result<std::vector<int32_t>> ParseTokenIds(const std::string& text, const std::string& path, int32_t n_vocab);
// The token range [first, last) covering bytes [begin, end).
std::pair<int32_t, int32_t> TokenRange(const std::vector<size_t>& offsets, size_t begin, size_t end);

}  // namespace flipscope::workload
