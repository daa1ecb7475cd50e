// The branch stage on real SmolLM2 captures of a netops session (the default workload's
// generator): f16 against a q4_0 KV cache (both with flash attention) flips the greedy token at
// some probes; every branch is re-created exactly (row digests) and checked independently by
// tests/ref/branch_check.py (branch_test checks on the tiny model that `flipscope branch`
// writes the library's records).
// NetopsBranchCase runs it for one session length: make test runs a ~1,000-token session,
// make test-long (branch_long_test.cpp) the ~3,000-token one.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "branch/branch.h"
#include "capture/capture.h"
#include "support/branches.h"
#include "testing/tiny_model.h"
#include "util/util.h"

namespace branch_e2e {
using namespace flipscope;

// A deterministic netops session of about target_tokens tokens, written by examples/gen_session.py.
inline std::string Session(int target_tokens) {
  std::string out = fixtures::TempPath(fmt::format("smol-branch-session-{}.json", target_tokens));
  std::string cmd = fmt::format("{} {}/examples/gen_session.py --seed 1 --target-tokens {} -o {}", FLIPSCOPE_PYTHON,
                                FLIPSCOPE_SOURCE_DIR, target_tokens, out);
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return out;
}

inline CaptureRequest Request(const std::string& model, const std::string& workload, const std::string& kv,
                              const std::string& out) {
  CaptureRequest req;
  req.model_path = model;
  req.workload_path = workload;
  req.out_path = out;
  req.knobs.flash_attn = FlashAttn::kOn;
  req.knobs.cache_type_k = req.knobs.cache_type_v = *FromName<KvCacheType>(kv);
  req.knobs.n_threads = 1;  // shared test machines: one thread avoids OpenMP spinning under load
  req.plan.stride = 16;
  req.plan.full = "tool_calls";
  req.log.bars = false;
  return req;
}

// f16 against q4_0 over a session of target_tokens; at least min_rows_checked rows are re-checked.
inline void NetopsBranchCase(int target_tokens, int64_t min_rows_checked) {
  const std::string model = fixtures::SmolLM2Path();
  ASSERT_FALSE(model.empty()) << "SmolLM2 is not in the cache (make test fetches it)";
  const std::string session = Session(target_tokens);
  BranchRequest req;
  req.base_path = fixtures::TempPath(fmt::format("smol-branch-f16-{}.safetensors", target_tokens));
  req.cand_path = fixtures::TempPath(fmt::format("smol-branch-q4-{}.safetensors", target_tokens));
  // Both captures share one source: the model is hashed and the session rendered once.
  auto source = PrepareCapture(Request(model, session, "f16", req.base_path));
  ASSERT_TRUE(source.ok()) << source.status().message();
  for (auto [kv, path] : {std::pair{"f16", req.base_path}, {"q4_0", req.cand_path}}) {
    auto m = RunCapture(Request(model, session, kv, path), *source);
    ASSERT_TRUE(m.ok()) << m.status().message();
  }
  req.options.max_tokens = 32;
  req.options.max_call_tokens = 64;  // an open call may run on, but not for minutes on one thread
  req.options.max_branches = 12;
  // Every flip: the short session's flips lie mostly where the model reads (the system prompt,
  // tool results), and this case checks how futures are re-created, not where they are forked.
  req.options.fork_where = ForkScope::kAll;
  req.options.log.bars = false;
  auto out = fixtures::RunBranchesJson(req);
  ASSERT_TRUE(out.ok()) << out.status().message();
  const auto& cfg = (*out)["config"];
  const auto& records = (*out)["records"];
  ASSERT_GT(records.size(), 0u) << "a q4_0 KV cache should flip SmolLM2 somewhere in " << target_tokens << " tokens";
  // The re-run reproduces each capture bit for bit: the futures are those configurations'.
  EXPECT_EQ(cfg["base"]["rows_reproduced"], cfg["base"]["rows_checked"]);
  EXPECT_EQ(cfg["cand"]["rows_reproduced"], cfg["cand"]["rows_checked"]);
  EXPECT_GE(cfg["base"]["rows_checked"].get<int64_t>(), min_rows_checked);
  for (const auto& r : records) EXPECT_TRUE(r["reproduced"].get<bool>()) << r["position"];
  // The workload's tools come through the manifest or the workload file.
  ASSERT_TRUE(cfg["tools"].is_array());
  EXPECT_NE(std::find(cfg["tools"].begin(), cfg["tools"].end(), "run_command"), cfg["tools"].end());
  EXPECT_EQ(cfg["envelope"]["open"], "<tool_call>");

  std::string json_path = fixtures::TempPath(fmt::format("smol-branches-{}.json", target_tokens));
  std::string log = fixtures::TempPath(fmt::format("smol-branches-{}.log", target_tokens));
  std::ofstream(json_path) << out->dump(1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string cmd = fmt::format("{} {}/tests/ref/branch_check.py {} {} {} > {} 2>&1", FLIPSCOPE_PYTHON,
                                FLIPSCOPE_SOURCE_DIR, req.base_path, req.cand_path, json_path, log);
  EXPECT_EQ(std::system(cmd.c_str()), 0) << *ReadFile(log);
  std::printf("%s", SummaryText(BranchCountsFromJson((*out)["counts"])).c_str());
  for (const auto& r : records)
    std::printf("  %6d %-17s %s\n", r["position"].get<int>(), r["verdict"].get<std::string>().c_str(),
                r["reason"].get<std::string>().c_str());
}

}  // namespace branch_e2e
