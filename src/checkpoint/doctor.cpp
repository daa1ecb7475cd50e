// `doctor`: checks of a GGUF model file as llama.cpp reads it: the vocabulary loads (pre-tokenizer
// known), the chat template is embedded and agrees with the special tokens (BOS, end of turn),
// tool-call support, sampler settings, and the context length against rope scaling.
#include "checkpoint/doctor.h"

#include <chat.h>
#include <common.h>
#include <fmt/format.h>
#include <llama.h>

#include <algorithm>
#include <memory>

#include "checkpoint/model_info.h"
#include "runtime/runtime.h"
#include "util/util.h"
#include "workload/common_log.h"

namespace flipscope {
namespace {

// A family of chat formats: every marker appears in the template's source; the tokens are
// special tokens the vocabulary must have (else they are tokenized as plain text); builtin is
// llama.cpp's built-in template of that format (llama-server --chat-template NAME).
struct Family {
  const char* name;
  const char* builtin;
  std::vector<const char*> markers, tokens;
};
#define FS_FW_BAR "\xef\xbd\x9c"  // U+FF5C, DeepSeek's full-width bar
const std::vector<Family>& Families() {
  static const std::vector<Family> f = {
      {"harmony", "gpt-oss", {"<|channel|>", "<|start|>"}, {"<|start|>", "<|channel|>", "<|end|>"}},
      {"phi4", "phi4", {"<|im_sep|>"}, {"<|im_start|>", "<|im_sep|>", "<|im_end|>"}},
      {"chatml", "chatml", {"<|im_start|>"}, {"<|im_start|>", "<|im_end|>"}},
      {"llama3", "llama3", {"<|start_header_id|>"}, {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}},
      {"gemma", "gemma", {"<start_of_turn>"}, {"<start_of_turn>", "<end_of_turn>"}},
      {"deepseek",
       "deepseek3",
       {"<" FS_FW_BAR "User" FS_FW_BAR ">"},
       {"<" FS_FW_BAR "User" FS_FW_BAR ">", "<" FS_FW_BAR "Assistant" FS_FW_BAR ">"}},
      {"command-r", "command-r", {"<|START_OF_TURN_TOKEN|>"}, {"<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>"}},
      {"granite", "granite", {"<|start_of_role|>"}, {"<|start_of_role|>", "<|end_of_role|>"}},
      {"glm", "chatglm4", {"[gMASK]"}, {}},
      {"llama2", "llama2", {"[INST]", "<<SYS>>"}, {}},
      {"mistral", "mistral-v3", {"[INST]"}, {}},
      {"phi3", "phi3", {"<|user|>", "<|end|>"}, {"<|user|>", "<|assistant|>", "<|end|>"}},
      {"zephyr", "zephyr", {"<|user|>"}, {}},
  };
  return f;
}
#undef FS_FW_BAR

const Family* FindFamily(const std::string& name) {
  for (const auto& f : Families())
    if (name == f.name) return &f;
  return nullptr;
}

struct Ctx {
  const llama_model* model;
  const llama_vocab* vocab;
  std::string path;
  DoctorReport* report;
  void Add(const char* check, Severity s, std::string message, std::string fix = "") const {
    report->findings.push_back({check, s, std::move(message), std::move(fix)});
  }
  std::string Meta(const std::string& key) const {
    char buf[512];
    int n = llama_model_meta_val_str(model, key.c_str(), buf, sizeof(buf));
    return n < 0 ? "" : std::string(buf, size_t(std::min<int>(n, int(sizeof(buf)) - 1)));
  }
  // The token a special marker parses to, or -1 when the vocabulary lacks it as one token.
  llama_token SpecialToken(const std::string& text) const {
    auto t = common_tokenize(vocab, text, false, true);
    return t.size() == 1 && TokenPiece(vocab, t[0]) == text ? t[0] : -1;
  }
  // "id 'piece'" with control characters escaped, so a finding stays on one line.
  std::string Text(llama_token t) const {
    if (t < 0) return "none";
    std::string piece;
    for (char ch : TokenPiece(vocab, t))
      piece += ch == '\n' ? "\\n" : ch == '\t' ? "\\t" : ch == '\r' ? "\\r" : std::string(1, ch);
    return fmt::format("{} '{}'", t, piece);
  }
};

void CheckPreTokenizer(const Ctx& c) {
  const std::string pre = c.Meta("tokenizer.ggml.pre");
  if (llama_vocab_type(c.vocab) != LLAMA_VOCAB_TYPE_BPE)
    return c.Add("pre_tokenizer", Severity::kOk, "not a BPE vocabulary: llama.cpp uses no pre-tokenizer for it");
  if (pre.empty())
    return c.Add(
        "pre_tokenizer", Severity::kWarn,
        "BPE vocabulary without tokenizer.ggml.pre: llama.cpp falls back to 'default' and warns "
        "\"GENERATION QUALITY WILL BE DEGRADED\"; text tokenizes differently from the original",
        "re-convert with a current convert_hf_to_gguf.py, or set it: gguf_new_metadata.py IN OUT --pre-tokenizer NAME");
  if (pre == "default")
    return c.Add("pre_tokenizer", Severity::kInfo,
                 "BPE vocabulary with the generic 'default' pre-tokenizer: check it matches the model's tokenizer.json",
                 "re-convert with a current convert_hf_to_gguf.py, which identifies the pre-tokenizer");
  c.Add("pre_tokenizer", Severity::kOk, "pre-tokenizer '" + pre + "' is known to llama.cpp");
}

// Renders messages with llama.cpp's template machinery; "" and why on failure.
std::pair<std::string, std::string> Render(const common_chat_templates* t, std::vector<common_chat_msg> msgs,
                                           bool generation_prompt) {
  common_chat_templates_inputs in;
  in.messages = std::move(msgs);
  in.add_generation_prompt = generation_prompt;
  workload::QuietCommonLog quiet;  // template warnings go to llama.cpp's common logger
  try {
    return {common_chat_templates_apply(t, in).prompt, ""};
  } catch (const std::exception& e) {
    return {"", e.what()};
  }
}

common_chat_msg Msg(const char* role, const char* content) {
  common_chat_msg m;
  m.role = role;
  m.content = content;
  return m;
}

// No embedded template: llama.cpp falls back to ChatML, which is wrong unless the model speaks it.
void CheckMissingTemplate(const Ctx& c) {
  for (const auto& f : Families()) {
    if (f.tokens.empty() || std::string(f.name) == "chatml") continue;
    bool all = std::all_of(f.tokens.begin(), f.tokens.end(), [&](const char* t) { return c.SpecialToken(t) >= 0; });
    if (all)
      return c.Add("chat_template", Severity::kError,
                   fmt::format("no chat template embedded; the vocabulary's {} tokens say the model speaks the {} "
                               "format, but llama.cpp falls back to ChatML",
                               f.tokens.front(), f.name),
                   fmt::format("embed the model's template (gguf_new_metadata.py IN OUT --chat-template-config "
                               "tokenizer_config.json), or run llama-server with --chat-template {}",
                               f.builtin));
  }
  c.Add("chat_template", Severity::kWarn, "no chat template embedded: llama.cpp falls back to ChatML",
        "embed the model's template, or pass --chat-template-file to llama-server");
}

void CheckTemplateMarkers(const Ctx& c, const std::string& src, const std::string& family) {
  if (family.empty())
    return c.Add("template_family", Severity::kInfo, "the template matches no known family by its marker strings");
  for (const char* tok : FindFamily(family)->tokens)
    if (src.find(tok) != std::string::npos && c.SpecialToken(tok) < 0)
      return c.Add(
          "template_family", Severity::kError,
          fmt::format("{} template, but the vocabulary has no special token '{}': it is tokenized as plain text",
                      family, tok),
          "use the template that belongs to this vocabulary");
  c.Add("template_family", Severity::kOk, family + " template; its special tokens are in the vocabulary");
}

void CheckTools(const Ctx& c, const common_chat_templates* t) {
  auto caps = common_chat_templates_get_caps(t);
  bool tools = caps["supports_tools"], calls = caps["supports_tool_calls"];
  if (tools && calls) return c.Add("tool_calls", Severity::kOk, "the template renders tool definitions and tool calls");
  c.Add("tool_calls", Severity::kInfo,
        fmt::format("the template renders tool definitions: {}, tool calls: {} (llama.cpp's template capabilities)",
                    tools ? "yes" : "no", calls ? "yes" : "no"),
        "tool-using workloads: flipscope writes calls into the content as <tool_call>{...}</tool_call>");
}

void CheckBos(const Ctx& c, const common_chat_templates* t, const std::string& src) {
  const llama_token bos = llama_vocab_bos(c.vocab);
  const bool add_bos = llama_vocab_get_add_bos(c.vocab);
  const std::string bos_text = bos >= 0 ? TokenPiece(c.vocab, bos) : "";
  const bool emits =
      src.find("bos_token") != std::string::npos || (!bos_text.empty() && src.find(bos_text) != std::string::npos);
  if (bos < 0 && emits)
    return c.Add("bos", Severity::kWarn, "the template emits bos_token but the vocabulary has no BOS token",
                 "set tokenizer.ggml.bos_token_id (--override-kv tokenizer.ggml.bos_token_id=int:N)");
  auto [prompt, why] = Render(t, {Msg("user", "Hello")}, true);
  if (!why.empty()) return c.Add("bos", Severity::kWarn, "could not render a one-message conversation: " + why);
  auto toks = common_tokenize(c.vocab, prompt, true, true);  // as llama-server tokenizes a rendered prompt
  if (toks.size() >= 2 && toks[0] == bos && toks[1] == bos)
    return c.Add("bos", Severity::kError,
                 "llama.cpp feeds two BOS tokens: the rendered prompt starts with BOS and add_bos adds another",
                 "--override-kv tokenizer.ggml.add_bos_token=bool:false, or remove bos_token from the template");
  if (emits && add_bos)
    return c.Add(
        "bos", Severity::kWarn,
        fmt::format("double BOS risk: the template emits {} and add_bos is true; llama.cpp strips the template's "
                    "copy, but a prompt rendered elsewhere and tokenized with special tokens starts with two",
                    c.Text(bos)),
        "tokenize externally rendered prompts without adding special tokens, or set add_bos_token false");
  bool has_bos = !toks.empty() && toks[0] == bos && bos >= 0;
  c.Add("bos", has_bos ? Severity::kOk : Severity::kInfo,
        has_bos
            ? fmt::format("prompts start with one BOS {} ({})", c.Text(bos), add_bos ? "add_bos" : "from the template")
            : fmt::format("prompts start without a BOS token (add_bos {}, the template emits none)", add_bos));
}

// EOS exists, and the token that ends an assistant turn in the template stops generation.
void CheckEndOfTurn(const Ctx& c, const common_chat_templates* t) {
  const llama_token eos = llama_vocab_eos(c.vocab), eot = llama_vocab_eot(c.vocab);
  if (eos < 0 && eot < 0)
    c.Add("eos", Severity::kError, "no EOS or EOT token: generation never stops on its own",
          "set tokenizer.ggml.eos_token_id (--override-kv tokenizer.ggml.eos_token_id=int:N)");
  else
    c.Add("eos", Severity::kOk, fmt::format("EOS {}, EOT {}", c.Text(eos), c.Text(eot)));
  if (!t) return;
  const char* mark = "FLIPSCOPE_REPLY";
  auto [text, why] = Render(t, {Msg("user", "Hello"), Msg("assistant", mark)}, false);
  size_t at = text.find(mark);
  if (!why.empty() || at == std::string::npos)
    return c.Add("end_of_turn", Severity::kInfo,
                 "could not render an assistant turn to find its end" + (why.empty() ? "" : ": " + why));
  // The first token after the reply, as the whole conversation tokenizes.
  auto head = common_tokenize(c.vocab, text.substr(0, at + std::string(mark).size()), false, true);
  auto full = common_tokenize(c.vocab, text, false, true);
  size_t k = 0;
  while (k < head.size() && k < full.size() && head[k] == full[k]) ++k;
  std::vector<llama_token> tail(full.begin() + std::ptrdiff_t(std::min(k, full.size())), full.end());
  if (tail.empty())
    return c.Add("end_of_turn", Severity::kWarn,
                 "the template ends an assistant turn with nothing: no token marks the end",
                 "use the model's own template");
  if (llama_vocab_is_eog(c.vocab, tail[0]))
    return c.Add("end_of_turn", Severity::kOk,
                 fmt::format("assistant turns end with {}, an end-of-generation token", c.Text(tail[0])));
  c.Add("end_of_turn", Severity::kWarn,
        fmt::format("assistant turns end with {}, which llama.cpp does not treat as end of generation: replies run on "
                    "past the turn",
                    c.Text(tail[0])),
        fmt::format("use the model's own template, or make that token end generation: --override-kv "
                    "tokenizer.ggml.eot_token_id=int:{}",
                    tail[0]));
}

void CheckTemplate(const Ctx& c) {
  const char* tmpl = llama_model_chat_template(c.model, nullptr);
  if (!tmpl) {
    CheckMissingTemplate(c);
    const llama_token bos = llama_vocab_bos(c.vocab);
    const bool add_bos = llama_vocab_get_add_bos(c.vocab);
    c.Add("bos", Severity::kInfo,
          add_bos && bos >= 0 ? "add_bos: llama.cpp starts every prompt with " + c.Text(bos)
                              : std::string("add_bos is false: prompts start without a BOS token"));
    CheckEndOfTurn(c, nullptr);
    return;
  }
  const std::string src = tmpl, family = ChatTemplateFamily(src);
  common_chat_templates_ptr t;
  {
    workload::QuietCommonLog quiet;
    try {
      common_chat_template parsed(src, "", "");  // init's own rethrow loses the parser's message
      t = common_chat_templates_init(c.model, "");
    } catch (const std::exception& e) {
      std::string why = e.what();
      why = why.substr(0, why.find('\n'));  // the parser adds the source line and a caret below
      return c.Add("chat_template", Severity::kError, "the embedded chat template does not parse: " + why,
                   "fix or replace the template (--chat-template-file)");
    }
  }
  c.Add("chat_template", Severity::kOk,
        fmt::format("embedded ({}, sha256 {})", family.empty() ? "unknown family" : family,
                    Sha256Hex(src).substr(0, 16)));
  CheckTemplateMarkers(c, src, family);
  CheckTools(c, t.get());
  CheckBos(c, t.get(), src);
  CheckEndOfTurn(c, t.get());
}

// A generation_config.json (null without one): its sampler settings against the GGUF's, and the
// stop / start tokens it names against the vocabulary's.
Status CheckGenerationSettings(const Ctx& c, const std::string& config_path) {
  nlohmann::json cfg;
  if (!config_path.empty()) {
    FS_ASSIGN_OR_RETURN(std::string text, ReadFile(config_path));
    cfg = nlohmann::json::parse(text, nullptr, false);
    if (cfg.is_discarded() || !cfg.is_object()) return Status::Error(config_path + ": not a JSON object");
  }
  for (auto& f : CheckSamplerSettings([&](const std::string& k) { return c.Meta(k); }, cfg))
    c.report->findings.push_back(std::move(f));
  // generation_config's eos_token_id may be one id or a list; each must stop llama.cpp too.
  std::vector<int64_t> stops;
  if (cfg.is_object() && cfg.contains("eos_token_id")) {
    const auto& e = cfg["eos_token_id"];
    if (e.is_number_integer()) stops.push_back(e.get<int64_t>());
    for (const auto& v : e.is_array() ? e : nlohmann::json::array())
      if (v.is_number_integer()) stops.push_back(v.get<int64_t>());
  }
  const int64_t n_vocab = llama_vocab_n_tokens(c.vocab);
  for (int64_t id : stops) {
    if (id >= 0 && id < n_vocab && llama_vocab_is_eog(c.vocab, llama_token(id))) continue;
    c.Add("eos", Severity::kWarn,
          fmt::format("generation_config.json stops at token {}, which the GGUF does not treat as "
                      "end of generation",
                      id < n_vocab ? c.Text(llama_token(id)) : std::to_string(id)),
          fmt::format("--override-kv tokenizer.ggml.eos_token_id=int:{} (or re-convert)", id));
  }
  if (cfg.is_object() && cfg.contains("bos_token_id") && cfg["bos_token_id"].is_number_integer() &&
      cfg["bos_token_id"].get<int64_t>() != llama_vocab_bos(c.vocab))
    c.Add("bos", Severity::kWarn,
          fmt::format("generation_config.json's BOS is {}, the GGUF's {}", cfg["bos_token_id"].get<int64_t>(),
                      c.Text(llama_vocab_bos(c.vocab))),
          "--override-kv tokenizer.ggml.bos_token_id=int:N with the right id");
  return Status::Ok();
}

}  // namespace

std::string ChatTemplateFamily(const std::string& source) {
  for (const auto& f : Families())
    if (std::all_of(f.markers.begin(), f.markers.end(),
                    [&](const char* m) { return source.find(m) != std::string::npos; }))
      return f.name;
  return "";
}

Result<DoctorReport> RunDoctor(const std::string& path, const DoctorOptions& opts) {
  EnsureLlamaInit();
  FS_RETURN_IF_ERROR(CheckGguf(path));
  DoctorReport r;
  r.path = path;
  TakeLlamaLogTail();
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  std::unique_ptr<llama_model, void (*)(llama_model*)> model(llama_model_load_from_file(path.c_str(), mp),
                                                             llama_model_free);
  std::string log = TakeLlamaLogTail();
  if (!model) {
    bool pre = log.find("pre-tokenizer") != std::string::npos;
    r.findings.push_back(
        {pre ? "pre_tokenizer" : "load", Severity::kError,
         "llama.cpp refuses to load this model: " + (log.empty() ? std::string("no reason logged") : log),
         pre ? "re-convert with a convert_hf_to_gguf.py that knows this tokenizer, or set "
               "tokenizer.ggml.pre to the matching known name"
             : "re-convert the model with a current llama.cpp"});
    return r;
  }
  Ctx c{model.get(), llama_model_get_vocab(model.get()), path, &r};
  if (!log.empty()) c.Add("load", Severity::kInfo, "llama.cpp warned while loading: " + log);
  CheckPreTokenizer(c);
  CheckTemplate(c);
  FS_RETURN_IF_ERROR(CheckGenerationSettings(c, opts.generation_config));
  r.findings.push_back(CheckRopeScaling([&](const std::string& k) { return c.Meta(k); }));
  return r;
}

}  // namespace flipscope
