// Served replay of a real model: SmolLM2 on the CPU, prefill against served over the start of
// the example session (minutes on a shared 2-core machine: labelled long).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "capture/capture.h"
#include "testing/tiny_model.h"
#include "util/util.h"

using namespace flipscope;
namespace fs = std::filesystem;

// SmolLM2 on the CPU over the first nine messages of the example session: what it read before
// its first decode step is computed in the same ubatches by both replays (identical rows); the
// decode steps are not (the single-token path), and the manifest counts what ran.
TEST(ServedCapture, SmolLM2PrefillAgainstServed) {
  const std::string model = fixtures::SmolLM2Path();
  if (model.empty()) GTEST_SKIP() << "SmolLM2 is not in the cache (make setup)";
  const std::string dir = fixtures::TempPath("served-smollm2");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string chat = dir + "/session9.json";
  ASSERT_EQ(std::system(fmt::format("{} {}/examples/cut_session.py {}/examples/netops-session.json --messages 9 -o {}",
                                    FLIPSCOPE_PYTHON, FLIPSCOPE_SOURCE_DIR, FLIPSCOPE_SOURCE_DIR, chat)
                            .c_str()),
            0);
  auto request = [&](Replay replay, const std::string& out) {
    CaptureRequest r;
    r.model_path = model;
    r.workload_path = chat;
    r.out_path = dir + "/" + out;
    r.knobs.n_threads = 1;  // a shared machine: two spinning threads wait on each other when one is descheduled
    r.knobs.replay = replay;
    r.plan.stride = 2;
    r.log = Log::Quiet();
    return r;
  };
  auto pm = RunCapture(request(Replay::kPrefill, "prefill.safetensors"));
  ASSERT_TRUE(pm.ok()) << pm.status().message();
  auto sm = RunCapture(request(Replay::kServed, "served.safetensors"));
  ASSERT_TRUE(sm.ok()) << sm.status().message();
  auto a = CaptureReader::Open(dir + "/prefill.safetensors");
  auto b = CaptureReader::Open(dir + "/served.safetensors");
  ASSERT_TRUE(a.ok() && b.ok());
  const auto& P = **a;
  const auto& S = **b;
  ASSERT_TRUE(std::ranges::equal(P.positions(), S.positions()));

  auto spans = SpansFromJson(sm->raw["workload"]["spans"]);
  ASSERT_TRUE(spans.ok());
  const int32_t n = int32_t(S.tokens().size());
  std::vector<bool> wrote;
  for (int32_t p = 0; p < n; ++p) wrote.push_back(ModelWrites(*spans, p));
  auto step = [&](int32_t p) { return wrote[size_t(p)] && p + 1 < n && wrote[size_t(p + 1)]; };
  int64_t steps = 0, written = 0, segments = 0;
  int32_t first_step = -1;
  for (int32_t p = 0; p < n; ++p) {
    written += wrote[size_t(p)];
    if (!step(p)) {
      segments += p == 0 || step(p - 1);
      continue;
    }
    ++steps;
    if (first_step < 0) first_step = p;
  }
  const auto& s = sm->raw["served"];
  EXPECT_EQ(s["fed_singly"], steps);
  EXPECT_EQ(s["written_tokens"], written);
  EXPECT_EQ(s["written_runs"], 4);  // the four assistant turns
  EXPECT_EQ(s["prefill_segments"], segments);
  EXPECT_EQ(s["decode_calls"].get<int64_t>(), steps + s["prefill_chunks"].get<int64_t>());
  ASSERT_GT(first_step, 512) << "the system prompt fills at least one ubatch";

  // Both prefill [0, first_step) from position 0 in 512-token ubatches: the full ubatches before
  // the first decode step are the same computation.
  const int32_t shared = first_step / 512 * 512;
  int64_t identical = 0, probes = 0, steps_identical = 0, step_probes = 0;
  for (size_t i = 0; i < P.positions().size(); ++i) {
    const int32_t p = P.positions()[i];
    const bool same = P.digest()[i] == S.digest()[i];
    if (p < shared) {
      EXPECT_TRUE(same) << "position " << p << " read before the first decode step";
    }
    identical += same;
    ++probes;
    if (step(p)) {
      steps_identical += same;
      ++step_probes;
    }
  }
  EXPECT_LT(identical, probes) << "served replay computed every row as prefill did";
  ASSERT_GT(step_probes, 50);
  EXPECT_LT(steps_identical, step_probes / 2) << "most decode steps' rows should differ from prefill's";
  std::printf("prefill vs served: %lld of %lld rows bit-identical; decode steps: %lld of %lld identical\n",
              (long long)identical, (long long)probes, (long long)steps_identical, (long long)step_probes);
}
