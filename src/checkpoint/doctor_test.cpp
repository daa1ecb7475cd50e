// `doctor` on the real models and on metadata variants of them with known faults (written
// through ggml's GGUF writer: the vocabulary and template are all doctor reads).
#include <gguf.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <memory>

#include "checkpoint/checkpoint.h"
#include "testing/tiny_model.h"

using namespace flipscope;

namespace {

// src's metadata, without tensors, edited, written to a temp file.
std::string Variant(const std::string& src, const std::string& name, const std::function<void(gguf_context*)>& edit) {
  gguf_init_params ip = {true, nullptr};
  std::unique_ptr<gguf_context, void (*)(gguf_context*)> in(gguf_init_from_file(src.c_str(), ip), gguf_free);
  std::unique_ptr<gguf_context, void (*)(gguf_context*)> out(gguf_init_empty(), gguf_free);
  EXPECT_TRUE(in) << src;
  gguf_set_kv(out.get(), in.get());
  edit(out.get());
  std::string p = fixtures::TempPath(name);
  EXPECT_TRUE(gguf_write_to_file(out.get(), p.c_str(), /*only_meta=*/true));
  return p;
}

std::string TinyWithTemplate(const std::string& name, const std::string& tmpl, bool add_bos = true) {
  std::string base = fixtures::TempPath("d-tiny.gguf");
  EXPECT_TRUE(fixtures::WriteTinyModel(base).ok());
  return Variant(base, name, [&](gguf_context* g) {
    gguf_set_val_str(g, "tokenizer.chat_template", tmpl.c_str());
    gguf_set_val_bool(g, "tokenizer.ggml.add_bos_token", add_bos);
  });
}

DoctorReport Doctor(const std::string& path, const std::string& generation_config = "") {
  auto r = RunDoctor(path, {generation_config});
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : DoctorReport{};
}

// The finding of a check, or a placeholder that fails the caller's expectations.
Finding Get(const DoctorReport& r, const std::string& check) {
  const Finding* f = r.Find(check);
  EXPECT_TRUE(f) << "no finding '" << check << "' in\n" << r.ToText();
  return f ? *f : Finding{check, Severity::kOk, "(missing)", ""};
}

std::string WriteText(const std::string& name, const std::string& text) {
  std::string p = fixtures::TempPath(name);
  std::ofstream(p) << text;
  return p;
}

constexpr const char* kChatML =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

}  // namespace

TEST(Doctor, TemplateFamilies) {
  EXPECT_EQ(ChatTemplateFamily(kChatML), "chatml");
  EXPECT_EQ(ChatTemplateFamily("{{ '<|start_header_id|>' + role + '<|end_header_id|>' }}"), "llama3");
  EXPECT_EQ(ChatTemplateFamily("{{ '<start_of_turn>user\n' }}"), "gemma");
  EXPECT_EQ(ChatTemplateFamily("{{ '[INST] ' + content + ' [/INST]' }}"), "mistral");
  EXPECT_EQ(ChatTemplateFamily("{{ '[INST] <<SYS>>' }}"), "llama2");
  EXPECT_EQ(ChatTemplateFamily("{{ '<|user|>\n' + content + '<|end|>' }}"), "phi3");
  EXPECT_EQ(ChatTemplateFamily("{{ '<|im_start|>user<|im_sep|>' }}"), "phi4");
  EXPECT_EQ(ChatTemplateFamily("{{ '<\xef\xbd\x9cUser\xef\xbd\x9c>' }}"), "deepseek");
  EXPECT_EQ(ChatTemplateFamily("{{ role }}: {{ content }}"), "");
}

TEST(Doctor, SmolLM2IsHealthy) {
  std::string smol = fixtures::SmolLM2Path();
  ASSERT_FALSE(smol.empty()) << "SmolLM2 is not in the cache (make test fetches it)";
  auto r = Doctor(smol);
  EXPECT_EQ(r.ExitCode(), 0) << r.ToText();
  EXPECT_EQ(Get(r, "chat_template").severity, Severity::kOk);
  EXPECT_NE(Get(r, "chat_template").message.find("chatml"), std::string::npos);
  EXPECT_EQ(Get(r, "pre_tokenizer").severity, Severity::kOk);
  EXPECT_NE(Get(r, "pre_tokenizer").message.find("'smollm'"), std::string::npos);
  EXPECT_EQ(Get(r, "end_of_turn").severity, Severity::kOk);
  EXPECT_NE(Get(r, "end_of_turn").message.find("<|im_end|>"), std::string::npos);
  EXPECT_EQ(Get(r, "tool_calls").severity, Severity::kInfo);  // SmolLM2's template renders no tools
  EXPECT_EQ(Get(r, "sampling").severity, Severity::kInfo);
  EXPECT_EQ(r.ToJson()["exit_code"], 0);
}

TEST(Doctor, Gemma3WithoutTemplateIsAnError) {
  std::string gemma = fixtures::Gemma3Path();
  ASSERT_FALSE(gemma.empty()) << "Gemma 3 is not in the cache (make test fetches it)";
  auto r = Doctor(gemma);
  Finding f = Get(r, "chat_template");
  EXPECT_EQ(f.severity, Severity::kError);
  EXPECT_NE(f.message.find("no chat template embedded"), std::string::npos);
  EXPECT_NE(f.message.find("gemma"), std::string::npos);
  EXPECT_NE(f.fix.find("--chat-template gemma"), std::string::npos);
  EXPECT_EQ(r.ExitCode(), 2);
  EXPECT_EQ(Get(r, "pre_tokenizer").severity, Severity::kOk);  // SentencePiece: no pre-tokenizer
}

TEST(Doctor, PreTokenizerMissingOrUnknown) {
  std::string smol = fixtures::SmolLM2Path();
  ASSERT_FALSE(smol.empty()) << "SmolLM2 is not in the cache (make test fetches it)";
  auto missing =
      Doctor(Variant(smol, "d-nopre.gguf", [](gguf_context* g) { gguf_remove_key(g, "tokenizer.ggml.pre"); }));
  EXPECT_EQ(Get(missing, "pre_tokenizer").severity, Severity::kWarn);
  EXPECT_NE(Get(missing, "pre_tokenizer").message.find("DEGRADED"), std::string::npos);
  EXPECT_EQ(missing.ExitCode(), 0);
  auto unknown = Doctor(
      Variant(smol, "d-badpre.gguf", [](gguf_context* g) { gguf_set_val_str(g, "tokenizer.ggml.pre", "nonesuch"); }));
  Finding f = Get(unknown, "pre_tokenizer");
  EXPECT_EQ(f.severity, Severity::kError);
  EXPECT_NE(f.message.find("unknown pre-tokenizer type: 'nonesuch'"), std::string::npos) << f.message;
  EXPECT_EQ(unknown.ExitCode(), 2);
}

TEST(Doctor, BosFromTemplateAndAddBos) {
  const std::string bos_tmpl = std::string("{{ bos_token }}") + kChatML;
  auto risk = Doctor(TinyWithTemplate("d-bos-risk.gguf", bos_tmpl, true));
  EXPECT_EQ(Get(risk, "bos").severity, Severity::kWarn);
  EXPECT_NE(Get(risk, "bos").message.find("double BOS"), std::string::npos);
  auto twice = Doctor(TinyWithTemplate("d-bos-twice.gguf", "{{ bos_token }}" + bos_tmpl, true));
  EXPECT_EQ(Get(twice, "bos").severity, Severity::kError);  // llama.cpp strips one copy, not two
  EXPECT_EQ(twice.ExitCode(), 2);
  auto template_only = Doctor(TinyWithTemplate("d-bos-tmpl.gguf", bos_tmpl, false));
  EXPECT_EQ(Get(template_only, "bos").severity, Severity::kOk);
  auto none = Doctor(TinyWithTemplate("d-bos-none.gguf", kChatML, false));
  EXPECT_EQ(Get(none, "bos").severity, Severity::kInfo);
  EXPECT_NE(Get(none, "bos").message.find("without a BOS"), std::string::npos);
}

TEST(Doctor, TemplateAgainstVocabulary) {
  auto llama3 = Doctor(TinyWithTemplate(
      "d-llama3.gguf",
      "{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n' + m['content'] + "
      "'<|eot_id|>' }}{% endfor %}"));
  EXPECT_EQ(Get(llama3, "template_family").severity, Severity::kError);
  EXPECT_NE(Get(llama3, "template_family").message.find("'<|start_header_id|>'"), std::string::npos);
  // A plain-text template: turns end with a newline, which stops nothing.
  auto plain = Doctor(
      TinyWithTemplate("d-plain.gguf", "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"));
  EXPECT_EQ(Get(plain, "template_family").severity, Severity::kInfo);
  EXPECT_EQ(Get(plain, "end_of_turn").severity, Severity::kWarn);
  auto broken = Doctor(TinyWithTemplate("d-broken.gguf", "{% for m in messages %}{{ m['content'] }"));
  EXPECT_EQ(Get(broken, "chat_template").severity, Severity::kError);
  EXPECT_NE(Get(broken, "chat_template").message.find("does not parse"), std::string::npos);
}

TEST(Doctor, SamplingAndGenerationConfig) {
  std::string tiny = fixtures::TempPath("d-tiny-s.gguf");
  ASSERT_TRUE(fixtures::WriteTinyModel(tiny).ok());
  auto embedded = Variant(tiny, "d-sampling.gguf", [](gguf_context* g) {
    gguf_set_val_f32(g, "general.sampling.temp", 0.6f);
    gguf_set_val_f32(g, "general.sampling.top_p", 0.95f);
  });
  auto r = Doctor(embedded);
  EXPECT_EQ(Get(r, "sampling").severity, Severity::kOk);
  EXPECT_NE(Get(r, "sampling").message.find("temp 0.6"), std::string::npos) << Get(r, "sampling").message;
  std::string same = WriteText("d-gen-same.json", R"({"temperature": 0.6, "top_p": 0.95, "eos_token_id": 4})");
  EXPECT_EQ(Get(Doctor(embedded, same), "sampling").severity, Severity::kOk);
  std::string other =
      WriteText("d-gen-other.json",
                R"({"temperature": 0.2, "top_p": 0.95, "top_k": 20, "eos_token_id": [4, 7], "bos_token_id": 3})");
  auto diff = Doctor(embedded, other);
  Finding s = Get(diff, "sampling");
  EXPECT_EQ(s.severity, Severity::kWarn);
  EXPECT_NE(s.fix.find("--temp 0.2 --top-p 0.95 --top-k 20"), std::string::npos) << s.fix;
  int eos_warnings = 0, bos_warnings = 0;
  for (const auto& f : diff.findings) {
    eos_warnings += f.check == "eos" && f.severity == Severity::kWarn;
    bos_warnings += f.check == "bos" && f.severity == Severity::kWarn;
  }
  EXPECT_EQ(eos_warnings, 1);  // 4 (<|im_end|>) stops generation; 7 does not
  EXPECT_EQ(bos_warnings, 1);  // generation_config says 3, the GGUF 1
  auto only_config = Doctor(tiny, other);
  EXPECT_EQ(Get(only_config, "sampling").severity, Severity::kWarn);
  EXPECT_NE(Get(only_config, "sampling").message.find("no general.sampling"), std::string::npos);

  auto missing = RunDoctor(tiny, {"/nonexistent/generation_config.json"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message().rfind("/nonexistent/generation_config.json: ", 0), 0u);
  auto bad = RunDoctor(tiny, {WriteText("d-gen-bad.json", "[1,")});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a JSON object"), std::string::npos);
}

TEST(Doctor, ContextAgainstRopeScaling) {
  std::string tiny = fixtures::TempPath("d-tiny-c.gguf");
  ASSERT_TRUE(fixtures::WriteTinyModel(tiny).ok());
  auto rope = [&](const char* name, const char* type, float factor, uint32_t orig) {
    return Doctor(Variant(tiny, name, [&](gguf_context* g) {
      if (type) gguf_set_val_str(g, "llama.rope.scaling.type", type);
      gguf_set_val_f32(g, "llama.rope.scaling.factor", factor);
      if (orig) gguf_set_val_u32(g, "llama.rope.scaling.original_context_length", orig);
    }));
  };
  EXPECT_EQ(Get(Doctor(tiny), "context").severity, Severity::kOk);
  EXPECT_EQ(Get(rope("d-yarn.gguf", "yarn", 4, 128), "context").severity, Severity::kInfo);  // 128 x 4 = 512
  auto off = rope("d-yarn-off.gguf", "yarn", 4, 100);
  EXPECT_EQ(Get(off, "context").severity, Severity::kWarn);
  EXPECT_NE(Get(off, "context").message.find("= 400"), std::string::npos) << Get(off, "context").message;
  EXPECT_EQ(Get(rope("d-notype.gguf", nullptr, 2, 0), "context").severity, Severity::kWarn);
}

TEST(Doctor, BadFilesGiveOneClearError) {
  auto missing = RunDoctor("/nonexistent/model.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "/nonexistent/model.gguf: no such file");
  std::string text = WriteText("d-text.gguf", "not a model at all");
  auto bad = RunDoctor(text);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a GGUF file"), std::string::npos);
}

TEST(Doctor, SettingsFromMetadataAlone) {
  std::map<std::string, std::string> kv = {{"general.architecture", "qwen2"},
                                           {"qwen2.context_length", "131072"},
                                           {"qwen2.rope.scaling.type", "yarn"},
                                           {"qwen2.rope.scaling.factor", "4"},
                                           {"qwen2.rope.scaling.original_context_length", "32768"},
                                           {"general.sampling.top_k", "20"}};
  GgufMeta meta = [&](const std::string& k) { return kv.count(k) ? kv.at(k) : ""; };
  Finding ctx = CheckRopeScaling(meta);
  EXPECT_EQ(ctx.severity, Severity::kInfo);
  EXPECT_NE(ctx.message.find("yarn rope scaling x4 from 32768 to 131072"), std::string::npos) << ctx.message;
  auto s = CheckSamplerSettings(meta, {{"top_k", 20}, {"do_sample", false}});
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].severity, Severity::kOk);
  EXPECT_EQ(s[1].severity, Severity::kInfo);
  EXPECT_NE(s[1].message.find("greedy"), std::string::npos);
}
