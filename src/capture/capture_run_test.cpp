#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "capture/capture.h"
#include "testing/tiny_model.h"
#include "util/util.h"

using namespace flipscope;
namespace fs = std::filesystem;

namespace {
struct Files {
  std::string model, workload, dir;
};
Files Make(const std::string& name) {
  Files f;
  f.dir = fixtures::TempPath("caprun-" + name);
  fs::remove_all(f.dir);
  fs::create_directories(f.dir);
  f.model = f.dir + "/tiny.gguf";
  EXPECT_TRUE(fixtures::WriteTinyModel(f.model).ok());
  f.workload = f.dir + "/work.txt";
  std::ofstream w(f.workload);
  for (int i = 0; i < 10; ++i) w << "show the port " << 5432 + i << " on the interface. ";
  return f;
}
CaptureRequest Request(const Files& f, const std::string& out) {
  CaptureRequest r;
  r.model_path = f.model;
  r.workload_path = f.workload;
  r.out_path = f.dir + "/" + out;
  r.knobs.n_threads = 1;
  r.plan.stride = 8;
  r.log.bars = false;
  return r;
}
}  // namespace

TEST(PlanProbes, StrideAndRanges) {
  std::vector<Span> spans;
  Span call;
  call.kind = SpanKind::kToolCall;
  call.begin = 20;
  call.end = 24;
  spans.push_back(call);
  auto p = PlanProbes({10, "tool_calls"}, 40, spans);
  ASSERT_TRUE(p.ok());
  // Stride: 0,10,20,30; the call's tokens 20..23 are predicted from positions 19..22.
  EXPECT_EQ(*p, (std::vector<int32_t>{0, 10, 19, 20, 21, 22, 30}));
  auto r = PlanProbes({100, "5-7,37-50"}, 40, spans);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<int32_t>{0, 5, 6, 7, 37, 38}));  // the last probe is n-2
  EXPECT_FALSE(PlanProbes({8, "7-3"}, 40, spans).ok());
  EXPECT_FALSE(PlanProbes({8, "tool_cals"}, 40, spans).ok());
  EXPECT_FALSE(PlanProbes({0, ""}, 40, spans).ok());
}

// ggml's variables (GGML_CUDA_DISABLE_FUSION) change its kernels: a capture made under them is
// another capture, and one made under none keeps the identity it had before they were recorded.
TEST(CaptureRequestOf, GgmlVariablesAreTheCapturesIdentity) {
  CaptureRequest req;
  unsetenv("GGML_FLIPSCOPE_TEST");
  const ManifestRequest plain = CaptureRequestOf(req, "m", "w");
  setenv("GGML_FLIPSCOPE_TEST", "1", 1);
  const ManifestRequest with = CaptureRequestOf(req, "m", "w");
  req.engine = EngineKind::kExact;
  const ManifestRequest exact = CaptureRequestOf(req, "m", "w");
  unsetenv("GGML_FLIPSCOPE_TEST");
  EXPECT_FALSE(plain.env.count("GGML_FLIPSCOPE_TEST")) << ToJson(plain).dump();
  EXPECT_EQ(with.env.at("GGML_FLIPSCOPE_TEST"), "1") << ToJson(with).dump();
  EXPECT_NE(plain, with);
  EXPECT_TRUE(exact.env.empty());  // the exact engine runs no ggml kernel
  EXPECT_FALSE(ToJson(exact).contains("env"));
}

// The request as the manifest records it: every knob but a prefill's replay for the llama engine,
// the threads (and a named device) for the exact one, a server's flags with a launched server's
// url replaced, and the load's texts; the keys a llama capture has always had and no others.
TEST(CaptureRequestOf, RecordsWhatDecidesTheRows) {
  CaptureRequest req;
  req.plan = {16, "tool_calls"};
  req.store = StoreDtype::kBF16;
  req.knobs.n_threads = 3;
  unsetenv("GGML_FLIPSCOPE_TEST");
  const ManifestRequest llama = CaptureRequestOf(req, "m", "w");
  EXPECT_EQ(llama.model_sha256, "m");
  EXPECT_EQ(llama.knobs.at("threads"), KnobValue(int64_t(3)));
  EXPECT_FALSE(llama.knobs.count("replay"));
  const nlohmann::json j = ToJson(llama);
  EXPECT_EQ(j["probe_plan"], nlohmann::json({{"stride", 16}, {"full", "tool_calls"}}));
  EXPECT_EQ(j["store"], "bf16");
  EXPECT_FALSE(j.contains("engine"));
  req.knobs.replay = Replay::kServed;
  EXPECT_EQ(CaptureRequestOf(req, "m", "w").knobs.at("replay"), KnobValue(std::string("served")));
  EXPECT_NE(CaptureRequestOf(req, "m", "w"), llama);

  req.knobs = Knobs{};
  req.knobs.n_threads = 2;
  req.knobs.devices = "CUDA0";
  req.engine = EngineKind::kExact;
  const ManifestRequest exact = CaptureRequestOf(req, "m", "w");
  EXPECT_EQ(ToJson(exact.knobs), nlohmann::json({{"threads", 2}, {"device", "CUDA0"}}));
  EXPECT_EQ(ToJson(exact)["engine"], "exact");

  req.engine = EngineKind::kOpenai;
  req.knobs = Knobs{};
  req.http.launch = {{"command", "vllm serve m"}};
  req.load_text = {"a.txt"};
  const ManifestRequest server = CaptureRequestOf(req, "m", "w");
  ASSERT_TRUE(server.http);
  EXPECT_NE(server.http->flags.find("http://launched"), std::string::npos) << server.http->flags;
  EXPECT_EQ(ToJson(server)["http"]["launch"]["command"], "vllm serve m");
  EXPECT_EQ(ToJson(server)["load_text"], nlohmann::json({"a.txt"}));
}

// ggml reads its variables once per process: a capture made under GGML_* values is re-run (branch,
// layers) only by a process under the same ones, and the refusal names both sets.
TEST(ReplayOf, NeedsTheGgmlVariablesTheCaptureRanUnder) {
  Files f = Make("replay-env");
  setenv("GGML_FLIPSCOPE_TEST", "1", 1);
  auto m = RunCapture(Request(f, "env.safetensors"));
  unsetenv("GGML_FLIPSCOPE_TEST");
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto cap = CaptureReader::Open(f.dir + "/env.safetensors");
  ASSERT_TRUE(cap.ok());
  EXPECT_EQ((*cap)->manifest().engine.env.at("GGML_FLIPSCOPE_TEST"), "1");
  std::map<std::string, std::string> hashes;
  auto refused = ReplayOf(**cap, "layers", &hashes);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("GGML_FLIPSCOPE_TEST=1, and this process runs under none set"),
            std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("env.safetensors"), std::string::npos);
  setenv("GGML_FLIPSCOPE_TEST", "1", 1);
  auto same = ReplayOf(**cap, "layers", &hashes);
  unsetenv("GGML_FLIPSCOPE_TEST");
  EXPECT_TRUE(same.ok()) << same.status().message();
}

TEST(RunCapture, RepeatIsBitForBitAndManifestIsComplete) {
  Files f = Make("repeat");
  auto a = RunCapture(Request(f, "a.safetensors"));
  ASSERT_TRUE(a.ok()) << a.status().message();
  auto b = RunCapture(Request(f, "b.safetensors"));
  ASSERT_TRUE(b.ok());
  auto ra = CaptureReader::Open(f.dir + "/a.safetensors");
  auto rb = CaptureReader::Open(f.dir + "/b.safetensors");
  ASSERT_TRUE(ra.ok() && rb.ok());
  const auto& A = **ra;
  const auto& B = **rb;
  ASSERT_EQ(A.positions().size(), B.positions().size());
  EXPECT_TRUE(std::equal(A.digest().begin(), A.digest().end(), B.digest().begin()));
  std::vector<float> x(size_t(A.n_vocab())), y(size_t(A.n_vocab()));
  for (int64_t i = 0; i < int64_t(A.positions().size()); ++i) {
    ASSERT_TRUE(A.ReadRow(i, x).ok());
    ASSERT_TRUE(B.ReadRow(i, y).ok());
    EXPECT_EQ(0, std::memcmp(x.data(), y.data(), x.size() * 4)) << i;
  }
  const auto& m = A.manifest().raw;
  for (const char* k : {"model", "workload", "engine", "knobs", "probe_plan", "timings", "request", "tokenizer_sha256"})
    EXPECT_TRUE(m.contains(k)) << k;
  EXPECT_EQ(m["model"]["sha256"], *Sha256File(f.model));
  // The kernel path: the CPU features ggml runs and the buffers that hold the weights.
  const auto& kp = m["engine"]["kernel_path"];
  EXPECT_FALSE(kp["cpu_features"].empty()) << kp.dump();
  EXPECT_FALSE(kp["weight_buffers"].empty()) << kp.dump();
  EXPECT_NE(kp["summary"].get<std::string>().find("weights in "), std::string::npos) << kp.dump();
  EXPECT_EQ(m["workload"]["n_tokens"].get<size_t>(), A.tokens().size());
}

TEST(RunCapture, BadInputsLeaveNoFile) {
  Files f = Make("bad");
  struct Case {
    std::string what;
    std::function<void(CaptureRequest&)> edit;
    std::string expect;
  };
  std::vector<Case> cases = {
      {"context", [](CaptureRequest& r) { r.knobs.n_ctx = 16; }, "do not fit the context"},
      {"v quant without fa",
       [](CaptureRequest& r) {
         r.knobs.cache_type_v = KvCacheType::kQ8_0;
         r.knobs.flash_attn = FlashAttn::kOff;
       },
       "needs flash attention"},
      {"model", [](CaptureRequest& r) { r.model_path = "/nonexistent.gguf"; }, "/nonexistent.gguf"},
      {"workload", [](CaptureRequest& r) { r.workload_path = "/nonexistent.json"; }, "/nonexistent.json"},
  };
  for (auto& c : cases) {
    CaptureRequest r = Request(f, "bad.safetensors");
    c.edit(r);
    auto m = RunCapture(r);
    ASSERT_FALSE(m.ok()) << c.what;
    EXPECT_NE(m.status().message().find(c.expect), std::string::npos) << c.what << ": " << m.status().message();
    EXPECT_FALSE(fs::exists(r.out_path)) << c.what;
  }
  for (auto& e : fs::directory_iterator(f.dir)) EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos);
  // An unknown KV cache type is refused where the knobs are read (flags, JSON, TOML), before a capture.
  EXPECT_NE(Knobs::FromJson({{"cache_type_k", "q3_k"}}).status().message().find("unknown KV cache type"),
            std::string::npos);
}

namespace {
// The manifest without the fields that record when and how long: all a prepared source may change.
nlohmann::json Untimed(nlohmann::json m) {
  m.erase("created");
  m.erase("timings");
  return m;
}
}  // namespace

TEST(RunCapture, APreparedSourceGivesTheSameCaptureEveryTime) {
  Files f = Make("source");
  CaptureRequest plain = Request(f, "plain.safetensors");
  auto a = RunCapture(plain);
  ASSERT_TRUE(a.ok()) << a.status().message();
  auto source = PrepareCapture(plain);
  ASSERT_TRUE(source.ok()) << source.status().message();
  EXPECT_EQ(source->model.sha256, *Sha256File(f.model));
  for (const char* out : {"s1.safetensors", "s2.safetensors"}) {
    CaptureRequest req = Request(f, out);
    auto b = RunCapture(req, *source);
    ASSERT_TRUE(b.ok()) << b.status().message();
    auto ra = CaptureReader::Open(plain.out_path);
    auto rb = CaptureReader::Open(req.out_path);
    ASSERT_TRUE(ra.ok() && rb.ok());
    EXPECT_TRUE(std::ranges::equal((*ra)->tokens(), (*rb)->tokens()));
    EXPECT_TRUE(std::ranges::equal((*ra)->positions(), (*rb)->positions()));
    EXPECT_TRUE(std::ranges::equal((*ra)->digest(), (*rb)->digest()));
    EXPECT_EQ(Untimed((*ra)->manifest().raw), Untimed((*rb)->manifest().raw)) << out;
    EXPECT_EQ(Untimed(a->raw), Untimed(b->raw));
  }
  // Other knobs over the same source: a configuration of its own, the shared facts kept.
  CaptureRequest q8 = Request(f, "q8.safetensors");
  q8.knobs.flash_attn = FlashAttn::kOn;
  q8.knobs.cache_type_k = q8.knobs.cache_type_v = KvCacheType::kQ8_0;
  auto c = RunCapture(q8, *source);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->raw["request"]["model_sha256"], a->raw["request"]["model_sha256"]);
  EXPECT_EQ(c->raw["knobs"]["cache_type_k"], "q8_0");
}

TEST(RunCapture, APreparedSourceServesOnlyItsOwnFiles) {
  Files f = Make("source-other");
  auto source = PrepareCapture(Request(f, "x.safetensors"));
  ASSERT_TRUE(source.ok()) << source.status().message();
  std::string other = f.dir + "/other.txt";
  std::ofstream(other) << "another workload entirely, long enough to probe a few positions.";
  std::vector<std::function<void(CaptureRequest&)>> edits = {
      [&](CaptureRequest& r) { r.workload_path = other; },
      [&](CaptureRequest& r) { r.model_path = f.dir + "/copy.gguf"; },
      [&](CaptureRequest& r) { r.workload.format = WorkloadFormat::kText; },
  };
  for (size_t i = 0; i < edits.size(); ++i) {
    CaptureRequest r = Request(f, "mismatch.safetensors");
    edits[i](r);
    auto m = RunCapture(r, *source);
    ASSERT_FALSE(m.ok()) << i;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument) << i;
    EXPECT_NE(m.status().message().find("prepared for"), std::string::npos) << m.status().message();
    EXPECT_FALSE(fs::exists(r.out_path)) << i;
  }
}

// The row pipeline changes when rows reach the file, not what the file holds: a capture with the
// default pipeline and one with a single row in flight (FLIPSCOPE_ROWS_IN_FLIGHT=1: copied, then
// written before the next)
// have the same data bytes, tensor table and manifest but for its creation time and timings.
TEST(RunCapture, RowsInFlightDoNotChangeTheFile) {
  Files f = Make("inflight");
  for (StoreDtype store : {StoreDtype::kF32, StoreDtype::kBF16}) {
    std::vector<std::string> bytes;
    for (int in_flight : {1, 0, 3}) {
      CaptureRequest r = Request(f, "c.safetensors");
      r.plan.stride = 1;  // every position: the most rows per llama_decode call
      r.store = store;
      if (in_flight > 0)
        setenv("FLIPSCOPE_ROWS_IN_FLIGHT", std::to_string(in_flight).c_str(), 1);
      else
        unsetenv("FLIPSCOPE_ROWS_IN_FLIGHT");
      auto m = RunCapture(r);
      unsetenv("FLIPSCOPE_ROWS_IN_FLIGHT");
      ASSERT_TRUE(m.ok()) << m.status().message();
      auto file = ReadFile(r.out_path);
      ASSERT_TRUE(file.ok());
      uint64_t header = 0;
      std::memcpy(&header, file->data(), 8);
      auto manifest = nlohmann::json::parse(
          nlohmann::json::parse(file->substr(8, header))["__metadata__"][kManifestKey].get<std::string>());
      manifest.erase("created");
      manifest.erase("timings");
      auto table = nlohmann::json::parse(file->substr(8, header));
      table.erase("__metadata__");
      bytes.push_back(table.dump() + manifest.dump() + file->substr(8 + header));
    }
    EXPECT_GT(bytes[0].size(), 20u * 307u * 2u);
    EXPECT_EQ(bytes[1], bytes[0]) << StoreName(store);
    EXPECT_EQ(bytes[2], bytes[0]) << StoreName(store);
  }
  // A bound that is not a whole number >= 1 is refused, naming the variable; nothing is written.
  CaptureRequest r = Request(f, "bad.safetensors");
  setenv("FLIPSCOPE_ROWS_IN_FLIGHT", "0", 1);
  auto bad = RunCapture(r);
  unsetenv("FLIPSCOPE_ROWS_IN_FLIGHT");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("FLIPSCOPE_ROWS_IN_FLIGHT: '0'"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(fs::exists(r.out_path));
}

// Past the training context the exact engine still computes the file's function, and says so.
TEST(RunCapture, TheExactEngineSaysWhenItRunsPastTheTrainingContext) {
  auto run = [](const std::string& name, int n_ctx_train) {
    Files f = Make(name);
    fixtures::TinyModelOptions o;
    o.n_ctx_train = n_ctx_train;
    EXPECT_TRUE(fixtures::WriteTinyModel(f.model, o).ok());
    CaptureRequest req = Request(f, "exact.safetensors");
    req.engine = EngineKind::kExact;
    std::vector<std::string> lines;
    req.log.line = [&](std::string_view l) { lines.emplace_back(l); };
    auto m = RunCapture(req);
    EXPECT_TRUE(m.ok()) << m.status().message();
    return std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
      return l.find("past the model's training context") != std::string::npos;
    });
  };
  EXPECT_EQ(run("exact-short", 32), 1);
  EXPECT_EQ(run("exact-long", 4096), 0);
}

// A tool call whose arguments are not JSON: captured as written, said once per call when the
// source is prepared (not again for each capture of it), and recorded in the manifest's workload.
TEST(RunCapture, ArgumentsThatAreNotJsonAreSaidOnceAndRecorded) {
  Files f = Make("broken-args");
  f.workload = f.dir + "/chat.json";
  std::ofstream(f.workload) << R"({"messages": [{"role": "user", "content": "Ping the router on port 5432."},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "a", "type": "function",
      "function": {"name": "ping", "arguments": "{host: router}"}}]},
    {"role": "tool", "tool_call_id": "a", "content": "ok"}]})";
  CaptureRequest req = Request(f, "a.safetensors");
  std::vector<std::string> lines;
  req.log.line = [&](std::string_view l) { lines.emplace_back(l); };
  auto src = PrepareCapture(req);
  ASSERT_TRUE(src.ok()) << src.status().message();
  auto a = RunCapture(req, *src);
  ASSERT_TRUE(a.ok()) << a.status().message();
  req.out_path = f.dir + "/b.safetensors";
  ASSERT_TRUE(RunCapture(req, *src).ok());
  const std::string expect = "warning: " + f.workload + ": message #2: tool call #1 (ping): arguments are not JSON (";
  auto said = [&](const std::string& l) { return l.rfind(expect, 0) == 0; };
  ASSERT_EQ(std::count_if(lines.begin(), lines.end(), said), 1);
  const nlohmann::json& recorded = a->workload.record["warnings"];
  ASSERT_EQ(recorded.size(), 1u) << a->workload.record.dump();
  EXPECT_EQ("warning: " + recorded[0].get<std::string>(), *std::find_if(lines.begin(), lines.end(), said));
}

// An output folder that does not exist is said of the capture's final name before the model is
// read, and nothing is created.
TEST(RunCapture, AMissingOutputFolderIsSaidFirst) {
  Files f = Make("no-folder");
  CaptureRequest req = Request(f, "none/x.safetensors");
  req.model_path = f.dir + "/not-read.gguf";  // not there: the folder is checked before the model
  auto m = RunCapture(req);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), req.out_path + ": cannot create: its folder " + f.dir + "/none does not exist");
  EXPECT_FALSE(fs::exists(f.dir + "/none"));
}
