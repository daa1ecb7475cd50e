// Chat templates through llama.cpp's common library: loading (embedded, Jinja file, built-in
// name), capabilities, probing, rendering.
#include <chat.h>
#include <fmt/format.h>
#include <llama.h>
#include <log.h>

#include <chrono>
#include <filesystem>
#include <sstream>

#include "runtime/runtime.h"
#include "util/util.h"
#include "workload/common_log.h"
#include "workload/internal.h"
#include "workload/workload.h"

namespace flipscope {

std::vector<std::string> BuiltinChatTemplates() {
  int32_t n = llama_chat_builtin_templates(nullptr, 0);
  std::vector<const char*> names(size_t(std::max(n, 0)));
  llama_chat_builtin_templates(names.data(), names.size());
  return {names.begin(), names.end()};
}

namespace workload {
namespace {

// Templates that print the date (Llama 3.x) would make the rendering depend on the day it runs;
// a fixed date keeps a workload's tokens identical across captures.
constexpr int64_t kTemplateDate = 1735689600;  // 2025-01-01T00:00:00Z

bool IsBuiltinName(const std::string& name) {
  for (const auto& n : BuiltinChatTemplates())
    if (n == name) return true;
  return false;
}

}  // namespace

// Where a template's source came from; the name is the manifest's spelling (template.source).
enum class TemplateSource { kEmbedded, kFile, kBuiltin };

}  // namespace workload

template <>
struct Names<workload::TemplateSource> {
  static constexpr std::pair<workload::TemplateSource, const char*> v[] = {
      {workload::TemplateSource::kEmbedded, "embedded"},
      {workload::TemplateSource::kFile, "file"},
      {workload::TemplateSource::kBuiltin, "builtin"}};
};

namespace workload {

struct ChatTemplate::Impl {
  common_chat_templates_ptr tmpls;
  bool jinja = true;
  std::string name, display, source;
  TemplateSource source_kind = TemplateSource::kEmbedded;
  std::map<std::string, bool> caps;
};

ChatTemplate::ChatTemplate(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ChatTemplate::~ChatTemplate() = default;
const std::string& ChatTemplate::display_name() const { return impl_->display; }

Result<std::unique_ptr<ChatTemplate::Impl>> ChatTemplate::Locate(const llama_model* model,
                                                                 const std::string& model_path,
                                                                 const std::string& option) {
  auto impl = std::make_unique<Impl>();
  std::error_code ec;
  if (option.empty()) {
    // common_chat_templates_init falls back to ChatML on its own when the model has no
    // template; that would silently feed the model a format it was not trained on.
    const char* src = llama_model_chat_template(model, nullptr);
    if (!src)
      return Status::Error(model_path +
                           ": the model has no embedded chat template; pass --chat-template FILE (Jinja) or NAME "
                           "(a llama.cpp built-in such as chatml, gemma, llama3)");
    impl->source = src;
    impl->source_kind = TemplateSource::kEmbedded;
    impl->name = "tokenizer.chat_template";
    impl->display = "tokenizer.chat_template of " + std::filesystem::path(model_path).filename().string();
  } else if (std::filesystem::is_regular_file(option, ec)) {
    FS_ASSIGN_OR_RETURN(impl->source, ReadFile(option));
    if (impl->source.find_first_not_of(" \t\r\n") == std::string::npos)
      return Status::Error(option + ": the chat template file is empty");
    impl->source_kind = TemplateSource::kFile;
    impl->name = impl->display = option;
  } else if (IsBuiltinName(option)) {
    // A name given to common_chat_templates_init would be taken as Jinja source (rendering the
    // name itself), except "chatml"; built-ins go through llama_chat_apply_template instead.
    impl->source = option;
    impl->source_kind = TemplateSource::kBuiltin;
    impl->jinja = false;
    impl->name = option;
    impl->display = option + " (llama.cpp built-in)";
  } else {
    std::string names;
    for (const auto& n : BuiltinChatTemplates()) names += (names.empty() ? "" : ", ") + n;
    return Status::Error(OptionName("chat_template") + " " + option + ": neither a file nor a llama.cpp built-in template name (" +
                         names + ")");
  }
  return impl;
}

void ChatTemplate::FindCapabilities() {
  Impl& im = *impl_;
  if (!im.jinja) {
    // A built-in is a role/content formatter for a model's native format; none knows a tool
    // role, and most of the formats it reproduces (Gemma, Llama 2, Mistral) alternate turns.
    im.caps = {{"supports_tools", false}, {"supports_tool_calls", false}, {"supports_system_role", true}};
    alternation = true;
    return;
  }
  im.caps = common_chat_templates_get_caps(im.tmpls.get());
  supports_tools = im.caps["supports_tools"];
  supports_tool_calls = im.caps["supports_tool_calls"];
  // Probes: does a tool message render (and show its content)? Are two user messages in a
  // row refused (Gemma's "roles must alternate")?
  const std::string marker = "flipscope-probe-result";
  ToolCall call;
  call.id = "probe0001";  // 9 alphanumerics: what Mistral's templates demand of an id
  call.name = "probe";
  call.arguments = OrderedJson::object();
  call.arguments_text = "{}";
  RenderMessage user{"user", "probe", {}, "", ""};
  RenderMessage asst{"assistant", "probe", {}, "", ""};
  if (supports_tool_calls) asst.calls.push_back(&call);
  RenderMessage tool{"tool", marker, {}, call.id, call.name};
  auto r = Render({user, asst, tool}, OrderedJson::array());
  tool_role = r.ok() && r->find(marker) != std::string::npos;
  alternation = !Render({user, user}, OrderedJson::array()).ok();
}

Result<std::unique_ptr<ChatTemplate>> ChatTemplate::Load(const llama_model* model, const std::string& model_path,
                                                         const std::string& option) {
  FS_ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl, Locate(model, model_path, option));
  QuietCommonLog quiet;
  try {
    impl->tmpls = common_chat_templates_init(model, impl->source_kind == TemplateSource::kEmbedded ? "" : impl->source);
  } catch (const std::exception& e) {
    return Status::Error(impl->display + ": not a valid Jinja chat template: " + e.what());
  }
  std::unique_ptr<ChatTemplate> t(new ChatTemplate(std::move(impl)));
  t->FindCapabilities();
  return t;
}

Result<std::string> ChatTemplate::Render(const std::vector<RenderMessage>& messages, const OrderedJson& tools,
                                         bool fast) const {
  common_chat_templates_inputs in;
  in.use_jinja = impl_->jinja;
  in.force_pure_content = fast;
  in.add_generation_prompt = false;
  in.now = std::chrono::system_clock::time_point(std::chrono::seconds(kTemplateDate));
  for (const auto& m : messages) {
    common_chat_msg msg;
    msg.role = m.role;
    msg.content = m.content;
    msg.tool_call_id = m.tool_call_id;
    msg.tool_name = m.tool_name;
    for (const ToolCall* c : m.calls) msg.tool_calls.push_back({c->name, c->arguments_text, c->id});
    in.messages.push_back(std::move(msg));
  }
  if (supports_tools && impl_->jinja) {
    for (const auto& tool : tools) {
      const auto& f = tool["function"];
      in.tools.push_back({f["name"].get<std::string>(), f.value("description", ""),
                          f.contains("parameters") ? f["parameters"].dump() : "{}"});
    }
  }
  QuietCommonLog quiet;
  try {
    return common_chat_templates_apply(impl_->tmpls.get(), in).prompt;
  } catch (const std::exception& e) {
    // The engine's messages span lines (source excerpts); errors are one line.
    std::string what, word;
    for (std::istringstream in(e.what()); in >> word;) what += (what.empty() ? "" : " ") + word;
    return Status::Error(what);
  }
}

Result<ToolGrammar> ChatTemplate::Grammar(const nlohmann::ordered_json& tools, const llama_vocab* vocab) const {
  // llama-server refuses tools without --jinja: a built-in formatter has no tool handling.
  if (!impl_->jinja) return Status::Error(impl_->display + " has no tool-call handling in llama.cpp (not Jinja)");
  return GrammarOf(impl_->tmpls.get(), tools, vocab);
}

nlohmann::json ChatTemplate::Info() const {
  nlohmann::json j = {{"name", impl_->name},
                      {"source", std::string(NameOf(impl_->source_kind))},
                      {"sha256", impl_->jinja ? Sha256Hex(impl_->source) : ""},
                      {"caps", impl_->caps},
                      {"tool_role", tool_role},
                      {"requires_alternation", alternation},
                      {"date", "2025-01-01"}};
  // A built-in's format is code inside llama.cpp: its version identifies it.
  if (!impl_->jinja) j["llama_cpp"] = LlamaVersion();
  return j;
}

}  // namespace workload
}  // namespace flipscope
