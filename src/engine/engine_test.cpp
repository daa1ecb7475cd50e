#include "engine/engine.h"

#include <ggml.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "testing/futures.h"
#include "testing/tiny_model.h"
#include "util/util.h"

using namespace flipscope;

namespace {
Knobs CpuKnobs() {
  Knobs k;
  k.n_threads = 1;
  k.n_ctx = 256;
  return k;
}
// Rows at the given probes, as digests, under knobs k.
std::vector<uint64_t> Digests(const Knobs& k, const std::vector<int32_t>& tokens, const std::vector<int32_t>& probes) {
  auto e = LlamaEngine::Create(fixtures::DefaultTinyModel(), k);
  EXPECT_TRUE(e.ok()) << e.status().message();
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
}  // namespace

TEST(Knobs, JsonRoundTripAndValidation) {
  Knobs k;
  k.cache_type_k = KvCacheType::kQ8_0;
  k.n_ubatch = 64;
  auto back = Knobs::FromJson(k.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->ToJson(), k.ToJson());
  EXPECT_FALSE(Knobs::FromJson({{"flash_atn", "on"}}).ok());
  Knobs bad;
  bad.cache_type_v = KvCacheType::kQ4_0;
  bad.flash_attn = FlashAttn::kOff;
  EXPECT_NE(bad.Validate().message().find("needs flash attention"), std::string::npos);
  // An unknown KV cache type is refused where it is read (it never becomes a Knobs).
  EXPECT_NE(Knobs::FromJson({{"cache_type_k", "q3_k"}}).status().message().find("unknown KV cache type"),
            std::string::npos);
}

// The knob table drives JSON, flags and text parsing: every entry round-trips a changed value.
TEST(Knobs, TableDrivesJsonFlagsAndText) {
  Knobs k;
  for (const char* flag : {"-fa", "-ctk", "-ctv", "-ub", "-ngl", "-sm", "-ts", "-dev"}) {
    bool found = false;
    for (const auto& info : KnobTable()) found |= std::string(info.llama_flag) == flag;
    EXPECT_TRUE(found) << flag;
  }
  const std::pair<const char*, const char*> texts[] = {
      {"flash_attn", "off"}, {"cache_type_k", "q8_0"}, {"cache_type_v", "q4_0"}, {"batch_size", "64"},
      {"ubatch_size", "32"}, {"ctx_size", "256"},      {"threads", "3"},         {"n_gpu_layers", "7"},
      {"split_mode", "row"}, {"tensor_split", "3,1"},  {"device", "CPU"},        {"repack", "off"},
      {"load", "3"},         {"load_seed", "9"},       {"replay", "served"}};
  ASSERT_EQ(std::size(texts), KnobTable().size());
  for (auto [key, text] : texts) {
    const KnobInfo* info = FindKnob(key);
    ASSERT_NE(info, nullptr) << key;
    ASSERT_TRUE(SetKnobFromText(k, *info, text).ok()) << key;
  }
  EXPECT_EQ(k.n_batch, 64);
  EXPECT_EQ(k.tensor_split, (std::vector<float>{3, 1}));
  EXPECT_EQ(k.repack, Repack::kOff);
  EXPECT_EQ(k.load, 3);
  EXPECT_EQ(k.replay, Replay::kServed);
  // The load and the replay are measuring conditions: no llama.cpp flag reproduces them.
  EXPECT_EQ(k.ToFlags(), "-fa off -ctk q8_0 -ctv q4_0 -b 64 -ub 32 -c 256 -t 3 -ngl 7 -sm row -ts 3,1 -dev CPU -nr");
  EXPECT_EQ(Knobs().ToFlags(), "-fa auto -ctk f16 -ctv f16 -b 2048 -ub 512");
  auto back = Knobs::FromJson(k.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->ToJson(), k.ToJson());
  EXPECT_EQ(SetKnobFromText(k, *FindKnob("threads"), "2x").message(), "'2x' is not an integer");
  EXPECT_EQ(SetKnobFromText(k, *FindKnob("tensor_split"), "3,a").message(), "'a' is not a number");
  EXPECT_EQ(Knobs::FromJson({{"threads", "two"}}).status().message(), "knob 'threads' must be an integer");
  // Named values are enums: a bad name is refused where it is read, saying what is accepted.
  EXPECT_EQ(Knobs::FromJson({{"repack", "maybe"}}).status().message(), "knob 'repack' must be on or off");
  EXPECT_EQ(Knobs::FromJson({{"flash_attn", 1}}).status().message(), "knob 'flash_attn' must be on, off or auto");
  EXPECT_EQ(SetKnobFromText(k, *FindKnob("split_mode"), "rows").message(), "'rows' is not none, layer, row or tensor");
  for (SplitMode m : {SplitMode::kNone, SplitMode::kLayer, SplitMode::kRow, SplitMode::kTensor}) {
    ASSERT_TRUE(SetKnobFromText(k, *FindKnob("split_mode"), std::string(ToString(m))).ok());
    EXPECT_EQ(k.split_mode, m);
  }
  // KV sizes are ggml's type traits (written out in knobs.cpp, which links no llama.cpp library).
  EXPECT_DOUBLE_EQ(KvTypeBytesPerElement(KvCacheType::kQ8_0), 34.0 / 32);
  EXPECT_DOUBLE_EQ(KvTypeBytesPerElement(KvCacheType::kQ4_1), 20.0 / 32);
  EXPECT_DOUBLE_EQ(KvTypeBytesPerElement(KvCacheType::kBF16), 2.0);
}

// The table sets a knob from a typed value: the alternative its member holds (a name, a count, a
// list of fractions), any other refused with what was expected; every knob's own value sets it back.
TEST(Knobs, TableSetsTypedValues) {
  Knobs k;
  EXPECT_TRUE(FindKnob("threads")->set(k, KnobValue(int64_t(5))).ok());
  EXPECT_EQ(k.n_threads, 5);
  EXPECT_EQ(FindKnob("threads")->set(k, KnobValue(5.0)).message(), "an integer");
  EXPECT_EQ(FindKnob("device")->set(k, KnobValue(int64_t(1))).message(), "a string");
  EXPECT_EQ(FindKnob("tensor_split")->set(k, KnobValue(nullptr)).message(), "a list of numbers");
  EXPECT_TRUE(FindKnob("tensor_split")->set(k, KnobValue(std::vector<double>{0.25, 0.75})).ok());
  EXPECT_EQ(k.tensor_split, (std::vector<float>{0.25f, 0.75f}));
  EXPECT_EQ(FindKnob("split_mode")->set(k, KnobValue(true)).message(), "none, layer, row or tensor");
  const Status kv = FindKnob("cache_type_v")->set(k, KnobValue(int64_t(8)));
  EXPECT_EQ(kv.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(kv.message().find("unknown KV cache type '8' for cache_type_v (-ctv)"), std::string::npos) << kv.message();
  Knobs set;
  set.flash_attn = FlashAttn::kOff, set.cache_type_k = KvCacheType::kQ8_0, set.devices = "CPU", set.load = 2;
  Knobs copy;
  for (const KnobInfo& info : KnobTable()) ASSERT_TRUE(info.set(copy, info.get(set)).ok()) << info.key;
  EXPECT_EQ(copy.Values(), set.Values());
}

// Every KV cache type's bytes per element is what the pinned ggml says, found by its name.
TEST(Knobs, KvBytesPerElementAreGgmlsTypeTraits) {
  for (KvCacheType t : KvCacheTypes()) {
    int found = 0;
    for (int g = 0; g < GGML_TYPE_COUNT; ++g) {
      const char* name = ggml_type_name(ggml_type(g));
      if (name == nullptr || NameOf(t) != name) continue;
      ++found;
      EXPECT_DOUBLE_EQ(KvTypeBytesPerElement(t),
                       double(ggml_type_size(ggml_type(g))) / double(ggml_blck_size(ggml_type(g))))
          << name;
    }
    EXPECT_EQ(found, 1) << NameOf(t);
  }
}

// With --repack off no weight sits in an extra buffer type (whatever this CPU could repack).
TEST(LlamaEngine, RepackOffKeepsWeightsInPlainBuffers) {
  fixtures::TinyModelOptions q8;
  q8.matrix_type = "q8_0";
  std::string model = fixtures::TempPath("engine-tiny-q8.gguf");
  ASSERT_TRUE(fixtures::WriteTinyModel(model, q8).ok());
  Knobs k = CpuKnobs();
  k.repack = Repack::kOff;
  auto e = LlamaEngine::Create(model, k);
  ASSERT_TRUE(e.ok()) << e.status().message();
  const auto kp = ToJson((*e)->Describe())["kernel_path"];
  EXPECT_EQ(kp["extra_buffer_types"], nlohmann::json::array()) << kp.dump();
  EXPECT_FALSE(kp["weight_buffers"].empty()) << kp.dump();
  EXPECT_NE(ToJson((*e)->Describe())["flags"].get<std::string>().find("-nr"), std::string::npos);
}

// ggml's variables change its kernels (GGML_CUDA_DISABLE_FUSION): the engine records those set,
// and only those, and its record reads them back.
TEST(LlamaEngine, RecordsTheGgmlVariablesItRanUnder) {
  std::string model = fixtures::TempPath("engine-tiny-env.gguf");
  ASSERT_TRUE(fixtures::WriteTinyModel(model, {}).ok());
  unsetenv("GGML_FLIPSCOPE_TEST");
  auto plain = LlamaEngine::Create(model, CpuKnobs());
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_FALSE(EngineRecord::Of(ToJson((*plain)->Describe())).env.count("GGML_FLIPSCOPE_TEST"));
  setenv("GGML_FLIPSCOPE_TEST", "1", 1);
  setenv("FLIPSCOPE_UNRELATED_TEST", "1", 1);
  auto e = LlamaEngine::Create(model, CpuKnobs());
  const EngineRecord rec = e.ok() ? EngineRecord::Of(ToJson((*e)->Describe())) : EngineRecord{};
  unsetenv("GGML_FLIPSCOPE_TEST");
  unsetenv("FLIPSCOPE_UNRELATED_TEST");
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(rec.env.at("GGML_FLIPSCOPE_TEST"), "1");
  EXPECT_FALSE(rec.env.count("FLIPSCOPE_UNRELATED_TEST"));
}

TEST(WeightBuffers, ReadsLlamaCppsLoadLog) {
  auto b = WeightBuffers(
      "load_tensors:   CPU_REPACK model buffer size =    52.50 MiB\n"
      "load_tensors:   CPU_Mapped model buffer size =    98.12 MiB\nother line\n");
  EXPECT_EQ(b, (WeightBufferSizes{{"CPU_REPACK", 52.5}, {"CPU_Mapped", 98.12}}));
  const KernelPathRecord k = KernelPath(b);
  EXPECT_EQ(k.extra_buffer_types, std::vector<std::string>{"CPU_REPACK"});
  EXPECT_NE(k.summary.find("weights in CPU_Mapped, CPU_REPACK"), std::string::npos) << k.summary;
}

// The vectorized argmax gives the serial rule's answer on rows with ties, NaNs, signed zeros and
// lengths around its lane count.
TEST(Argmax, SameAsTheSerialChainOnAwkwardRows) {
  auto chain = [](const std::vector<float>& row) {
    int32_t best = 0;
    for (size_t i = 1; i < row.size(); ++i)
      if (row[i] > row[size_t(best)]) best = int32_t(i);
    return best;
  };
  std::mt19937 rng(7);
  for (size_t n : {1, 2, 15, 16, 17, 31, 33, 1000, 262144}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> row(n);
      for (float& v : row) v = float(int(rng() % 9)) - 4.0f;  // many ties
      if (trial % 4 == 1) row[rng() % n] = NAN;
      if (trial % 4 == 2) row[0] = NAN;
      if (trial % 4 == 3) row[rng() % n] = -0.0f, row[rng() % n] = 0.0f;
      EXPECT_EQ(ArgmaxLowest(row), chain(row)) << n << " " << trial;
    }
  }
}

TEST(Argmax, TiesGoToLowestId) {
  std::vector<float> row = {1, 3, 3, 2};
  EXPECT_EQ(ArgmaxLowest(row), 1);
}

TEST(LlamaEngine, PrefillGivesProbeRowsInOrder) {
  auto e = LlamaEngine::Create(fixtures::DefaultTinyModel(), CpuKnobs());
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ((*e)->n_vocab(), 5 + 256 + 10 + 26 + 10);
  auto tokens = fixtures::TinyTokens(100);
  std::vector<int32_t> probes = {0, 31, 63, 99}, seen;
  Status st = (*e)->Prefill(
      tokens, probes,
      [&](const Row& r) {
        EXPECT_EQ(r.index, int64_t(seen.size()));
        // Without a fork planner the greedy token is left to the sink (Row::argmax -1).
        EXPECT_EQ(r.argmax, -1);
        seen.push_back(r.position);
        return Status::Ok();
      },
      nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(seen, probes);
  auto d = ToJson((*e)->Describe());
  EXPECT_EQ(d["knobs"]["ctx_size"], 256);
}

// -fa auto is resolved by llama.cpp's rules and its device probe (ResolveKnobs). The CPU backend
// supports flash attention, so auto must be recorded as on and give fa-on's rows bit for bit.
TEST(LlamaEngine, FlashAttentionAutoResolvesToOnOnTheCpu) {
  Knobs a = CpuKnobs(), on = CpuKnobs(), off = CpuKnobs();
  a.flash_attn = FlashAttn::kAuto;
  on.flash_attn = FlashAttn::kOn;
  off.flash_attn = FlashAttn::kOff;
  auto e = LlamaEngine::Create(fixtures::DefaultTinyModel(), a);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(ToJson((*e)->Describe())["knobs"]["flash_attn"], "on");
  auto tokens = fixtures::TinyTokens(150);
  std::vector<int32_t> probes = {10, 70, 149};
  EXPECT_EQ(Digests(a, tokens, probes), Digests(on, tokens, probes));
  EXPECT_NE(Digests(on, tokens, probes), Digests(off, tokens, probes));  // the knob matters here
}

TEST(LlamaEngine, RepeatIsBitForBit) {
  auto tokens = fixtures::TinyTokens(150);
  std::vector<int32_t> probes = {10, 70, 149};
  EXPECT_EQ(Digests(CpuKnobs(), tokens, probes), Digests(CpuKnobs(), tokens, probes));
}

TEST(LlamaEngine, KvQuantizationChangesRows) {
  auto tokens = fixtures::TinyTokens(150);
  std::vector<int32_t> probes = {70, 149};
  Knobs q = CpuKnobs();
  q.flash_attn = FlashAttn::kOn;
  q.cache_type_k = q.cache_type_v = KvCacheType::kQ4_0;
  Knobs f = CpuKnobs();
  f.flash_attn = FlashAttn::kOn;
  EXPECT_NE(Digests(f, tokens, probes), Digests(q, tokens, probes));
}

TEST(LlamaEngine, WorkloadLongerThanContextIsAnError) {
  auto e = LlamaEngine::Create(fixtures::DefaultTinyModel(), CpuKnobs());
  ASSERT_TRUE(e.ok());
  Status st = (*e)->Prefill(
      fixtures::TinyTokens(300), std::vector<int32_t>{1}, [](const Row&) { return Status::Ok(); }, nullptr);
  EXPECT_NE(st.message().find("more than the context"), std::string::npos);
}

TEST(LlamaEngine, ForkMatchesFreshDecodeAndKeepsRows) {
  auto tokens = fixtures::TinyTokens(120);
  std::vector<int32_t> probes = {20, 50, 119};
  Knobs k = CpuKnobs();
  auto plain = Digests(k, tokens, probes);
  auto e = LlamaEngine::Create(fixtures::DefaultTinyModel(), k, 2);
  ASSERT_TRUE(e.ok());
  std::vector<ForkRequest> forks = {{20, 7}, {50, 9}};
  std::vector<Future> futures(2);
  std::vector<uint64_t> forked;
  Status st = (*e)->Prefill({.tokens = tokens,
                             .probes = probes,
                             .sink =
                                 [&](const Row& r) {
                                   forked.push_back(Digest64(r.logits.data(), r.logits.size_bytes()));
                                   return Status::Ok();
                                 },
                             .forks = forks,
                             .max_tokens = 8,
                             .fork_sink =
                                 [&](size_t i, const Future& f) {
                                   futures[i] = f;
                                   return Status::Ok();
                                 }});
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(forked, plain);  // forking does not disturb the teacher-forced rows
  for (size_t i = 0; i < forks.size(); ++i) {
    ASSERT_EQ(futures[i].tokens.size(), 8u);
    EXPECT_EQ(futures[i].tokens[0], forks[i].first);
    std::vector<int32_t> prefix(tokens.begin(), tokens.begin() + forks[i].position + 1);
    auto fresh = (*e)->DecodeFresh(prefix, forks[i].first, 8);
    ASSERT_TRUE(fresh.ok());
    EXPECT_EQ(fresh->tokens[0], forks[i].first);
    // A re-prefill runs other batch shapes than the teacher-forced pass: equal up to a near-tie.
    fixtures::ExpectSameGreedyFuture(std::vector<int>(fresh->tokens.begin(), fresh->tokens.end()),
                                     std::vector<double>(fresh->probs.begin(), fresh->probs.end()),
                                     std::vector<int>(futures[i].tokens.begin(), futures[i].tokens.end()),
                                     std::vector<double>(futures[i].probs.begin(), futures[i].probs.end()),
                                     "fork at " + std::to_string(forks[i].position));
  }
}

TEST(LlamaEngine, PlannedForksMatchFixedForks) {
  auto tokens = fixtures::TinyTokens(120);
  std::vector<int32_t> probes = {10, 20, 50, 90, 119};
  Knobs k = CpuKnobs();
  auto plain = Digests(k, tokens, probes);
  auto e = LlamaEngine::Create(fixtures::DefaultTinyModel(), k, 2);
  ASSERT_TRUE(e.ok());
  // The planner forks at two probes, from a token chosen by what it sees in the row.
  std::map<int32_t, int32_t> firsts;
  std::map<int32_t, Future> planned;
  std::vector<uint64_t> rows;
  Status st = (*e)->Prefill(
      {.tokens = tokens,
       .probes = probes,
       .sink =
           [&](const Row& r) {
             rows.push_back(Digest64(r.logits.data(), r.logits.size_bytes()));
             return Status::Ok();
           },
       .plan = [&](const Row& r) -> int32_t {
         // A planner gets the greedy token; independently of ArgmaxLowest: the standard library's
         // first maximum is the lowest id.
         EXPECT_EQ(r.argmax, int32_t(std::max_element(r.logits.begin(), r.logits.end()) - r.logits.begin()));
         if (r.position != 20 && r.position != 90) return -1;
         return firsts[r.position] = (r.argmax + 3) % int32_t(r.logits.size());
       },
       .max_tokens = 6,
       .planned_sink =
           [&](const ForkRequest& fr, const Future& f) {
             planned[fr.position] = f;
             return Status::Ok();
           }});
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(rows, plain);
  ASSERT_EQ(planned.size(), 2u);
  std::vector<ForkRequest> fixed = {{20, firsts[20]}, {90, firsts[90]}};
  std::vector<Future> futures(2);
  st = (*e)->Prefill({.tokens = tokens,
                      .probes = probes,
                      .sink = [](const Row&) { return Status::Ok(); },
                      .forks = fixed,
                      .max_tokens = 6,
                      .fork_sink =
                          [&](size_t i, const Future& f) {
                            futures[i] = f;
                            return Status::Ok();
                          }});
  ASSERT_TRUE(st.ok()) << st.message();
  for (size_t i = 0; i < fixed.size(); ++i) {
    EXPECT_EQ(planned[fixed[i].position].tokens, futures[i].tokens);
    EXPECT_EQ(planned[fixed[i].position].probs, futures[i].probs);
    EXPECT_EQ(planned[fixed[i].position].tokens[0], fixed[i].first);
  }
}

TEST(LlamaEngine, PlannedForksNeedTwoSequences) {
  auto e = LlamaEngine::Create(fixtures::DefaultTinyModel(), CpuKnobs());
  ASSERT_TRUE(e.ok());
  const std::vector<int32_t> tokens = fixtures::TinyTokens(40), probes = {5};
  Status st = (*e)->Prefill({.tokens = tokens,
                             .probes = probes,
                             .sink = [](const Row&) { return Status::Ok(); },
                             .plan = [](const Row&) { return 1; },
                             .max_tokens = 4,
                             .planned_sink = [](const ForkRequest&, const Future&) { return Status::Ok(); }});
  EXPECT_NE(st.message().find("n_seq_max"), std::string::npos);
}
