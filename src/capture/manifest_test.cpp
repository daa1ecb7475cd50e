// CaptureManifest against a manifest written by flipscope 0.1.0 (tests/data/capture-manifest-v1.json:
// SmolLM2 over a 5-message chat with one tool call, stride 4 and every tool-call position; the
// model path shortened to models/...): read into the struct and written back byte for byte.
#include "capture/manifest.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "util/util.h"

namespace flipscope {
namespace {

std::string StoredManifest() {
  auto text = ReadFile(std::string(FLIPSCOPE_SOURCE_DIR) + "/tests/data/capture-manifest-v1.json");
  EXPECT_TRUE(text.ok()) << text.status().message();
  return text.ok() ? *text : std::string();
}

// How the capture writer serializes a manifest into the file's __metadata__.
std::string Dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

TEST(CaptureManifest, ReadsTheStoredManifestAndWritesItBackByteForByte) {
  const std::string text = StoredManifest();
  const nlohmann::json j = nlohmann::json::parse(text);
  const CaptureManifest m = CaptureManifest::FromJson(j);
  EXPECT_EQ(Dump(m.ToJson()), text);
  EXPECT_EQ(m.raw, j);
  // The fields stages decide on.
  EXPECT_EQ(m.format, "flipscope.capture");
  EXPECT_EQ(m.tool_version, "0.1.0");
  EXPECT_EQ(m.model.path, "models/SmolLM2-135M-Instruct.Q4_1.gguf");
  EXPECT_EQ(m.model.sha256, "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53");
  EXPECT_EQ(m.model.architecture, "llama");
  EXPECT_EQ(m.model.n_vocab, 49152);
  EXPECT_EQ(m.model.n_layer, 30);
  EXPECT_EQ(m.tokenizer_sha256.size(), 64u);
  EXPECT_EQ(m.engine.name, "llama");
  EXPECT_EQ(m.engine.flags, "-fa on -ctk f16 -ctv f16 -b 2048 -ub 512 -c 8192 -t 1 -ngl 0 -nr");
  EXPECT_NE(m.engine.kernel_path.find("weights in CPU_Mapped"), std::string::npos) << m.engine.kernel_path;
  ASSERT_TRUE(m.parsed_knobs.ok()) << m.parsed_knobs.status().message();
  EXPECT_EQ(m.parsed_knobs->n_threads, 1);
  EXPECT_EQ(m.parsed_knobs->flash_attn, FlashAttn::kOn);
  EXPECT_EQ(m.replay, Replay::kPrefill);
  EXPECT_TRUE(m.workload.spans_status.ok());
  EXPECT_EQ(m.workload.spans.size(), 13u);
  EXPECT_FALSE(m.workload.record.contains("spans"));
  EXPECT_EQ(m.workload.record["n_tokens"], 288);
  EXPECT_EQ(m.workload.path, "chat.json");
  EXPECT_EQ(m.workload.tool_call_form, "<tool_call> in content");
  ASSERT_TRUE(m.workload.tools.is_array());
  EXPECT_EQ(m.workload.tools.size(), 1u);
  EXPECT_EQ(m.workload_options.format, WorkloadFormat::kAuto);
  EXPECT_EQ(m.workload_options.chat_template, "");
  ASSERT_TRUE(m.probe_plan);
  EXPECT_EQ(m.probe_plan->n_probes, 99);
  EXPECT_EQ(m.probe_plan->stride, 4);
  EXPECT_EQ(m.probe_plan->full, "tool_calls");
  EXPECT_EQ(m.NProbes(), 99);
  EXPECT_EQ(m.store, "f32");
  EXPECT_FALSE(m.truncated);
  EXPECT_EQ(m.topk, 0);
  EXPECT_TRUE(m.timings.has_value());
  EXPECT_FALSE(m.served);
  EXPECT_FALSE(m.load);
  ASSERT_TRUE(m.knobs);
  EXPECT_EQ(m.knobs->values.at("threads"), KnobValue(int64_t(1)));
  ASSERT_TRUE(m.request);
  EXPECT_EQ(m.request->model_sha256, m.model.sha256);
  EXPECT_EQ(m.request->stride, 4);
  EXPECT_EQ(m.request->full, "tool_calls");
  EXPECT_EQ(m.request->store, StoreDtype::kF32);
  EXPECT_EQ(m.request->engine, EngineKind::kLlama);
  EXPECT_EQ(m.request->knobs.at("threads"), KnobValue(int64_t(1)));
  EXPECT_EQ(m.request->tool_version, "0.1.0");
  EXPECT_TRUE(m.request->as_read.missing.empty());
  EXPECT_TRUE(m.request->as_read.differing.is_null());
}

TEST(CaptureManifest, ATopKCaptureCarriesItsTruncationNote) {
  CaptureManifest m = CaptureManifest::FromJson(nlohmann::json::parse(StoredManifest()));
  m.truncated = true;
  m.topk = 20;
  const nlohmann::json j = m.ToJson();
  EXPECT_EQ(j["truncation"]["k"], 20);
  EXPECT_NE(j["truncation"]["note"].get<std::string>().find("tail-bucket estimate"), std::string::npos);
  EXPECT_FALSE(j.contains("served"));
  EXPECT_FALSE(j.contains("load"));
}

// Another writer's or an edited manifest: a missing block or one of the wrong type reads as
// absent, never throws; unreadable spans are kept as a status for the stages that need them.
TEST(CaptureManifest, ReadsForeignAndEditedManifestsTolerantly) {
  const CaptureManifest empty = CaptureManifest::FromJson(nlohmann::json::object());
  EXPECT_TRUE(empty.model.path.empty());
  EXPECT_EQ(empty.model.n_vocab, 0);
  EXPECT_TRUE(empty.engine.name.empty());
  EXPECT_FALSE(empty.knobs);
  EXPECT_FALSE(empty.parsed_knobs.ok());
  EXPECT_EQ(empty.replay, Replay::kPrefill);
  EXPECT_TRUE(empty.workload.spans_status.ok());
  EXPECT_TRUE(empty.workload.tools.is_null());
  EXPECT_EQ(empty.workload_options.format, WorkloadFormat::kAuto);

  const CaptureManifest odd = CaptureManifest::FromJson({{"model", {{"n_vocab", "many"}, {"path", 7}}},
                                                         {"engine", {{"name", "exact"}}},
                                                         {"workload", {{"spans", 7}, {"tools", {1}}}},
                                                         {"knobs", {{"threads", "x"}}},
                                                         {"timings", 3},
                                                         {"created", 1}});
  EXPECT_EQ(odd.model.n_vocab, 0);
  EXPECT_TRUE(odd.model.path.empty());
  EXPECT_EQ(odd.engine.name, "exact");  // older exact captures name their engine under "name"
  EXPECT_FALSE(odd.workload.spans_status.ok());
  EXPECT_TRUE(odd.workload.spans.empty());
  EXPECT_EQ(odd.workload.tools, nlohmann::json({1}));
  EXPECT_FALSE(odd.parsed_knobs.ok());
  EXPECT_TRUE(odd.created.empty());
}

// Every capture manifest kept in the source tree (tests/data and the fuzz corpus: flipscope's,
// written with bf16 and f32 rows, over a chat) is read and written out as a manifest that reads
// back and writes out byte for byte; the stored v1 manifest is that manifest already.
TEST(CaptureManifest, EveryManifestInTheTreeRoundTrips) {
  namespace fs = std::filesystem;
  const fs::path root(FLIPSCOPE_SOURCE_DIR);
  int n = 0;
  for (const char* dir : {"tests/data", "fuzz/corpus/fuzz_manifest"})
    for (const auto& e : fs::directory_iterator(root / dir)) {
      if (e.path().extension() != ".json") continue;
      auto text = ReadFile(e.path().string());
      ASSERT_TRUE(text.ok()) << text.status().message();
      const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
      if (!j.is_object() || j.value("format", "") != "flipscope.capture") continue;
      ++n;
      const std::string once = Dump(CaptureManifest::FromJson(j).ToJson());
      EXPECT_EQ(Dump(CaptureManifest::FromJson(nlohmann::json::parse(once)).ToJson()), once) << e.path();
      // The older ones (the fuzz corpus's) gain the model facts written since (sliding_window).
      if (e.path().filename() == "capture-manifest-v1.json") {
        EXPECT_EQ(once, *text);
      }
    }
  EXPECT_GE(n, 4);
}

// The served and load blocks are typed: a manifest holding the llama engine's plan and load
// record writes them, reads them back and writes the same bytes.
TEST(CaptureManifest, ServedAndLoadBlocksAreTypedAndRoundTrip) {
  CaptureManifest m = CaptureManifest::FromJson(nlohmann::json::parse(StoredManifest()));
  ServedPlan plan;
  plan.fed_singly = 12, plan.decode_calls = 13, plan.written_tokens = 14, plan.decode_s = 0.5;
  m.served = ManifestServed{.record = plan, .rule = "the rule", .note = "", .planned_probes = {}, .as_read = {}};
  LlamaLoadRecord load{.fillers = 2,
                       .seed = 3,
                       .cells_per_filler = 64,
                       .context_batch = 2176,
                       .jobs = {},
                       .jobs_total = 4,
                       .batches = {{1, 2, 3}},
                       .batches_total = 5};
  m.load = ManifestLoad{.record = load, .sources = {{"workload", "chat.json", {}, {}}}, .as_read = {}};
  const std::string once = Dump(m.ToJson());
  const CaptureManifest back = CaptureManifest::FromJson(nlohmann::json::parse(once));
  EXPECT_EQ(Dump(back.ToJson()), once);
  ASSERT_TRUE(back.served && back.load);
  EXPECT_EQ(back.FedSingly(), 12);
  EXPECT_EQ(back.served->rule, "the rule");
  EXPECT_TRUE(back.served->note.empty());
  ASSERT_TRUE(std::holds_alternative<LlamaLoadRecord>(back.load->record));
  EXPECT_EQ(std::get<LlamaLoadRecord>(back.load->record).batches_total, 5);
  ASSERT_EQ(back.load->sources.size(), 1u);
  EXPECT_EQ(back.load->sources[0].path, "chat.json");
  EXPECT_FALSE(back.load->sources[0].sha256);
}

// An HTTP engine's served block as a capture stored it (vLLM, docs/gpu): read typed whole and
// written back byte for byte; a block another writer changed is kept as read.
TEST(CaptureManifest, AServersServedBlockReadsTypedAndWritesBackAsStored) {
  auto text = ReadFile(std::string(FLIPSCOPE_SOURCE_DIR) + "/docs/gpu/h200-2026-12-03c/served-records.json");
  ASSERT_TRUE(text.ok()) << text.status().message();
  const nlohmann::json stored = nlohmann::json::parse(*text).at("bf16").at("served");
  nlohmann::json j = nlohmann::json::parse(StoredManifest());
  j["served"] = stored;
  const CaptureManifest m = CaptureManifest::FromJson(j);
  ASSERT_TRUE(m.served);
  ASSERT_TRUE(std::holds_alternative<ServerServedRecord>(m.served->record));
  EXPECT_TRUE(m.served->as_read.missing.empty());
  EXPECT_TRUE(m.served->as_read.differing.is_null());
  EXPECT_EQ(m.served->planned_probes, stored.at("planned_probes").get<int64_t>());
  EXPECT_FALSE(m.FedSingly());
  EXPECT_EQ(Dump(m.ToJson()), Dump(j));

  j["served"] = {{"fed_singly", "many"}, {"decode_calls", 3}, {"from", "elsewhere"}};
  j["load"] = {{"fillers", 1}, {"requests", 7}};
  j["probe_plan"] = {{"stride", 4}};
  const CaptureManifest odd = CaptureManifest::FromJson(j);
  EXPECT_EQ(Dump(odd.ToJson()), Dump(j));
  EXPECT_EQ(odd.FedSingly(), 0);  // mistyped: read as 0, written back as it was
}

// Every request block kept in the tree reads typed whole (nothing left to AsRead) and writes back
// byte for byte; a request another writer changed (an unknown key, an unknown format, a mistyped
// probe plan) writes back as stored and is not the same request as the one it was edited from.
TEST(CaptureManifest, RequestsReadTypedAndWriteBackAsStored) {
  namespace fs = std::filesystem;
  int n = 0;
  for (const char* dir : {"tests/data", "fuzz/corpus/fuzz_manifest"})
    for (const auto& e : fs::directory_iterator(fs::path(FLIPSCOPE_SOURCE_DIR) / dir)) {
      if (e.path().extension() != ".json") continue;
      auto text = ReadFile(e.path().string());
      ASSERT_TRUE(text.ok()) << text.status().message();
      const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
      if (!j.is_object() || !j.contains("request") || !j["request"].is_object()) continue;
      ++n;
      const CaptureManifest m = CaptureManifest::FromJson(j);
      ASSERT_TRUE(m.request) << e.path();
      EXPECT_TRUE(m.request->as_read.missing.empty()) << e.path();
      EXPECT_TRUE(m.request->as_read.differing.is_null()) << e.path();
      EXPECT_EQ(Dump(ToJson(*m.request)), Dump(j["request"])) << e.path();
      EXPECT_EQ(Dump(m.ToJson()["request"]), Dump(j["request"])) << e.path();
    }
  EXPECT_GE(n, 4);

  nlohmann::json j = nlohmann::json::parse(StoredManifest());
  const CaptureManifest stored = CaptureManifest::FromJson(j);
  j["request"]["later"] = {{"key", 1}};
  j["request"]["format"] = "yaml";
  j["request"]["probe_plan"] = {{"stride", "4"}};
  j["request"]["engine"] = "llama";
  const CaptureManifest edited = CaptureManifest::FromJson(j);
  ASSERT_TRUE(edited.request);
  EXPECT_EQ(Dump(edited.ToJson()), Dump(j));
  EXPECT_EQ(edited.workload_options.format, WorkloadFormat::kAuto);  // unknown: the default
  EXPECT_NE(*edited.request, *stored.request);
  ManifestRequest fresh = *stored.request;
  fresh.as_read = {};
  EXPECT_EQ(fresh, *stored.request);  // nothing of the stored one was left to AsRead

  j.erase("request");
  const CaptureManifest none = CaptureManifest::FromJson(j);
  EXPECT_FALSE(none.request);
  EXPECT_TRUE(none.ToJson()["request"].is_null());
}

}  // namespace
}  // namespace flipscope
