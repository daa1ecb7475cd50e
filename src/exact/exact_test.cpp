// The exact engine against llama.cpp on an all-F32 tiny model (the same function, so the two agree
// to float rounding), its refusals, and its exactness claims about dequantization.
#include "exact/exact.h"

#include <gguf.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>

#include "exact/internal.h"
#include "testing/tiny_model.h"

namespace flipscope {
namespace {

std::vector<double> LogSoftmax(std::span<const double> x) {
  double mx = *std::max_element(x.begin(), x.end()), s = 0;
  for (double v : x) s += std::exp(v - mx);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] - mx - std::log(s);
  return out;
}

std::vector<int32_t> SomeTokens(int n, int32_t n_vocab) {
  std::mt19937 rng(7);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = int32_t(5 + rng() % uint32_t(n_vocab - 5));
  return t;
}

// One architecture's tiny all-F32 model: its name in test output and the generator's options.
struct ArchCase {
  const char* name;
  fixtures::TinyModelOptions opts;
};

// A case of architecture arch, with head width head_dim (0: n_embd / n_head) and a fused QKV.
ArchCase Case(const char* name, const char* arch, int head_dim = 0, bool fused_qkv = false) {
  fixtures::TinyModelOptions o;
  o.arch = arch;
  o.head_dim = head_dim;
  o.fused_qkv = fused_qkv;
  return {name, o};
}

// gemma2 with a window and caps small enough to matter over 100 positions of a tiny model (without
// the final cap of 15 the KL is 0.03). Not smaller: gemma's GELU is not F32 in llama.cpp's CPU
// backend (a table of FP16 values, ggml-cpu/vec.h GGML_GELU_FP16, ~1e-4 of a logit), and a flatter
// distribution turns that into a mean KL of 8e-9 (cap 3) to 1e-8 (cap 6), on the bound.
ArchCase Gemma2Capped() {
  ArchCase c = Case("gemma2", "gemma2");
  c.opts.sliding_window = 16;
  c.opts.attn_softcap = 2.0f;
  c.opts.final_softcap = 15.0f;
  return c;
}

// gemma3: seven layers, so that the sixth runs full attention (rope base 1e6) between sliding
// ones (window 16, base 10000), with per-head Q/K norms and no caps.
ArchCase Gemma3() {
  ArchCase c = Case("gemma3", "gemma3");
  c.opts.n_layer = 7;
  c.opts.sliding_window = 16;
  return c;
}

// qwen35: four layers, the second and fourth full attention (gated Q, rope over 16 of each head's
// 32 dimensions in sections 3/3/2/0), the others Gated DeltaNet with 2 key and 4 value heads.
// `sections` other than the default puts rotated pairs in the section that does not turn.
ArchCase Qwen35(const char* name, std::vector<int> sections = {}) {
  ArchCase c = Case(name, "qwen35");
  c.opts.n_layer = 4;
  c.opts.rope_dims = 16;
  c.opts.rope_sections = std::move(sections);
  return c;
}

void PrintTo(const ArchCase& c, std::ostream* os) { *os << c.name; }

class ExactAgainstLlama : public ::testing::TestWithParam<ArchCase> {};

TEST_P(ExactAgainstLlama, AgreesOnAnF32TinyModel) {
  const ArchCase& c = GetParam();
  std::string path = fixtures::TempPath(std::string("exact-tiny-f32-") + c.name + ".gguf");
  fixtures::TinyModelOptions to = c.opts;
  to.matrix_type = "f32";
  to.weight_scale = 4.0f;  // peaky distributions, so that a wrong graph moves the argmax
  ASSERT_TRUE(fixtures::WriteTinyModel(path, to).ok());
  auto exact = ExactEngine::Create(path, {.n_threads = 1, .query_block = 16, .token_chunk = 24});
  ASSERT_TRUE(exact.ok()) << exact.status().message();
  Knobs k;
  k.flash_attn = FlashAttn::kOff;
  k.cache_type_k = k.cache_type_v = KvCacheType::kF32;
  k.n_threads = 1;
  auto llama = LlamaEngine::Create(path, k);
  ASSERT_TRUE(llama.ok()) << llama.status().message();
  const int n = 100;
  std::vector<int32_t> tokens = SomeTokens(n, (*exact)->n_vocab()), probes(n);
  for (int i = 0; i < n; ++i) probes[size_t(i)] = i;
  std::vector<std::vector<double>> ours(n), theirs(n);
  ASSERT_TRUE((*exact)
                  ->PrefillF64(
                      tokens, probes,
                      [&](const RowF64& r) {
                        ours[size_t(r.index)] = LogSoftmax(r.logits);
                        return Status::Ok();
                      },
                      nullptr)
                  .ok());
  ASSERT_TRUE((*llama)
                  ->Prefill(
                      tokens, probes,
                      [&](const Row& r) {
                        std::vector<double> d(r.logits.begin(), r.logits.end());
                        theirs[size_t(r.index)] = LogSoftmax(d);
                        return Status::Ok();
                      },
                      nullptr)
                  .ok());
  double max_kl = 0, sum_kl = 0;
  int same_top1 = 0;
  for (int i = 0; i < n; ++i) {
    double kl = 0;
    for (size_t v = 0; v < ours[size_t(i)].size(); ++v) kl += std::exp(ours[i][v]) * (ours[i][v] - theirs[i][v]);
    max_kl = std::max(max_kl, kl);
    sum_kl += kl;
    same_top1 += std::max_element(ours[i].begin(), ours[i].end()) - ours[i].begin() ==
                 std::max_element(theirs[i].begin(), theirs[i].end()) - theirs[i].begin();
  }
  std::printf("%s: top-1 %d/%d, KL mean %.3e max %.3e\n", c.name, same_top1, n, sum_kl / n, max_kl);
  // The bounds are the mean below 1e-8 and a maximum of 1e-7: llama.cpp's F32 arithmetic against
  // FP64 gives means of 1e-12 to 7e-10 here and maxima up to ~9e-9 (phi3), while a wrong RoPE
  // pairing, norm, bias, split or cap gives > 1e-3.
  EXPECT_LT(sum_kl / n, 1e-8);
  EXPECT_LT(max_kl, 1e-7);
  EXPECT_EQ(same_top1, n);
}

INSTANTIATE_TEST_SUITE_P(Architectures, ExactAgainstLlama,
                         ::testing::Values(Case("llama", "llama"), Case("llama_fused_qkv", "llama", 0, true),
                                           Case("qwen2", "qwen2"), Case("qwen2_fused_qkv", "qwen2", 0, true),
                                           Case("qwen3", "qwen3"), Case("qwen3_wide_heads", "qwen3", 48),
                                           Case("qwen3moe", "qwen3moe"), Case("phi3", "phi3", 0, true), Gemma2Capped(),
                                           Case("gemma2_defaults", "gemma2"), Gemma3(), Qwen35("qwen35"),
                                           Qwen35("qwen35_fourth_section", {2, 1, 1, 4})),
                         [](const auto& info) { return std::string(info.param.name); });

// The thread count changes who computes a row, not the function: a gemma2 model (sliding layers,
// caps, GELU, q8_0 weights) large enough that the element-wise passes, the widening and the
// attention are split. Two runs on 4 threads give the same bits; 1 against 4 threads agree to
// 1e-12 of each row's largest logit (OpenBLAS's threaded dgemm may sum a product's terms in
// another order on shapes this small; on the real models the rows were bit-identical, docs/exact.md).
TEST(ExactEngine, ThreadCountDoesNotChangeTheRows) {
  ArchCase c = Gemma2Capped();
  c.opts.matrix_type = "q8_0";
  c.opts.n_embd = 128;
  c.opts.n_ff = 1024;
  std::string path = fixtures::TempPath("exact-tiny-threads.gguf");
  ASSERT_TRUE(fixtures::WriteTinyModel(path, c.opts).ok());
  const int n = 300;
  std::vector<std::vector<double>> rows[3];
  for (int pass = 0; pass < 3; ++pass) {
    auto exact = ExactEngine::Create(path, {.n_threads = pass == 0 ? 1 : 4, .query_block = 32});
    ASSERT_TRUE(exact.ok()) << exact.status().message();
    std::vector<int32_t> tokens = SomeTokens(n, (*exact)->n_vocab()), probes;
    for (int i = 0; i < n; i += 7) probes.push_back(i);
    ASSERT_TRUE((*exact)
                    ->PrefillF64(
                        tokens, probes,
                        [&](const RowF64& r) {
                          rows[pass].emplace_back(r.logits.begin(), r.logits.end());
                          return Status::Ok();
                        },
                        nullptr)
                    .ok());
  }
  ASSERT_EQ(rows[0].size(), rows[1].size());
  for (size_t i = 0; i < rows[0].size(); ++i) {
    ASSERT_EQ(rows[1][i], rows[2][i]) << "probe " << i << ": two runs on 4 threads differ";
    double scale = 0, diff = 0;
    for (size_t v = 0; v < rows[0][i].size(); ++v) {
      scale = std::max(scale, std::abs(rows[0][i][v]));
      diff = std::max(diff, std::abs(rows[0][i][v] - rows[1][i][v]));
    }
    EXPECT_LE(diff, 1e-12 * scale) << "probe " << i;
  }
}

// Rows [0, n) are cut into disjoint contiguous ranges that cover them, whatever the thread count.
TEST(ExactKernels, ParallelRowsCoversEveryRowOnce) {
  for (int threads : {1, 2, 3, 16})
    for (int64_t n : {0, 1, 5, 1000, 100000}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      exact::ParallelRows(threads, n, 64, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) seen[size_t(r)]++;
      });
      for (int64_t r = 0; r < n; ++r)
        ASSERT_EQ(seen[size_t(r)].load(), 1) << threads << " threads, n " << n << ", row " << r;
    }
}

// A device the build or the machine cannot give is refused in one line naming it; the CPU is
// the default and is named by "CPU" or "none" too.
TEST(ExactEngine, DevicesRefusedInOneLine) {
  std::string path = fixtures::TempPath("exact-tiny-device.gguf");
  ASSERT_TRUE(fixtures::WriteTinyModel(path).ok());
  for (const char* cpu : {"CPU", "none"})
    EXPECT_TRUE(ExactEngine::Create(path, ExactOptions{.n_threads = 1, .device = cpu}).ok()) << cpu;
  auto other = ExactEngine::Create(path, ExactOptions{.n_threads = 1, .device = "Vulkan0"});
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(other.status().message().find("device Vulkan0: "), std::string::npos) << other.status().message();
  // CUDA0 where there is none (CI, and this build without CUDA or a card): refused, not crashed.
  auto cuda = ExactEngine::Create(path, ExactOptions{.n_threads = 1, .device = "CUDA0"});
  if (!cuda.ok()) {
    EXPECT_NE(cuda.status().message().find("device CUDA0: "), std::string::npos) << cuda.status().message();
    EXPECT_EQ(cuda.status().message().find('\n'), std::string::npos);
  }
}

TEST(ExactEngine, RefusesOtherArchitecturesNamingThem) {
  std::string path = fixtures::TempPath("exact-tiny-arch.gguf");
  ASSERT_TRUE(fixtures::WriteTinyModel(path).ok());
  // The tiny model's metadata with another architecture (no tensors: the check comes first).
  std::unique_ptr<gguf_context, void (*)(gguf_context*)> in(gguf_init_from_file(path.c_str(), {true, nullptr}),
                                                            gguf_free);
  std::unique_ptr<gguf_context, void (*)(gguf_context*)> out(gguf_init_empty(), gguf_free);
  ASSERT_TRUE(in);
  gguf_set_kv(out.get(), in.get());
  gguf_set_val_str(out.get(), "general.architecture", "mamba");
  std::string other = fixtures::TempPath("exact-tiny-mamba.gguf");
  ASSERT_TRUE(gguf_write_to_file(out.get(), other.c_str(), /*only_meta=*/true));
  auto e = ExactEngine::Create(other);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), other +
                                      ": architecture 'mamba' is not supported by the exact engine (llama, qwen2, "
                                      "qwen3, qwen3moe, qwen35, phi3, gemma2, gemma3)");
}

// A tensor the graph does not use (here the output projection's bias) means a feature this engine
// lacks: refused.
TEST(ExactEngine, RefusesTensorsItDoesNotImplement) {
  std::string path = fixtures::TempPath("exact-tiny-bias.gguf");
  fixtures::TinyModelOptions to;
  to.rename_from = "output.weight";  // the output then ties to the embedding
  to.rename_to = "blk.0.attn_output.bias";
  ASSERT_TRUE(fixtures::WriteTinyModel(path, to).ok());
  auto e = ExactEngine::Create(path);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("tensor blk.0.attn_output.bias (llama graph feature) is not implemented"),
            std::string::npos)
      << e.status().message();
}

// Rope scaling other than linear changes the angles' formula: refused, naming the scheme.
TEST(ExactEngine, RefusesRopeScalingItDoesNotImplement) {
  std::string path = fixtures::TempPath("exact-tiny-yarn.gguf");
  fixtures::TinyModelOptions to;
  to.arch = "qwen2";
  to.rope_scaling = "yarn";
  ASSERT_TRUE(fixtures::WriteTinyModel(path, to).ok());
  auto e = ExactEngine::Create(path);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), path + ": rope scaling 'yarn' is not supported by the exact engine");
}

// A fused QKV with only some of the separate biases is a file llama.cpp would read differently
// (it adds them only when all three are there): refused.
TEST(ExactEngine, RefusesAFusedQkvWithSomeSeparateBiases) {
  std::string path = fixtures::TempPath("exact-tiny-qkv-bias.gguf");
  fixtures::TinyModelOptions to;
  to.fused_qkv = true;
  to.rename_from = "output.weight";
  to.rename_to = "blk.1.attn_q.bias";
  ASSERT_TRUE(fixtures::WriteTinyModel(path, to).ok());
  auto e = ExactEngine::Create(path);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("blk.1.attn_qkv has 1 of the 3 separate Q/K/V biases"), std::string::npos)
      << e.status().message();
}

// qwen35 shapes llama.cpp's graph asserts against (value heads not a multiple of the key heads)
// and a missing DeltaNet tensor are refused in one line naming them.
TEST(ExactEngine, RefusesQwen35ShapesAndTensorsTheGraphLacks) {
  std::string path = fixtures::TempPath("exact-tiny-qwen35-shape.gguf");
  fixtures::TinyModelOptions to;
  to.arch = "qwen35";
  to.n_layer = 2;
  to.ssm_v_heads = 3;  // 2 key heads
  ASSERT_TRUE(fixtures::WriteTinyModel(path, to).ok());
  auto e = ExactEngine::Create(path);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), path +
                                      ": unsupported Gated DeltaNet shape (conv 4, state 16, 2 key heads, 3 value "
                                      "heads, inner 48)");
  to.ssm_v_heads = 4;
  to.drop_tensor = "blk.0.ssm_a";
  ASSERT_TRUE(fixtures::WriteTinyModel(path, to).ok());
  e = ExactEngine::Create(path);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), path + ": missing tensor blk.0.ssm_a");
}

// Our FP64 block decoders read the same values ggml's float dequantization gives (to float
// rounding) on random data quantized by ggml itself, for every type they cover.
TEST(ExactDequant, DecodersMatchGgmlOnEveryCoveredType) {
  const int64_t n = 4096;
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> src(n);
  for (auto& x : src) x = dist(rng);
  for (ggml_type t : {GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
                      GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K}) {
    std::vector<uint8_t> q(ggml_row_size(t, n));
    ggml_quantize_chunk(t, src.data(), q.data(), 0, 1, n, nullptr);
    exact::DequantTallies tally;
    std::vector<float> f;
    ASSERT_TRUE(exact::DequantizeChecked(t, q.data(), n, f, tally).ok());
    std::vector<double> d(n);
    ASSERT_TRUE(exact::DecodeF64(t, q.data(), n, d.data()));
    double max_rel = 0;
    for (int64_t i = 0; i < n; ++i)
      max_rel = std::max(max_rel, std::fabs(d[i] - f[i]) / std::max(1e-30, std::fabs(d[i])));
    EXPECT_LE(max_rel, 6e-8) << ggml_type_name(t);  // at most float rounding apart
    EXPECT_TRUE(tally[ggml_type_name(t)].checked);
  }
}

// The finding docs/exact.md states: on both models' every tensor, ggml's float dequantization
// equals the FP64 decode exactly, so widening it to FP64 loses nothing.
TEST(ExactDequant, FloatIsExactOnTheTwoModels) {
  for (const std::string& path : {fixtures::SmolLM2Path(), fixtures::Gemma3Path()}) {
    ASSERT_FALSE(path.empty()) << "set-up has not fetched the models";
    auto check = CheckDequantization(path);
    ASSERT_TRUE(check.ok()) << check.status().message();
    for (const auto& [type, t] : check->items()) {
      EXPECT_TRUE(t["checked"].get<bool>()) << path << " " << type;
      EXPECT_EQ(t["inexact"].get<int64_t>(), 0) << path << " " << type;
      EXPECT_GT(t["elements"].get<int64_t>(), 0);
    }
  }
}

TEST(ExactKernels, ExpWithinTwoUlpOfLibm) {
  std::vector<double> x;
  for (double v = -745; v <= 0; v += 0.0137) x.push_back(v);
  x.push_back(0.0);
  x.push_back(-1e-300);
  std::vector<double> y = x;
  exact::ExpNonPositive(y.data(), int64_t(y.size()));
  double max_rel = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] < -700) {
      EXPECT_EQ(y[i], 0.0);
      continue;
    }
    max_rel = std::max(max_rel, std::fabs(y[i] - std::exp(x[i])) / std::exp(x[i]));
  }
  EXPECT_LT(max_rel, 4.5e-16);
  EXPECT_EQ(y[y.size() - 2], 1.0);
}

TEST(ExactKernels, RopeModesPairTheRightDimensions) {
  // One head of 4 dimensions at position 1 with base 1: angle 1 for pair 0, 1 for pair 1.
  exact::RopeTable t = exact::MakeRopeTable(2, 4, 1.0, 1.0);
  std::vector<double> normal = {1, 0, 0, 0, 1, 0, 0, 0}, neox = normal;
  exact::ApplyRope(normal.data() + 4, 1, 1, 4, 1, 4, 4, false, t);
  exact::ApplyRope(neox.data() + 4, 1, 1, 4, 1, 4, 4, true, t);
  EXPECT_NEAR(normal[4], std::cos(1.0), 1e-16);
  EXPECT_NEAR(normal[5], std::sin(1.0), 1e-16);  // normal: dimension 0 pairs with 1
  EXPECT_EQ(normal[6], 0.0);
  EXPECT_NEAR(neox[6], std::sin(1.0), 1e-16);  // NeoX: dimension 0 pairs with 2
  EXPECT_EQ(neox[5], 0.0);
}

}  // namespace
}  // namespace flipscope
