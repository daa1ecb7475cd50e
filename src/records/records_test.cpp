// The records' serializers write what the engines have always written: the blocks of a stored
// manifest (tests/data/capture-manifest-v1.json, flipscope 0.1.0) rebuilt from typed records are
// the same bytes; the modes' names are the files' words.
#include "records/records.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace flipscope {
namespace {

using nlohmann::json;

json StoredEngine() {
  std::ifstream in(std::string(FLIPSCOPE_SOURCE_DIR) + "/tests/data/capture-manifest-v1.json");
  std::stringstream s;
  s << in.rdbuf();
  return json::parse(s.str()).at("engine");
}

TEST(Records, TheKernelPathIsWrittenAsStored) {
  const json stored = StoredEngine().at("kernel_path");
  KernelPathRecord k;
  k.cpu_features = stored.at("cpu_features").get<std::vector<std::string>>();
  k.llama_build = stored.at("llama_build").get<std::string>();
  k.weight_buffers = stored.at("weight_buffers").get<WeightBufferSizes>();
  k.extra_buffer_types = stored.at("extra_buffer_types").get<std::vector<std::string>>();
  k.summary = stored.at("summary").get<std::string>();
  EXPECT_EQ(ToJson(k).dump(), stored.dump());
}

TEST(Records, DevicesReadAndWriteBackAsStored) {
  const json stored = StoredEngine().at("devices");
  const std::vector<EngineDevice> devices = EngineDevicesFromJson(stored);
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].name, "CPU");
  EXPECT_EQ(devices[0].memory_total.value_or(0), 25275990016.0);
  // Whole bytes, as ggml reports them, not a floating-point number.
  EXPECT_EQ(ToJson(devices).dump(), stored.dump());
  EXPECT_TRUE(EngineDevicesFromJson(json("x")).empty());
}

TEST(Records, TheSourceRoundTrips) {
  const EngineSource s{"llama-cpp-python 0.3.36", "abc123", "cpu cpu=native amx=OFF"};
  const json j = ToJson(s);
  EXPECT_EQ(j.dump(), R"({"build":"cpu cpu=native amx=OFF","commit":"abc123","release":"llama-cpp-python 0.3.36"})");
  const std::optional<EngineSource> back = EngineSourceFromJson(j);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->release, s.release);
  EXPECT_EQ(back->commit, s.commit);
  EXPECT_EQ(back->build, s.build);
  EXPECT_FALSE(EngineSourceFromJson(json(nullptr)));
  EXPECT_EQ(EngineSourceFromJson(json{{"commit", 7}})->commit, "");  // mistyped: empty
}

TEST(Records, PartTimesWriteTheOptionalPartsOnlyWhenSet) {
  PassPartTimes t;
  t.embed_s = 0.5, t.rows_s = 2;
  json j = ToJson(t);
  EXPECT_EQ(j.size(), 7u);
  EXPECT_EQ(j["rows_s"], 2.0);
  EXPECT_FALSE(j.contains("recurrent_s"));
  t.recurrent_s = 1.25, t.device_memory_gib = 3;
  j = ToJson(t);
  EXPECT_EQ(j["recurrent_s"], 1.25);
  EXPECT_EQ(j["device_memory_gib"], 3.0);
}

TEST(Records, TimingsReadAndWriteBackAsStored) {
  std::ifstream in(std::string(FLIPSCOPE_SOURCE_DIR) + "/tests/data/capture-manifest-v1.json");
  std::stringstream text;
  text << in.rdbuf();
  const json stored = json::parse(text.str()).at("timings");
  const auto t = CaptureTimingsFromJson(stored);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->prefill_s, stored.at("prefill_s").get<double>());
  EXPECT_EQ(t->forks, 0);
  EXPECT_FALSE(t->parts.has_value());
  EXPECT_EQ(ToJson(*t).dump(), stored.dump());
  // The exact engine's parts come back with their optional ones; the forks stay a whole number.
  CaptureTimings e{.prefill_s = 2.5, .tokens_per_s = 40, .forks = 3, .parts = PassPartTimes{.attention_s = 1.25}};
  e.parts->device_memory_gib = 38.0;
  const json written = ToJson(e);
  EXPECT_TRUE(written.at("forks").is_number_integer());
  EXPECT_FALSE(written.at("parts").contains("recurrent_s"));
  const auto back = CaptureTimingsFromJson(written);
  ASSERT_TRUE(back && back->parts);
  EXPECT_EQ(back->parts->attention_s, 1.25);
  EXPECT_EQ(back->parts->device_memory_gib, 38.0);
  EXPECT_EQ(ToJson(*back).dump(), written.dump());
  // Another writer's wrong types read as absent, never throw.
  EXPECT_FALSE(CaptureTimingsFromJson(json::array()).has_value());
  EXPECT_EQ(CaptureTimingsFromJson(json{{"prefill_s", "fast"}})->prefill_s, 0);
}

TEST(Records, TheServedPlanKeepsItsCountsWhole) {
  ServedPlan p;
  p.fed_singly = 57, p.decode_calls = 80, p.written_runs = 3, p.decode_s = 0.25, p.decode_tokens_per_s = 228;
  const json j = ToJson(p);
  EXPECT_TRUE(j["fed_singly"].is_number_integer());
  EXPECT_EQ(j["fed_singly"], 57);
  EXPECT_EQ(j["decode_calls"], 80);
  EXPECT_EQ(j["written_runs"], 3);
  EXPECT_TRUE(j["decode_tokens_per_s"].is_number_float());
  EXPECT_EQ(j.size(), 8u);
}

TEST(Records, ModesAreSpelledAsFilesHaveThem) {
  EXPECT_EQ(NameOf(Replay::kServed), "served");
  EXPECT_EQ(NameOf(Outcome::kDifferentButFine), "different_but_fine");
  EXPECT_EQ(FromName<Failure>("invented_fact"), Failure::kInventedFact);
  EXPECT_EQ(FromName<Verdict>("total"), std::nullopt);
  EXPECT_FALSE(ParseName<ForkScope>("everywhere", "fork_where").ok());
  EXPECT_FALSE(FlipscopeVersion().empty());
}

TEST(Records, TheLoadFloorSummaryIsItsDocument) {
  LoadFloorRecord f;
  f.alone = "q8.safetensors", f.load = 2, f.load_seed = 7, f.of = 2, f.bit_identical_repeats = 1;
  f.summary_path = "q8.load.json";
  f.repeats.push_back({"q8.load1.safetensors", 4, 4, 0, true, {}});
  f.repeats.push_back({"q8.load2.safetensors", 4, 3, 1, false, {{12, 5, 9}}});
  EXPECT_EQ(ToJson(f).dump(),
            R"({"alone":"q8.safetensors","bit_identical_repeats":1,"load":2,"load_seed":7,"of":2,"repeats":[)"
            R"({"bit_identical":true,"capture":"q8.load1.safetensors","flipped":[],"flips":0,"identical_rows":4,)"
            R"("probes":4},{"bit_identical":false,"capture":"q8.load2.safetensors","flipped":[{"alone":5,)"
            R"("loaded":9,"position":12}],"flips":1,"identical_rows":3,"probes":4}]})");
}

}  // namespace
}  // namespace flipscope
