// The typed history.json: a file the history stage wrote reads back and writes out as it was;
// reading tolerates any document.
#include "results/history_result.h"

#include <gtest/gtest.h>

#include <cmath>

#include "util/util.h"

namespace flipscope {
namespace {

using nlohmann::json;

TEST(HistoryResult, AFileTheHistoryStageWroteRoundTrips) {
  auto text = ReadFile(std::string(FLIPSCOPE_SOURCE_DIR) + "/tests/data/history-sample.json");
  ASSERT_TRUE(text.ok()) << text.status().message();
  const json doc = json::parse(*text);
  const HistoryResult h = HistoryResult::FromJson(doc);
  EXPECT_EQ(h.ToJson(), doc);
  EXPECT_TRUE(h.extra.empty()) << h.extra.dump();
  EXPECT_FALSE(h.OfConfigurations());
  ASSERT_EQ(h.versions.size(), 2u);
  EXPECT_EQ(h.versions[0].release, "0.3.35");
  ASSERT_TRUE(h.versions[0].llama_source);
  EXPECT_EQ(h.versions[0].llama_source->commit, "4df29be4f4c3673f428170fda944a5b19f743bb8");
  EXPECT_EQ(h.versions[0].reused, true);
  ASSERT_TRUE(h.exact);
  EXPECT_EQ(h.exact->capture, "captures/exact.safetensors");
  ASSERT_EQ(h.steps.size(), 1u);
  EXPECT_EQ(h.steps[0].bit_identical, 816);
  EXPECT_EQ(h.ChangedMost(), &h.steps[0]);
  ASSERT_EQ(h.to_exact.size(), 2u);
  EXPECT_EQ(h.to_exact[0].flips, 7);
  ASSERT_FALSE(h.to_exact[0].flip_list.empty());
  EXPECT_EQ(h.to_exact[0].flip_list[0].position, 1836);
  EXPECT_EQ(h.to_exact[0].flip_list[0].klass, "uncertain");
  ASSERT_TRUE(h.probe_plan);
  EXPECT_EQ(h.probe_plan->full, "tool_calls");
}

// A history of configurations with a server version, a paired test and forks: every group read
// into its type and written back the same; a figure written as null reads as NaN and is written
// as null again; unknown fields are kept.
TEST(HistoryResult, ConfigurationsForksAndPairedTestRoundTrip) {
  auto step = [](const char* base, const char* cand) {
    return json{
        {"kind", "step"},
        {"base", base},
        {"cand", cand},
        {"probes", 10},
        {"flips", 1},
        {"flip_rate", 0.1},
        {"flip_rate_ci", {0.01, 0.4}},
        {"confident_flips", 0},
        {"bit_identical", 9},
        {"kl_mean", nullptr},
        {"kl_median", 0.0},
        {"kl_p99", 0.5},
        {"kl_max", 0.5},
        {"kernel_paths_differ", true},
        {"windows", {{{"begin", 0}, {"end", 8}, {"probes", 10}, {"flips", 1}, {"kl_mean", 0.1}, {"kl_max", 0.5}}}},
        {"flip_list",
         {{{"position", 3},
           {"base_token", 1},
           {"cand_token", 2},
           {"base_text", "a"},
           {"cand_text", "b"},
           {"base_prob", nullptr},
           {"kl", 0.5},
           {"class", "uncertain"}}}},
        {"later_field", 7}};
  };
  json doc = {{"kind", "configurations"},
              {"model", "m.gguf"},
              {"workload", "w.json"},
              {"n_tokens", 12},
              {"flags", ""},
              {"cpu", ""},
              {"window", 8},
              {"changed_most", 0},
              {"from_first", json::array()},
              {"to_exact", json::array()},
              {"steps", {step("a", "b")}},
              {"unknown_top", {1, 2}}};
  doc["versions"] = {{{"release", "a"},
                      {"capture", "a.safetensors"},
                      {"engine", "llama"},
                      {"flags", "-fa on"},
                      {"kernel_path", "CPU"},
                      {"n_tokens", 12},
                      {"llama_cpp", "b1"}},
                     {{"release", "b"},
                      {"capture", "b.safetensors"},
                      {"engine", "openai"},
                      {"flags", ""},
                      {"kernel_path", ""},
                      {"n_tokens", 12},
                      {"server",
                       {{"version", "0.9"},
                        {"url", "http://h"},
                        {"launch", {{"asked", {{"command", "s {port}"}}}, {"run", {{"command", "s 1"}}}}}}}}};
  doc["steps"][0]["kind"] = "step";
  json to_exact = step("exact", "b");
  to_exact["kind"] = "to_exact";
  to_exact["from_before"] = {
      {"probes", 10}, {"kl_change_mean", -0.1}, {"kl_change_ci", {-0.2, -0.05}}, {"direction", "toward exact"}};
  doc["to_exact"] = {step("exact", "a"), to_exact};
  doc["forks"] = {{"config", json::object()},
                  {"records", json::array()},
                  {"counts", {{"total", 0}}},
                  {"how", "followed by the run"}};
  const HistoryResult h = HistoryResult::FromJson(doc);
  EXPECT_TRUE(h.OfConfigurations());
  EXPECT_TRUE(std::isnan(h.steps[0].kl_mean));
  EXPECT_FALSE(h.steps[0].flip_list[0].base_prob);
  EXPECT_EQ(h.steps[0].extra, json({{"later_field", 7}}));
  ASSERT_TRUE(h.versions[1].server && h.versions[1].server->launch);
  EXPECT_EQ(h.versions[1].server->version, "0.9");
  EXPECT_EQ(h.versions[1].server->launch->command, "s 1");
  ASSERT_TRUE(h.to_exact[1].from_before);
  EXPECT_EQ(h.to_exact[1].from_before->direction, "toward exact");
  EXPECT_DOUBLE_EQ(h.to_exact[1].from_before->ci[1], -0.05);
  ASSERT_TRUE(h.forks);
  EXPECT_EQ(h.forks->how, "followed by the run");
  EXPECT_EQ(h.extra, json({{"unknown_top", {1, 2}}}));
  const json out = h.ToJson();  // written as text: a NaN figure is null there, as in the file read
  for (const char* key : {"versions", "steps", "to_exact", "kind", "unknown_top", "n_tokens", "changed_most"})
    EXPECT_EQ(out[key].dump(), doc[key].dump()) << key;
  EXPECT_EQ(out["forks"]["how"], "followed by the run");
}

TEST(HistoryResult, ReadingNeverFails) {
  for (const json& j : {json(), json(3), json::array(), json({{"steps", 3}, {"versions", {1, "x", nullptr}}}),
                        json({{"changed_most", 9}, {"steps", json::array()}, {"exact", "no"}, {"forks", 1}})}) {
    const HistoryResult h = HistoryResult::FromJson(j);
    EXPECT_EQ(h.ChangedMost(), nullptr);  // an index out of range names no step
    EXPECT_FALSE(h.exact);
    EXPECT_FALSE(h.forks);
    (void)h.ToJson();
  }
}

}  // namespace
}  // namespace flipscope
