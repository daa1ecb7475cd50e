// The effective settings: llama.cpp's rules as the pinned tree has them, and the property that a
// manifest's knobs reproduce what ran (requested and effective-made-explicit are bit-identical).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <llama.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "engine/engine.h"
#include "engine/llama_internal.h"
#include "testing/tiny_model.h"
#include "util/util.h"

using namespace flipscope;

namespace {

// Every row of a short prefill under knobs k, as digests; the engine's manifest knobs in *effective.
std::vector<uint64_t> Rows(const std::string& model, const Knobs& k, nlohmann::json* describe) {
  auto e = LlamaEngine::Create(model, k);
  EXPECT_TRUE(e.ok()) << e.status().message();
  if (!e.ok()) return {};
  if (describe) *describe = ToJson((*e)->Describe());
  std::vector<int32_t> tokens, probes;
  for (int i = 0; i < 80; ++i) {
    tokens.push_back(5 + (i * 37) % 290);
    probes.push_back(i);
  }
  std::vector<uint64_t> out;
  Status st = (*e)->Prefill(
      tokens, probes,
      [&](const Row& r) {
        out.push_back(Digest64(r.logits.data(), r.logits.size_bytes()));
        return Status::Ok();
      },
      nullptr);
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

// A capture with the requested knobs and one with the recorded effective knobs made explicit give
// the same rows bit for bit; returns the first's engine block.
nlohmann::json ExpectEffectiveReproduces(const std::string& model, const Knobs& asked, const std::string& what) {
  nlohmann::json d;
  auto requested = Rows(model, asked, &d);
  auto effective = Knobs::FromJson(d["knobs"]);
  EXPECT_TRUE(effective.ok()) << what << ": " << effective.status().message();
  if (!effective.ok()) return d;
  nlohmann::json d2;
  EXPECT_EQ(Rows(model, *effective, &d2), requested) << what << ": " << d["knobs"].dump();
  EXPECT_EQ(d2["knobs"], d["knobs"]) << what << ": effective knobs are a fixed point";
  EXPECT_EQ(d2["resolved"].value("flash_attn", nlohmann::json()), nlohmann::json()) << what;
  return d;
}

void KnobMatrix(const std::string& model, const std::string& name) {
  ASSERT_FALSE(model.empty()) << name << " is not in the cache (make test fetches it)";
  struct Kv {
    const char *k, *v;
  };
  for (Kv kv : {Kv{"f16", "f16"}, Kv{"q8_0", "q8_0"}, Kv{"q4_0", "f16"}, Kv{"q4_0", "q4_0"}}) {
    Knobs k;
    k.n_threads = 1;
    k.n_ctx = 300;  // rounded up by llama.cpp
    k.flash_attn = FlashAttn::kAuto;
    k.cache_type_k = *FromName<KvCacheType>(kv.k);
    k.cache_type_v = *FromName<KvCacheType>(kv.v);
    const std::string what = fmt::format("{} -fa auto -ctk {} -ctv {}", name, kv.k, kv.v);
    nlohmann::json d = ExpectEffectiveReproduces(model, k, what);
    EXPECT_EQ(d["knobs"]["ctx_size"], 512) << what;
    EXPECT_EQ(d["resolved"]["ctx_size"]["requested"], 300) << what;
    // The CPU runs flash attention: auto is on, by the V-cache rule when V is quantized.
    EXPECT_EQ(d["knobs"]["flash_attn"], "on") << what;
    EXPECT_NE(d["flags"].get<std::string>().find("-fa on"), std::string::npos) << what;
    const std::string reason = d["resolved"]["flash_attn"]["reason"];
    EXPECT_EQ(reason.find("quantized V cache") != std::string::npos, std::string(kv.v) != "f16") << what << reason;
  }
  // The sizes llama.cpp clamps, threads 0 and the repack knob.
  Knobs sizes;
  sizes.n_ctx = 256;
  sizes.n_threads = 1;
  sizes.n_batch = 4096;  // > n_ctx: clamped to it
  sizes.n_ubatch = 32;
  sizes.flash_attn = FlashAttn::kOn;
  nlohmann::json d = ExpectEffectiveReproduces(model, sizes, name + " -b 4096 -c 256");
  EXPECT_EQ(d["knobs"]["batch_size"], 256);
  Knobs ub;
  ub.n_ctx = 256;
  ub.n_batch = 64;
  ub.n_ubatch = 512;  // > -b: clamped to it
  ub.n_threads = 0;   // every hardware thread
  d = ExpectEffectiveReproduces(model, ub, name + " -b 64 -ub 512 -t 0");
  EXPECT_EQ(d["knobs"]["ubatch_size"], 64);
  EXPECT_GE(d["knobs"]["threads"].get<int>(), 1);
  Knobs repack;
  repack.n_ctx = 256;
  repack.n_threads = 1;
  d = ExpectEffectiveReproduces(model, repack, name + " --repack on");
  // Repacking is recorded on exactly when a weight went into an extra buffer type.
  EXPECT_EQ(d["knobs"]["repack"] == "on", !d["kernel_path"]["extra_buffer_types"].empty()) << d["kernel_path"].dump();
}

}  // namespace

TEST(FlashAttnRules, InLlamaCppsOrder) {
  FlashAttnFacts f{"llama", SplitMode::kLayer, false, "f16"};
  EXPECT_FALSE(FlashAttnByRule(FlashAttn::kAuto, f).value.has_value());  // the device probe decides
  EXPECT_EQ(FlashAttnByRule(FlashAttn::kOff, f).value, FlashAttn::kOff);
  f.v_quantized = true;
  f.cache_type_v = "q8_0";
  auto r = FlashAttnByRule(FlashAttn::kAuto, f);
  EXPECT_EQ(r.value, FlashAttn::kOn);
  EXPECT_EQ(r.reason, "quantized V cache (-ctv q8_0) requires it");
  f = {"llama", SplitMode::kTensor, false, "f16"};
  EXPECT_EQ(FlashAttnByRule(FlashAttn::kAuto, f).value, FlashAttn::kOn);
  f = {"grok", SplitMode::kLayer, false, "f16"};
  EXPECT_EQ(FlashAttnByRule(FlashAttn::kOn, f).value, FlashAttn::kOff);  // even when asked for
}

TEST(FlashAttnRules, ProbeLogBothWays) {
  EXPECT_EQ(FlashAttnFromProbeLog("resolve_fused_ops: Flash Attention enabled\n")->value, FlashAttn::kOn);
  auto off = FlashAttnFromProbeLog(
      "resolve_fused_ops: layer 3 is assigned to device CUDA0 but Flash Attention is assigned to device CPU "
      "(usually due to missing support)\nresolve_fused_ops: Flash Attention not supported, set to disabled\n");
  ASSERT_TRUE(off.has_value());
  EXPECT_EQ(off->value, FlashAttn::kOff);
  EXPECT_NE(off->reason.find("layer 3 is assigned to device CUDA0"), std::string::npos) << off->reason;
  EXPECT_FALSE(FlashAttnFromProbeLog("some other wording").has_value());
}

// llama_init_from_model's flash-attention rules and the fused-op probes as the pinned tree has
// them. An upgrade that changes them fails here, so FlashAttnByRule is revisited with it.
TEST(FlashAttnRules, MatchThePinnedTree) {
  std::ifstream f(std::string(FLIPSCOPE_LLAMA_SOURCE_DIR) + "/src/llama-context.cpp");
  ASSERT_TRUE(f.good()) << FLIPSCOPE_LLAMA_SOURCE_DIR;
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string src = ss.str();
  const size_t begin = src.find("llama_context * llama_init_from_model(");
  ASSERT_NE(begin, std::string::npos);
  const size_t end = src.find("try {", begin);
  ASSERT_NE(end, std::string::npos);
  std::vector<std::string> rules;
  std::istringstream body(src.substr(begin, end - begin));
  for (std::string line; std::getline(body, line);) {
    line = std::regex_replace(line, std::regex(R"(^\s+|\s+$)"), "");
    if (line.find("flash_attn_type") != std::string::npos && line.rfind("LLAMA_LOG", 0) != 0) rules.push_back(line);
  }
  const std::vector<std::string> pinned = {
      "if (params.flash_attn_type != LLAMA_FLASH_ATTN_TYPE_DISABLED && model->arch == LLM_ARCH_GROK) {",
      "params.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;",
      "if (params.flash_attn_type == LLAMA_FLASH_ATTN_TYPE_AUTO) {",
      "params.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;",
      "if (params.flash_attn_type != LLAMA_FLASH_ATTN_TYPE_ENABLED) {",
      "if (ggml_is_quantized(params.type_v) && params.flash_attn_type != LLAMA_FLASH_ATTN_TYPE_ENABLED) {",
      "if (params.flash_attn_type == LLAMA_FLASH_ATTN_TYPE_AUTO) {",
      "params.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;",
      "if (params.flash_attn_type == LLAMA_FLASH_ATTN_TYPE_DISABLED) {",
      "if (params.flash_attn_type != LLAMA_FLASH_ATTN_TYPE_DISABLED && ggml_is_quantized(params.type_k)) {",
      "if (params.flash_attn_type != LLAMA_FLASH_ATTN_TYPE_DISABLED && ggml_is_quantized(params.type_v)) {",
  };
  EXPECT_EQ(rules, pinned) << "llama_init_from_model's flash-attention rules changed: revisit FlashAttnByRule";
  EXPECT_NE(src.find("if (model->split_mode() == LLAMA_SPLIT_MODE_TENSOR) {"), std::string::npos);
  // The probe of -fa auto, and its log wording that FlashAttnFromProbeLog reads.
  EXPECT_NE(src.find("resolve(llm_fused_op_flash_attn_probe, cparams.flash_attn);"), std::string::npos);
  EXPECT_NE(src.find("/*.name             =*/ \"Flash Attention\","), std::string::npos);
  EXPECT_NE(src.find("LLAMA_LOG_INFO(\"%s: %s enabled\\n\", func, probe.name);"), std::string::npos);
  EXPECT_NE(src.find("LLAMA_LOG_WARN(\"%s: %s not supported, set to disabled\\n\", func, probe.name);"),
            std::string::npos);
  // Fused Gated Delta Net is on with no auto probe in this tree: nothing to resolve or record.
  EXPECT_NE(src.find("cparams.auto_fgdn    = false;"), std::string::npos);
}

// The behavioural check settles -fa auto without the log, and agrees with the log's verdict.
TEST(FlashAttnRules, BehaviouralCheckAgreesWithTheProbe) {
  EnsureLlamaInit();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(fixtures::DefaultTinyModel().c_str(), mp);
  ASSERT_NE(model, nullptr);
  llama_context_params cp = llama_context_default_params();
  cp.n_threads = cp.n_threads_batch = 1;
  auto r = FlashAttnByBehaviour(model, cp);
  llama_model_free(model);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->value, FlashAttn::kOn) << r->reason;  // the CPU runs it, as the probe says
  EXPECT_NE(r->reason.find("behavioural check"), std::string::npos);
}

TEST(EffectiveKnobs, ReproduceTheRowsOnTheTinyModel) { KnobMatrix(fixtures::DefaultTinyModel(), "tiny"); }
TEST(EffectiveKnobs, ReproduceTheRowsOnSmolLM2) { KnobMatrix(fixtures::SmolLM2Path(), "SmolLM2"); }
TEST(EffectiveKnobs, ReproduceTheRowsOnGemma3) { KnobMatrix(fixtures::Gemma3Path(), "Gemma 3"); }
