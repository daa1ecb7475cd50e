// The tool-call grammar a llama.cpp server would constrain a workload's model with: llama.cpp's
// chat handling (common_chat_templates_apply with the tools, tool_choice auto) on the template,
// and the server's conversion of its triggers (server-schema.cpp, common_sampler_init).
#include <chat.h>
#include <common.h>
#include <llama.h>
#include <log.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <sstream>

#include "runtime/runtime.h"
#include "workload/common_log.h"
#include "workload/internal.h"
#include "workload/workload.h"

namespace flipscope {
namespace {

// A ChatML template that writes tool calls the way a workload does when its own template cannot
// (docs/workloads.md: <tool_call>{"name": ..., "arguments": {...}}</tool_call> in the content), laid
// out like Qwen 2.5's, the best-known template of that convention; the grammar llama.cpp derives
// from it is the one a server running a template of this form would constrain the calls with.
constexpr const char* kToolCallFormTemplate = R"JINJA({%- if tools %}
{{- '<|im_start|>system\n' }}
{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] + '\n\n' }}{%- endif %}
{{- "# Tools\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
{%- for tool in tools %}{{- "\n" }}{{- tool | tojson }}{%- endfor %}
{{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>{\"name\": <function-name>, \"arguments\": <args-json-object>}</tool_call><|im_end|>\n" }}
{%- elif messages[0]['role'] == 'system' %}
{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == "user" or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
{%- elif message.role == "assistant" %}
{{- '<|im_start|>assistant\n' }}
{%- if message.content %}{{- message.content }}{%- endif %}
{%- for tool_call in message.tool_calls %}
{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}
{{- '<tool_call>{"name": "' + tool_call.name + '", "arguments": ' }}{{- tool_call.arguments | tojson }}{{- '}</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\n' }}
{%- elif message.role == "tool" %}
{{- '<|im_start|>user\n<tool_response>\n' + message.content + '\n</tool_response><|im_end|>\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %})JINJA";

struct ModelFree {
  void operator()(llama_model* m) const { llama_model_free(m); }
};

}  // namespace

namespace workload {

Result<ToolGrammar> GrammarOf(const common_chat_templates* tmpls, const nlohmann::ordered_json& tools,
                              const llama_vocab* vocab) {
  common_chat_templates_inputs in;
  in.use_jinja = true;
  in.add_generation_prompt = true;
  in.now = std::chrono::system_clock::time_point(std::chrono::seconds(1735689600));
  in.messages.push_back({});
  in.messages.back().role = "user";
  in.messages.back().content = "probe";
  for (const auto& tool : tools) {
    const auto& f = tool.contains("function") ? tool["function"] : tool;
    in.tools.push_back({f.value("name", ""), f.value("description", ""),
                        f.contains("parameters") ? f["parameters"].dump() : "{}"});
  }
  common_chat_params params;
  try {
    QuietCommonLog quiet;
    params = common_chat_templates_apply(tmpls, in);
  } catch (const std::exception& e) {
    std::string what, word;
    for (std::istringstream s(e.what()); s >> word;) what += (what.empty() ? "" : " ") + word;
    return Status::Error("llama.cpp derives no tool-call grammar: " + what);
  }
  ToolGrammar g;
  g.gbnf = params.grammar;
  g.lazy = params.grammar_lazy;
  // The server's reading of the triggers: a word that is one preserved token triggers on the
  // token, any other word on its text (regex-escaped); patterns as they are, full ones anchored.
  std::vector<int32_t> preserved;
  for (const std::string& t : params.preserved_tokens) {
    auto ids = common_tokenize(vocab, t, false, true);
    if (ids.size() == 1) preserved.push_back(ids[0]);
  }
  for (const common_grammar_trigger& t : params.grammar_triggers) {
    g.triggers.push_back(t.value);
    if (t.type == COMMON_GRAMMAR_TRIGGER_TYPE_WORD) {
      auto ids = common_tokenize(vocab, t.value, false, true);
      if (ids.size() == 1 && std::find(preserved.begin(), preserved.end(), ids[0]) != preserved.end())
        g.trigger_tokens.push_back(ids[0]);
      else
        g.trigger_patterns.push_back(regex_escape(t.value));
    } else if (t.type == COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN) {
      g.trigger_patterns.push_back(t.value);
    } else if (t.type == COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL) {
      std::string p = t.value;
      g.trigger_patterns.push_back(p.empty() ? "^$" : (p.front() != '^' ? "^" : "") + p + (p.back() != '$' ? "$" : ""));
    } else if (t.type == COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN) {
      g.trigger_tokens.push_back(t.token);
    }
  }
  return g;
}

}  // namespace workload

Result<ToolGrammar> LoadToolGrammar(const std::string& model_path, const std::string& chat_template,
                                    const nlohmann::ordered_json& tools, bool template_renders_calls) {
  EnsureLlamaInit();
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  std::unique_ptr<llama_model, ModelFree> model(llama_model_load_from_file(model_path.c_str(), mp));
  if (!model) return Status::Error(model_path + ": llama.cpp could not read the model's vocabulary");
  const llama_vocab* vocab = llama_model_get_vocab(model.get());
  Result<ToolGrammar> g = Status::Error("");
  if (template_renders_calls) {
    FS_ASSIGN_OR_RETURN(auto tmpl, workload::ChatTemplate::Load(model.get(), model_path, chat_template));
    g = tmpl->Grammar(tools, vocab);
    if (g.ok()) g->source = "template";
  } else {
    common_chat_templates_ptr form;
    try {
      workload::QuietCommonLog quiet;
      form = common_chat_templates_init(model.get(), kToolCallFormTemplate);
    } catch (const std::exception& e) {
      return Status::Error(std::string("the <tool_call> form's template: ") + e.what());
    }
    g = workload::GrammarOf(form.get(), tools, vocab);
    if (g.ok()) g->source = "tool_call form";
  }
  if (g.ok() && g->gbnf.empty())
    return Status::Error("llama.cpp's chat handling builds no tool-call grammar for this template and these tools");
  return g;
}

}  // namespace flipscope
