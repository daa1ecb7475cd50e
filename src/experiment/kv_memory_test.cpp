// KvCacheMemory against the allocation llama.cpp itself reports (its "llama_kv_cache: size = X MiB"
// log lines, one per cache: two for a model with sliding-window layers) on both real models.
#include <gtest/gtest.h>
#include <llama.h>

#include <cstdlib>
#include <memory>
#include <regex>

#include "checkpoint/model_info.h"
#include "experiment/steps.h"
#include "runtime/runtime.h"
#include "testing/tiny_model.h"

namespace flipscope {
namespace {

using ModelPtr = std::unique_ptr<llama_model, void (*)(llama_model*)>;

// The MiB llama.cpp allocated for the KV cache of a context made with these settings.
double AllocatedMiB(llama_model* model, const Knobs& k, int n_ctx, bool swa_full) {
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = uint32_t(n_ctx);
  cp.n_batch = uint32_t(k.n_batch);
  cp.n_ubatch = uint32_t(k.n_ubatch);
  cp.n_seq_max = 1;
  cp.kv_unified = true;
  cp.swa_full = swa_full;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;  // a quantized V cache needs it
  cp.type_k = k.cache_type_k == KvCacheType::kQ8_0 ? GGML_TYPE_Q8_0 : GGML_TYPE_F16;
  cp.type_v = k.cache_type_v == KvCacheType::kQ8_0 ? GGML_TYPE_Q8_0 : GGML_TYPE_F16;
  TakeLlamaLogAll();
  llama_context* ctx = llama_init_from_model(model, cp);
  const std::string log = TakeLlamaLogAll();
  EXPECT_NE(ctx, nullptr);
  llama_free(ctx);
  double mib = 0;
  const std::regex size_line(R"(llama_kv_cache: size = +([0-9.]+) MiB)");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), size_line); it != std::sregex_iterator(); ++it)
    mib += std::stod((*it)[1]);
  return mib;
}

void ExpectRuleMatchesLlama(const std::string& path, const std::vector<int>& contexts) {
  if (path.empty()) GTEST_SKIP() << "the model is not in the cache (scripts/fetch-models.sh)";
  EnsureLlamaInit();
  auto info = ReadModelInfo(path);
  ASSERT_TRUE(info.ok()) << info.status().message();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  ModelPtr model(llama_model_load_from_file(path.c_str(), mp), llama_model_free);
  ASSERT_TRUE(model);
  for (int n_ctx : contexts)
    for (bool swa_full : {false, true})
      for (const char* type : {"f16", "q8_0"})
        for (int ubatch : {512, 128}) {
          Knobs k;
          k.cache_type_k = k.cache_type_v = *FromName<KvCacheType>(type);
          k.n_ubatch = ubatch;
          const double mib = AllocatedMiB(model.get(), k, n_ctx, swa_full);
          const double rule = KvCacheMemory(*info, k, n_ctx, swa_full).bytes / (1024.0 * 1024.0);
          // llama.cpp prints two decimals per cache.
          EXPECT_NEAR(rule, mib, 0.011) << path << " n_ctx " << n_ctx << " swa_full " << swa_full << " " << type
                                        << " -ub " << ubatch;
        }
}

TEST(KvCacheMemory, EqualsLlamaAllocationOnSmolLM2) { ExpectRuleMatchesLlama(fixtures::SmolLM2Path(), {1000, 8192}); }

TEST(KvCacheMemory, EqualsLlamaAllocationOnGemma3) {
  ExpectRuleMatchesLlama(fixtures::Gemma3Path(), {1000, 32768});
}

TEST(KvCacheMemory, SlidingWindowLayersKeepTheirWindow) {
  // Gemma 3 270M's shape: 18 layers, 15 of them with a 512-token window, one 256-wide KV head.
  ModelInfo m;
  m.n_layer = 18, m.n_layer_swa = 15, m.n_swa = 512, m.n_head_kv = 1, m.head_dim_k = m.head_dim_v = 256;
  m.n_ctx_train = 32768;
  Knobs k;  // f16, -ub 512
  const KvMemory kv = KvCacheMemory(m, k, 32768, false);
  EXPECT_EQ(kv.cells, 32768);
  EXPECT_EQ(kv.cells_swa, 1024);
  EXPECT_DOUBLE_EQ(kv.bytes, (96.0 + 15.0) * 1024 * 1024);
  EXPECT_DOUBLE_EQ(KvCacheMemory(m, k, 32768, true).bytes, 576.0 * 1024 * 1024);
  EXPECT_EQ(KvCacheMemory(m, k, 1000, false).cells, 1024);  // padded to 256
  EXPECT_EQ(ContextFitting(m, k, 111.0 * 1024 * 1024, false), 32768);
  // 96 MiB: the SWA layers' 15 MiB leave 81 MiB for 3 full layers of 3 KiB a cell = 27648 cells.
  EXPECT_EQ(ContextFitting(m, k, 96.0 * 1024 * 1024, false), 27648);
  EXPECT_EQ(ContextFitting(m, k, 1.0, false), 0);
}

}  // namespace
}  // namespace flipscope
