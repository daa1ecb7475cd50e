// An engine's records read from the files in the repository and written back are the same bytes:
// every engine block (llama, exact, openai) in the stored manifests and results files, and the
// served records of an HTTP engine. The blocks this version's engines write are modelled whole by
// the typed members (nothing kept aside as read).
#include "records/engine_records.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace flipscope {
namespace {

using nlohmann::json;

json Stored(const std::string& path) {
  std::ifstream in(std::string(FLIPSCOPE_SOURCE_DIR) + "/" + path);
  std::stringstream s;
  s << in.rdbuf();
  return json::parse(s.str());
}

// Every object under j that is an engine block: a string "engine" beside its flags or knobs.
void EngineBlocks(const json& j, std::vector<json>* out) {
  if (j.is_object()) {
    if (j.contains("engine") && j["engine"].is_string() && (j.contains("flags") || j.contains("knobs")))
      out->push_back(j);
    for (const auto& v : j) EngineBlocks(v, out);
  } else if (j.is_array()) {
    for (const auto& v : j) EngineBlocks(v, out);
  }
}

bool Whole(const AsRead& a) { return a.missing.empty() && a.differing.is_null(); }

// The stored manifest's engine block (flipscope 0.1.0, before the llama.cpp source was recorded).
TEST(EngineRecords, TheStoredManifestsEngineIsModelledWhole) {
  for (const char* path : {"tests/data/capture-manifest-v1.json"}) {
    const json stored = Stored(path).at("engine");
    const auto d = EngineDescriptionFromJson(stored);
    ASSERT_TRUE(d) << path;
    ASSERT_TRUE(std::holds_alternative<LlamaEngineFacts>(d->facts)) << path;
    EXPECT_TRUE(Whole(d->as_read)) << path << ": " << d->as_read.differing.get().dump();
    // Without what was read aside, too: the typed members alone write the stored bytes.
    EngineDescription typed = *d;
    typed.as_read = {};
    EXPECT_EQ(ToJson(typed).dump(), stored.dump()) << path;
    const auto& llama = std::get<LlamaEngineFacts>(d->facts);
    EXPECT_FALSE(llama.source);
    EXPECT_EQ(llama.kernel_path.weight_buffers.at("CPU_Mapped"), 92.1);
    ASSERT_EQ(llama.resolved.size(), 4u);
    EXPECT_EQ(llama.resolved[0].key, "ctx_size");
    EXPECT_EQ(llama.resolved[0].requested, KnobValue(int64_t(0)));
    EXPECT_EQ(d->knobs.at("flash_attn"), KnobValue(std::string("on")));
  }
}

TEST(EngineRecords, EveryStoredEngineBlockWritesBackByteForByte) {
  const char* files[] = {"tests/data/capture-manifest-v1.json",
                         "tests/data/results-v0.1.0.json",
                         "docs/gpu/results.json",
                         "docs/gpu/gemma/results.json",
                         "docs/gpu/h200-2026-12-02/exact-run-results.json",
                         "docs/gpu/h200-2026-12-02/load-results.json",
                         "docs/gpu/h200-2026-12-02/vllm-forks-results.json",
                         "docs/gpu/h200-2026-12-02b/vllm-forks-gemma-results.json",
                         "docs/gpu/h200-2026-12-03/served-served-results.json",
                         "docs/gpu/h200-2026-12-03d/vllm-served-forks-results.json",
                         "fuzz/corpus/fuzz_results/results-v0.1.0.json"};
  std::map<std::string, int> blocks, whole;
  for (const char* path : files) {
    std::vector<json> found;
    EngineBlocks(Stored(path), &found);
    EXPECT_FALSE(found.empty()) << path;
    for (const json& block : found) {
      const auto d = EngineDescriptionFromJson(block);
      ASSERT_TRUE(d) << path;
      EXPECT_EQ(ToJson(*d).dump(), block.dump()) << path;
      const std::string kind = block["engine"].get<std::string>();
      ++blocks[kind];
      whole[kind] += Whole(d->as_read);
    }
  }
  // Each engine's blocks were read, and most of them whole by their typed members (older
  // versions wrote a few keys otherwise).
  for (const char* kind : {"llama", "exact", "openai"}) {
    EXPECT_GT(blocks[kind], 0) << kind;
    EXPECT_GT(whole[kind], 0) << kind;
  }
  EXPECT_FALSE(EngineDescriptionFromJson(json("llama")));
}

TEST(EngineRecords, AnUnknownEngineIsKeptAsRead) {
  const json block = {{"engine", "tpu"}, {"flags", "-x"}, {"knobs", {{"a", {{"b", 1}}}}}, {"chips", 8}};
  const auto d = EngineDescriptionFromJson(block);
  ASSERT_TRUE(d);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(d->facts));
  EXPECT_EQ(ToJson(*d).dump(), block.dump());
  EXPECT_EQ(d->flags, "-x");
}

TEST(EngineRecords, TheServedRecordsOfAServerWriteBackAsStored) {
  const json stored = Stored("docs/gpu/h200-2026-12-03c/served-records.json");
  int read = 0;
  for (const auto& [name, entry] : stored.items()) {
    json served = entry.at("served");
    // The capture stage's own key beside the engine's record.
    served.erase("planned_probes");
    const auto r = ServerServedRecordFromJson(served);
    ASSERT_TRUE(r) << name;
    EXPECT_EQ(ToJson(*r).dump(), served.dump()) << name;
    EXPECT_EQ(r->positions.size(), r->source.size()) << name;
    ++read;
  }
  EXPECT_EQ(read, 2);
}

TEST(EngineRecords, LoadRecordsOfBothEnginesRoundTrip) {
  LlamaLoadRecord l{.fillers = 2,
                    .seed = 7,
                    .cells_per_filler = 64,
                    .context_batch = 2176,
                    .jobs = {},
                    .jobs_total = 5,
                    .batches = {{1, 24, 15}},
                    .batches_total = 9};
  l.jobs.push_back({.slot = 1,
                    .job = 0,
                    .source = "workload",
                    .offset = 3,
                    .length = 20,
                    .generate = 4,
                    .chunk = 16,
                    .warm = false,
                    .prefilled = 20,
                    .generated = 4});
  const json lj = ToJson(EngineLoadRecord(l));
  EXPECT_EQ(lj["batches"].dump(), "[[1,24,15]]");
  EXPECT_EQ(lj["batches_columns"].dump(), R"(["decoding","measured","prefilling"])");
  const auto lback = EngineLoadRecordFromJson(lj);
  ASSERT_TRUE(lback && std::holds_alternative<LlamaLoadRecord>(*lback));
  EXPECT_EQ(ToJson(*lback).dump(), lj.dump());

  ServerLoadRecord s{.fillers = 1,
                     .seed = 0,
                     .cells_per_filler = 16,
                     .measured_start_s = 0.25,
                     .measured_end_s = 1.5,
                     .overlapping = 1,
                     .requests = {}};
  s.requests.push_back({.slot = 1,
                        .job = 0,
                        .source = "workload",
                        .offset = 0,
                        .length = 9,
                        .generate = 2,
                        .start_s = 0,
                        .end_s = 0.5,
                        .status = std::nullopt});
  const json sj = ToJson(EngineLoadRecord(s));
  EXPECT_TRUE(sj["requests"][0]["status"].is_null());
  EXPECT_FALSE(sj["requests"][0].contains("warm"));
  const auto sback = EngineLoadRecordFromJson(sj);
  ASSERT_TRUE(sback && std::holds_alternative<ServerLoadRecord>(*sback));
  EXPECT_EQ(ToJson(*sback).dump(), sj.dump());
}

TEST(EngineRecords, KnobValuesKeepTheirJsonTypes) {
  const json knobs = {{"threads", 4}, {"flash_attn", "on"}, {"tensor_split", {0.75, 0.25}},
                      {"x", nullptr}, {"swa", true},        {"frac", 0.5}};
  const KnobValues v = KnobValuesFromJson(knobs);
  EXPECT_EQ(ToJson(v).dump(), knobs.dump());
  EXPECT_EQ(KnobText(v.at("threads")), "4");
  EXPECT_EQ(KnobText(v.at("flash_attn")), "on");
  EXPECT_EQ(ToJson(KnobValues{}).dump(), "{}");
}

}  // namespace
}  // namespace flipscope
