// The branch stage on real SmolLM2 captures of the default workload: f16 against a q4_0 KV
// cache (both with flash attention) flips the greedy token at some probes; every branch is
// re-created exactly (row digests) and checked independently by tests/ref/branch_check.py.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include <fmt/format.h>

#include "branch/branch.h"
#include "capture/capture.h"
#include "testing/tiny_model.h"
#include "util/util.h"

using namespace flipscope;

namespace {

const std::string kExample = std::string(FLIPSCOPE_SOURCE_DIR) + "/examples/netops-session.json";

Result<nlohmann::json> Capture(const std::string& model, const std::string& kv, const std::string& out) {
  CaptureRequest req;
  req.model_path = model;
  req.workload_path = kExample;
  req.out_path = out;
  req.knobs.flash_attn = "on";
  req.knobs.cache_type_k = req.knobs.cache_type_v = kv;
  req.knobs.n_threads = 1;  // shared test machines: one thread avoids OpenMP spinning under load
  req.plan.stride = 32;
  req.plan.full = "tool_calls";
  req.progress = false;
  return RunCapture(req);
}

}  // namespace

TEST(BranchSmolLM2, KvQ4AgainstF16OnTheNetopsSession) {
  const std::string model = fixtures::SmolLM2Path();
  if (model.empty()) GTEST_SKIP() << "SmolLM2 not in the cache (scripts/setup.sh fetches it)";
  BranchRequest req;
  req.base_path = fixtures::TempPath("smol-branch-f16.safetensors");
  req.cand_path = fixtures::TempPath("smol-branch-q4.safetensors");
  for (auto [kv, path] : {std::pair{"f16", req.base_path}, {"q4_0", req.cand_path}}) {
    auto m = Capture(model, kv, path);
    ASSERT_TRUE(m.ok()) << m.status().message();
  }
  req.options.max_tokens = 32;
  req.options.max_branches = 24;
  req.options.progress = false;
  auto out = RunBranches(req);
  ASSERT_TRUE(out.ok()) << out.status().message();
  const auto& cfg = (*out)["config"];
  const auto& records = (*out)["records"];
  ASSERT_GT(records.size(), 0u) << "a q4_0 KV cache should flip SmolLM2 somewhere in 7,000 tokens";
  // The re-run reproduces each capture bit for bit: the futures are those configurations'.
  EXPECT_EQ(cfg["base"]["rows_reproduced"], cfg["base"]["rows_checked"]);
  EXPECT_EQ(cfg["cand"]["rows_reproduced"], cfg["cand"]["rows_checked"]);
  EXPECT_GT(cfg["base"]["rows_checked"].get<int64_t>(), 200);
  for (const auto& r : records) EXPECT_TRUE(r["reproduced"].get<bool>()) << r["position"];
  // The workload's tools come through the manifest or the workload file.
  ASSERT_TRUE(cfg["tools"].is_array());
  EXPECT_NE(std::find(cfg["tools"].begin(), cfg["tools"].end(), "run_command"), cfg["tools"].end());
  EXPECT_EQ(cfg["envelope"]["open"], "<tool_call>");

  std::string json_path = fixtures::TempPath("smol-branches.json"), log = fixtures::TempPath("smol-branches.log");
  std::ofstream(json_path) << out->dump(1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string cmd = fmt::format("{} {}/tests/ref/branch_check.py {} {} {} > {} 2>&1", FLIPSCOPE_PYTHON,
                                FLIPSCOPE_SOURCE_DIR, req.base_path, req.cand_path, json_path, log);
  EXPECT_EQ(std::system(cmd.c_str()), 0) << *ReadFile(log);
  std::printf("%s", SummaryText((*out)["counts"]).c_str());
  for (const auto& r : records)
    std::printf("  %6d %-17s %s\n", r["position"].get<int>(), r["verdict"].get<std::string>().c_str(),
                r["reason"].get<std::string>().c_str());
}
