#include "experiment/experiment.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "branch/branch.h"
#include "capture/capture.h"
#include "experiment/steps.h"
#include "support/branches.h"
#include "support/experiment_test_util.h"
#include "testing/tiny_model.h"
#include "util/util.h"

using namespace flipscope;
using flipscope::fixtures::RunBranchesJson;
namespace fs = std::filesystem;

namespace {

// The experiment at path, parsed, and in ro the options of a quiet run into its folder's out/.
Result<Experiment> ParseForRun(const std::string& path, RunOptions& ro) {
  ro.outdir = (fs::path(path).parent_path() / "out").string();
  ro.log.bars = false;
  return ParseExperiment(path);
}
}  // namespace

TEST(ParseExperiment, UnknownKeysNameTheLine) {
  auto p = fixtures::MakeExperiment("unknown",
                                    "[baseline]\nthreads = 1\n\n[[variant]]\nname = \"x\"\ncache_typ_k = \"q8_0\"\n");
  auto e = ParseExperiment(p);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find(p + ":9: unknown key 'cache_typ_k'"), std::string::npos) << e.status().message();
  p = fixtures::MakeExperiment("toplevel", "windw = 3\n");
  EXPECT_NE(ParseExperiment(p).status().message().find(":4: unknown key 'windw'"), std::string::npos);
  p = fixtures::MakeExperiment("badvalue", "[baseline]\nthreads = \"two\"\n");
  EXPECT_NE(ParseExperiment(p).status().message().find(":5:"), std::string::npos)
      << ParseExperiment(p).status().message();
  p = fixtures::MakeExperiment("syntax", "[baseline\n");
  EXPECT_NE(ParseExperiment(p).status().message().find(":4:"), std::string::npos);
}

// A model or workload that is not there is said at the line that names it, before anything runs.
TEST(ParseExperiment, MissingFilesNameTheLine) {
  auto p = fixtures::MakeExperiment("missing-model", "");
  const std::string dir = fs::path(p).parent_path().string();
  std::ofstream(p) << "name = \"m\"\nmodel = \"nowhere.gguf\"\nworkload = \"work.txt\"\n";
  EXPECT_EQ(ParseExperiment(p).status().message(), p + ":2: model '" + dir + "/nowhere.gguf' not found");
  std::ofstream(p) << "model = \"tiny.gguf\"\n\nworkload = \"gone.txt\"\n";
  EXPECT_EQ(ParseExperiment(p).status().message(), p + ":3: workload '" + dir + "/gone.txt' not found");
  std::ofstream(p) << "model = \"tiny.gguf\"\nworkload = \"work.txt\"\n[[variant]]\nname = \"other\"\n"
                      "model = \"/no/such/other.gguf\"\n";
  EXPECT_EQ(ParseExperiment(p).status().message(), p + ":5: model '/no/such/other.gguf' not found");
  fs::create_directories(fs::path(dir) / "folder.gguf");
  std::ofstream(p) << "model = \"folder.gguf\"\nworkload = \"work.txt\"\n";
  EXPECT_EQ(ParseExperiment(p).status().message(), p + ":1: model '" + dir + "/folder.gguf' is a folder, not a file");
}

// A model that is there but cannot be read fails the run before the results folder is made.
TEST(RunExperiment, AnUnreadableModelLeavesNoResultsFolder) {
  RunOptions ro;
  auto p = fixtures::MakeExperiment("unreadable-model", "");
  auto e = ParseForRun(p, ro);
  ASSERT_TRUE(e.ok()) << e.status().message();
  std::ofstream(fs::path(p).parent_path() / "tiny.gguf") << "not a model";
  auto r = RunExperiment(*e, ro);
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(fs::exists(ro.outdir)) << r.status().message();
}

// [branch] pick: which flips max_branches follows; a bad name is refused at its line.
TEST(ParseExperiment, BranchPickIsReadAndCheckedWhereItIsWritten) {
  auto e = ParseExperiment(fixtures::MakeExperiment("pick", "[branch]\nmax_branches = 4\npick = \"spread\"\n"));
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->branch.options.pick, ForkPick::kSpread);
  EXPECT_EQ(ParseExperiment(fixtures::MakeExperiment("pick-default", "[branch]\n"))->branch.options.pick,
            ForkPick::kFirst);
  auto p = fixtures::MakeExperiment("pick-bad", "[branch]\npick = \"last\"\n");
  EXPECT_NE(ParseExperiment(p).status().message().find(p + ":5: pick must be \"first\" or \"spread\", not \"last\""),
            std::string::npos)
      << ParseExperiment(p).status().message();
}

TEST(ParseExperiment, VariantsApplyTheirChangesToTheBaseline) {
  auto p = fixtures::MakeExperiment(
      "variants",
      "[baseline]\nthreads = 1\nflash_attn = \"on\"\nrepeats = 2\n\n[[variant]]\nname = \"q8\"\n"
      "cache_type_k = \"q8_0\"\ncache_type_v = \"q8_0\"\n");
  auto e = ParseExperiment(p);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->baseline.repeats, 2);
  ASSERT_EQ(e->variants.size(), 1u);
  EXPECT_EQ(e->variants[0].knobs.n_threads, 1);
  EXPECT_EQ(e->variants[0].knobs.flash_attn, FlashAttn::kOn);
  EXPECT_EQ(e->variants[0].knobs.cache_type_k, KvCacheType::kQ8_0);
  EXPECT_EQ(e->variants[0].repeats, 1);
  EXPECT_EQ(e->model, (fs::path(p).parent_path() / "tiny.gguf").string());
}

TEST(RunExperiment, EndToEndOnTheTinyModelWithReuseAndRefusal) {
  auto p = fixtures::MakeExperiment(
      "run",
      "[probe]\nstride = 4\n[baseline]\nthreads = 1\nflash_attn = \"on\"\nctx_size = 512\nrepeats = 2\n"
      "[[variant]]\nname = \"kv-q8_0\"\ncache_type_k = \"q8_0\"\ncache_type_v = \"q8_0\"\n"
      "[[variant]]\nname = \"refused\"\ncache_type_v = \"q4_0\"\nflash_attn = \"off\"\n");
  RunOptions ro;
  auto e = ParseForRun(p, ro);
  ASSERT_TRUE(e.ok()) << e.status().message();
  ro.memory_budget = 1ull << 20;
  auto r = fixtures::RunToJson(*e, ro);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const auto& res = *r;
  ASSERT_EQ(res["configs"].size(), 3u);
  EXPECT_EQ(res["configs"][2]["status"], "refused");
  EXPECT_NE(res["configs"][2]["reason"].get<std::string>().find("flash attention"), std::string::npos);
  // The baseline repeat is bit-for-bit identical on the CPU: the floor is exact.
  EXPECT_EQ(res["floor"]["bit_identical"], true);
  EXPECT_EQ(res["floor"]["flip_rate"], 0.0);
  // One comparison for the baseline's second repeat, one for the variant.
  ASSERT_EQ(res["comparisons"].size(), 2u);
  const auto& q8 = res["comparisons"][1]["compare"];
  EXPECT_EQ(res["comparisons"][1]["config"], "kv-q8_0");
  EXPECT_LT(q8["bit_identical"].get<int64_t>(), q8["probes_compared"].get<int64_t>());
  EXPECT_GT(q8["overall"]["kl_base_cand"]["mean"].get<double>(), 0.0);
  // The recipe's KV figures follow the model's shape: 2 layers x 1 KV head x (32 + 32) dims.
  const auto& kv_types = res["recipe"]["kv_types"];
  auto f16 = std::find_if(kv_types.begin(), kv_types.end(), [](const auto& t) { return t["type"] == "f16"; });
  ASSERT_NE(f16, kv_types.end()) << kv_types.dump();
  EXPECT_DOUBLE_EQ((*f16)["bytes_per_token"].get<double>(), 2 * 1 * 64 * 2.0);
  for (const char* f : {"results.json", "report.html", "report.md", "results.csv"})
    EXPECT_TRUE(fs::exists(fs::path(ro.outdir) / f)) << f;
  // A second run reuses every capture.
  auto again = fixtures::RunToJson(*e, ro);
  ASSERT_TRUE(again.ok());
  for (const auto& c : (*again)["configs"])
    for (const auto& reused : c["reused"]) EXPECT_TRUE(reused.get<bool>()) << c["name"];
  EXPECT_EQ((*again)["summary"], res["summary"]);
}

// Forks followed during the captures give the same branch records as the branch stage's own
// passes, and the baseline's second repeat decodes the baseline's side.
TEST(RunExperiment, ForksFollowedDuringCapturesMatchTheBranchStage) {
  auto p = fixtures::MakeExperiment(
      "forks",
      "[probe]\nstride = 2\n[baseline]\nthreads = 1\nflash_attn = \"on\"\nctx_size = 512\nrepeats = 2\n"
      "[[variant]]\nname = \"kv-q4_0\"\ncache_type_k = \"q4_0\"\ncache_type_v = \"q4_0\"\n"
      "[branch]\nmax_tokens = 6\nmax_branches = 5\n");
  RunOptions ro;
  auto e = ParseForRun(p, ro);
  ASSERT_TRUE(e.ok()) << e.status().message();
  auto r = fixtures::RunToJson(*e, ro);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ((*r)["branches"].size(), 1u) << "the tiny model's 4-bit KV cache must flip for this test to mean anything";
  const auto& b = (*r)["branches"][0];
  ASSERT_GT(b["records"].size(), 0u);
  const std::string cand = (*r)["configs"][1]["captures"][0];
  const std::string base1 = (*r)["configs"][0]["captures"][1];
  EXPECT_EQ(b["branch_config"]["cand"]["decoded_during_capture"], cand);
  EXPECT_EQ(b["branch_config"]["base"]["decoded_during_capture"], base1);
  EXPECT_TRUE(fs::exists(cand + ".forks.json"));

  BranchRequest req;
  req.base_path = (*r)["configs"][0]["captures"][0];
  req.cand_path = cand;
  req.options.max_tokens = 6;
  req.options.max_branches = 5;
  req.options.log.bars = false;
  auto own = RunBranchesJson(req);
  ASSERT_TRUE(own.ok()) << own.status().message();
  EXPECT_TRUE((*own)["config"]["cand"]["decoded_during_capture"].is_null());
  EXPECT_EQ((*own)["records"], b["records"]);
  EXPECT_EQ((*own)["counts"], b["counts"]);

  // What the forks found joins the variant's summary row and its place in the recipe's ranking.
  const auto& outcomes = b["counts"]["outcomes"];
  for (const auto& s : (*r)["summary"]) {
    if (s["config"] != "kv-q4_0") continue;
    EXPECT_EQ(s["damage"], outcomes["damage"]["total"]);
    EXPECT_EQ(s["repair"], outcomes["repair"]["total"]);
    EXPECT_EQ(s["branches_followed"], b["counts"]["total"]);
    EXPECT_DOUBLE_EQ(s["damage_rate"].get<double>(), s["median_flip_rate"].get<double>() *
                                                         outcomes["damage"]["total"].get<double>() /
                                                         b["counts"]["total"].get<double>());
  }
  for (const auto& row : (*r)["recipe"]["ranking"])
    if (row["config"] == "kv-q4_0") {
      EXPECT_EQ(row["damage"], outcomes["damage"]["total"]);
    }
}

TEST(ParseExperiment, ServerConfigurations) {
  auto p = fixtures::MakeExperiment(
      "servers",
      "[baseline]\nlaunch = \"vllm serve m --port {port}\"\nenv = { VLLM_BATCH_INVARIANT = \"1\" }\n"
      "startup_timeout = 300\nlogprobs = 20\n"
      "[[variant]]\nname = \"fp8\"\nlaunch = \"vllm serve m --port {port} --kv-cache-dtype fp8\"\n"
      "env = { VLLM_ATTENTION_BACKEND = \"TRITON_ATTN\" }\n"
      "[[variant]]\nname = \"remote\"\nurl = \"http://gpu-host:8000\"\napi = \"sglang\"\n"
      "[[variant]]\nname = \"llama\"\nengine = \"llama\"\nflash_attn = \"on\"\n");
  auto e = ParseExperiment(p);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->baseline.engine, EngineKind::kOpenai);
  EXPECT_EQ(e->baseline.server.startup_timeout_s, 300);
  ASSERT_EQ(e->variants.size(), 3u);
  const auto& fp8 = e->variants[0];
  EXPECT_EQ(fp8.engine, EngineKind::kOpenai);
  EXPECT_EQ(fp8.server.launch, "vllm serve m --port {port} --kv-cache-dtype fp8");
  EXPECT_EQ(fp8.server.startup_timeout_s, 300);               // inherited
  EXPECT_EQ(fp8.server.env.at("VLLM_BATCH_INVARIANT"), "1");  // the baseline's env, and its own on top
  EXPECT_EQ(fp8.server.env.at("VLLM_ATTENTION_BACKEND"), "TRITON_ATTN");
  ASSERT_TRUE(fp8.changes.env);
  EXPECT_EQ(fp8.changes.env->at("VLLM_ATTENTION_BACKEND"), "TRITON_ATTN");
  // The changes as results.json records them: each key the table sets, env as merged.
  EXPECT_EQ(ToJson(fp8.changes),
            nlohmann::json({{"launch", "vllm serve m --port {port} --kv-cache-dtype fp8"},
                            {"env", {{"VLLM_ATTENTION_BACKEND", "TRITON_ATTN"}, {"VLLM_BATCH_INVARIANT", "1"}}}}));
  const auto& remote = e->variants[1];
  EXPECT_EQ(remote.server.url, "http://gpu-host:8000");
  EXPECT_TRUE(remote.server.launch.empty());  // a URL replaces the inherited launch command
  EXPECT_EQ(remote.server.http.api, HttpApi::kSglang);
  EXPECT_EQ(remote.server.http.logprobs, 20);
  EXPECT_EQ(e->variants[2].engine, EngineKind::kLlama);
  EXPECT_TRUE(e->variants[2].server.launch.empty());
}

TEST(ParseExperiment, ServerConfigurationErrorsNameTheLine) {
  auto err = [](const std::string& name, const std::string& body) {
    auto e = ParseExperiment(fixtures::MakeExperiment(name, body));
    EXPECT_FALSE(e.ok());
    return e.ok() ? std::string() : e.status().message();
  };
  EXPECT_NE(err("knob", "[baseline]\nurl = \"http://h:1\"\ncache_type_k = \"q8_0\"\n")
                .find(":6: a llama.cpp knob does not apply to a server configuration"),
            std::string::npos);
  // replay is how flipscope asks a server, not its numerics: a server configuration may set it.
  auto served = ParseExperiment(
      fixtures::MakeExperiment("served",
                               "[baseline]\nurl = \"http://h:1\"\nreplay = \"served\"\n[[variant]]\nname = "
                               "\"v\"\nurl = \"http://h:2\"\n"));
  ASSERT_TRUE(served.ok()) << served.status().message();
  EXPECT_EQ(served->baseline.knobs.replay, Replay::kServed);
  EXPECT_EQ(served->variants[0].knobs.replay, Replay::kServed);  // inherited
  EXPECT_NE(err("noport", "[baseline]\nlaunch = \"vllm serve m\"\n")
                .find(":4: launch needs port = N, {port} in the command (a free port), or url"),
            std::string::npos);
  EXPECT_NE(err("health", "[baseline]\nurl = \"http://h:1\"\nhealth = \"health\"\n").find(":6: health must be a path"),
            std::string::npos);
  EXPECT_NE(err("env", "[baseline]\nurl = \"http://h:1\"\nenv = { A = 1 }\n").find(":6: env.A must be a string"),
            std::string::npos);
  EXPECT_NE(err("timeout", "[baseline]\nurl = \"http://h:1\"\nstartup_timeout = -1\n")
                .find(":6: startup_timeout must be a number of seconds > 0"),
            std::string::npos);
  EXPECT_NE(err("requant", "[baseline]\nurl = \"http://h:1\"\n[[variant]]\nname = \"q\"\nrequantize = \"Q8_0\"\n")
                .find(":8: a server configuration serves its own weights"),
            std::string::npos);
  EXPECT_NE(err("nourl", "[baseline]\nengine = \"openai\"\n").find("needs url = "), std::string::npos);
}

TEST(ParseExperiment, HistoryTableTakesReleasesOverTheBaseline) {
  auto p = fixtures::MakeExperiment("history",
                                    "[baseline]\nthreads = 2\n\n[history]\nreleases = [\"0.3.35\", \"0.3.36\"]\n");
  auto e = ParseExperiment(p);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_TRUE(e->history.enabled);
  EXPECT_EQ(e->history.releases, (std::vector<std::string>{"0.3.35", "0.3.36"}));
  EXPECT_EQ(e->history.cpu, "");
  EXPECT_FALSE(ParseExperiment(fixtures::MakeExperiment("nohistory", "")).value().history.enabled);
  // Commits of a checkout, its path relative to the experiment file's folder, and a token limit.
  auto pc = fixtures::MakeExperiment(
      "history-commits",
      "[history]\nllama_src = \"llama.cpp\"\ncommits = [\"b5000\", \"b5010\"]\nmax_tokens = 64\nforks = 4\n"
      "fork_tokens = 32\n");
  auto ec = ParseExperiment(pc);
  ASSERT_TRUE(ec.ok()) << ec.status().message();
  EXPECT_EQ(ec->history.commits, (std::vector<std::string>{"b5000", "b5010"}));
  EXPECT_EQ(ec->history.llama_src, (std::filesystem::path(pc).parent_path() / "llama.cpp").string());
  EXPECT_EQ(ec->history.max_tokens, 64);
  EXPECT_EQ(ec->history.forks, 4);
  EXPECT_EQ(ec->history.fork_tokens, 32);
  EXPECT_EQ(e->history.forks, 0);
  EXPECT_TRUE(ec->history.releases.empty());
  // The file's own configurations in order (variants allowed: they are the versions).
  auto pk = ParseExperiment(fixtures::MakeExperiment(
      "history-configs",
      "[history]\nconfigs = [\"baseline\", \"q8\"]\n\n[[variant]]\nname = \"q8\"\ncache_type_k = \"q8_0\"\n"));
  ASSERT_TRUE(pk.ok()) << pk.status().message();
  EXPECT_EQ(pk->history.configs, (std::vector<std::string>{"baseline", "q8"}));
  // Errors name the line: too few releases, a bad cpu, an unknown key, and tables a history does not take.
  struct Bad {
    const char* body;
    const char* words;
  };
  for (const Bad& b :
       {Bad{"[history]\nreleases = [\"0.3.36\"]\n", ":5: releases needs at least two"},
        Bad{"[history]\nreleases = \"0.3.36\"\n", ":5: releases must be a list"},
        Bad{"[history]\nreleases = [\"0.3.35\", \"0.3.36\"]\ncpu = \"fast\"\n", ":6: cpu must be"},
        Bad{"[history]\nrelease = [\"0.3.35\", \"0.3.36\"]\n", ":5: unknown key 'release' in [history]"},
        Bad{"[history]\nreleases = [\"0.3.35\", \"0.3.36\"]\n[[variant]]\nname = \"x\"\nthreads = 1\n",
            "[history] runs the [baseline]"},
        Bad{"[history]\ncommits = [\"a\", \"b\"]\n", ":4: [history] commits needs llama_src"},
        Bad{"[history]\nllama_src = \"x\"\n", ":4: [history] llama_src needs commits"},
        Bad{"[history]\n", ":4: [history] needs releases, llama_src and commits, or configs"},
        Bad{"[history]\nconfigs = [\"baseline\", \"nope\"]\n", "configs names 'nope', which is not a configuration"},
        Bad{"[history]\nconfigs = [\"baseline\", \"baseline\"]\n", "configs names 'baseline' twice"},
        Bad{"[history]\nconfigs = [\"baseline\", \"x\"]\nreleases = [\"0.3.35\", \"0.3.36\"]\n",
            ":4: [history] takes one of releases"},
        Bad{"[history]\nreleases = [\"0.3.35\", \"0.3.36\"]\nllama_src = \"x\"\ncommits = [\"a\", \"b\"]\n",
            ":4: [history] takes one of releases, commits"},
        Bad{"[history]\nllama_src = \"x\"\ncommits = [\"a\"]\n", ":6: commits needs at least two"},
        Bad{"[history]\nreleases = [\"0.3.35\", \"0.3.36\"]\nmax_tokens = 0\n", ":6: max_tokens must be"},
        Bad{"[history]\nreleases = [\"0.3.35\", \"0.3.36\"]\nforks = -1\n", ":6: forks must be a whole number >= 0"},
        Bad{"[history]\nreleases = [\"0.3.35\", \"0.3.36\"]\nfork_tokens = 0\n", ":6: fork_tokens must be"},
        Bad{"[history]\nconfigs = [\"baseline\", \"q8\"]\nforks = 2\n[[variant]]\nname = \"q8\"\nthreads = 1\n",
            "no llama_src, cpu, max_tokens or forks"}}) {
    auto bad = ParseExperiment(fixtures::MakeExperiment("badhistory", b.body));
    ASSERT_FALSE(bad.ok()) << b.body;
    EXPECT_NE(bad.status().message().find(b.words), std::string::npos) << bad.status().message();
  }
}

// Once the baseline's first capture is on disk, the captures still to make are weighed against the
// space left: a line says so when they do not fit, and BF16 rows halve F32 ones.
TEST(SpaceWarning, SaysWhenTheCapturesStillToMakeDoNotFit) {
  constexpr uint64_t kGiB = uint64_t(1) << 30;
  EXPECT_FALSE(SpaceWarning(10 * kGiB, 5, 50 * kGiB, true));  // exactly fits
  EXPECT_FALSE(SpaceWarning(10 * kGiB, 0, 0, true));          // nothing left to make
  const auto line = SpaceWarning(10 * kGiB, 7, 50 * kGiB, true);
  ASSERT_TRUE(line);
  EXPECT_EQ(*line,
            "  the 7 captures still to make need about 70.00 GiB and the results folder's disk has 50.00 GiB free: "
            "those that do not fit will fail (BF16 rows, store = \"bf16\" under [probe], take half)");
  const auto bf16 = SpaceWarning(5 * kGiB, 11, 50 * kGiB, false);
  ASSERT_TRUE(bf16);
  EXPECT_EQ(bf16->find("BF16"), std::string::npos) << *bf16;
}
