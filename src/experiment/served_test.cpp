// replay = "both": every configuration captured under prefill and served replay, compared like
// with like, each configuration's prefill-vs-served distance, the ranking under each replay,
// the recipe ranked by served replay, and the report's section.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "capture/capture.h"
#include "compare/compare.h"
#include "experiment/experiment.h"
#include "support/experiment_test_util.h"
#include "testing/chats.h"
#include "testing/tiny_model.h"
#include "util/util.h"

using namespace flipscope;
namespace fs = std::filesystem;

namespace {

const char* kChat = fixtures::kToolChat;  // testing/chats.h

// A folder with the tiny model, the chat above and exp.toml (model, workload, body); its path.
std::string MakeChatExperiment(const std::string& name, const std::string& body) {
  fs::path dir = fixtures::TempPath("exp-served-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  EXPECT_TRUE(fixtures::WriteTinyModel((dir / "tiny.gguf").string()).ok());
  std::ofstream(dir / "chat.json") << kChat;
  std::ofstream(dir / "exp.toml") << "model = \"tiny.gguf\"\nworkload = \"chat.json\"\nwindow = 64\n" << body;
  return (dir / "exp.toml").string();
}

std::string ParseError(const std::string& path) {
  auto e = ParseExperiment(path);
  return e.ok() ? "" : e.status().message();
}

const nlohmann::json* Named(const nlohmann::json& array, const std::string& key, const std::string& name) {
  for (const auto& e : array)
    if (e.value(key, std::string()) == name) return &e;
  return nullptr;
}

}  // namespace

TEST(ServedExperiment, ReplayMixesAreRefusedInOneLine) {
  const std::string head = "[baseline]\nthreads = 1\n[[variant]]\nname = \"v\"\n";
  auto both = MakeChatExperiment("both-own", "replay = \"both\"\n" + head + "replay = \"served\"\n");
  EXPECT_NE(ParseError(both).find("exp.toml:"), std::string::npos) << ParseError(both);
  EXPECT_NE(ParseError(both).find("'v' sets replay, which replay = \"both\""), std::string::npos) << ParseError(both);
  auto mixed = MakeChatExperiment("mixed", head + "replay = \"served\"\ncache_type_k = \"q8_0\"\n");
  EXPECT_NE(ParseError(mixed).find("variant 'v' changes replay and other settings"), std::string::npos)
      << ParseError(mixed);
  auto top = MakeChatExperiment("top", "replay = \"served\"\n" + head + "cache_type_k = \"q8_0\"\n");
  EXPECT_NE(ParseError(top).find("[baseline] replay = \"served\""), std::string::npos) << ParseError(top);
  // Replay alone is one change: the baseline's prefill-vs-served distance.
  auto alone = MakeChatExperiment("alone", head + "replay = \"served\"\n");
  EXPECT_EQ(ParseError(alone), "");
  auto two = MakeChatExperiment("two", head + "replay = \"served\"\n[[variant]]\nname = \"w\"\nreplay = \"served\"\n");
  EXPECT_NE(ParseError(two).find("variants 'v' and 'w' both change only replay"), std::string::npos) << ParseError(two);
  auto only = MakeChatExperiment("branch-only", head + "replay = \"served\"\n[branch]\nconfigs = [\"v\"]\n");
  EXPECT_NE(ParseError(only).find("[branch] configs names only 'v', which changes only replay"), std::string::npos)
      << ParseError(only);
}

// A variant whose only change is the replay is no configuration to rank: it asks for the
// deployment's other path, so the experiment measures every configuration and its served twin,
// exactly as replay = "both" does, and remembers the variant's name.
TEST(ServedExperiment, AReplayOnlyVariantMeasuresServedTwinsInsteadOfBeingARow) {
  const std::string q8 = "[[variant]]\nname = \"kv-q8_0\"\ncache_type_k = \"q8_0\"\n";
  const std::string branch = "[branch]\nconfigs = [\"kv-q8_0\", \"served\"]\n";
  auto folded = ParseExperiment(MakeChatExperiment(
      "fold", "[baseline]\nthreads = 1\n" + q8 + "[[variant]]\nname = \"served\"\nreplay = \"served\"\n" + branch));
  auto both = ParseExperiment(MakeChatExperiment(
      "fold-both", "replay = \"both\"\n[baseline]\nthreads = 1\n" + q8 + "[branch]\nconfigs = [\"kv-q8_0\"]\n"));
  ASSERT_TRUE(folded.ok()) << folded.status().message();
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_TRUE(folded->replay_both);
  EXPECT_EQ(folded->replay_variant, "served");
  EXPECT_EQ(both->replay_variant, "");
  ASSERT_EQ(folded->variants.size(), 1u);
  EXPECT_EQ(folded->variants[0].name, "kv-q8_0");
  EXPECT_EQ(folded->branch.configs, both->branch.configs);
  EXPECT_EQ(folded->baseline.knobs.ToJson(), both->baseline.knobs.ToJson());
  EXPECT_EQ(folded->variants[0].knobs.ToJson(), both->variants[0].knobs.ToJson());
  // A served baseline with a variant back to prefill: both replays of every configuration too.
  auto back =
      ParseExperiment(MakeChatExperiment("fold-back", "[baseline]\nthreads = 1\nreplay = \"served\"\n" + q8 +
                                                          "[[variant]]\nname = \"prefill\"\nreplay = \"prefill\"\n"));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->replay_both);
  EXPECT_EQ(back->baseline.knobs.replay, Replay::kPrefill);
  EXPECT_EQ(back->variants[0].knobs.replay, Replay::kPrefill);
  EXPECT_FALSE(back->baseline.changes.contains("replay"));
}

TEST(ServedExperiment, BothReplaysComparedLikeWithLike) {
  auto p = MakeChatExperiment("run",
                              "[probe]\nstride = 1\n[baseline]\nthreads = 1\nflash_attn = \"on\"\nctx_size = 2048\n"
                              "batch_size = 16\nubatch_size = 8\nrepeats = 2\n"
                              "[[variant]]\nname = \"kv-q4_0\"\ncache_type_k = \"q4_0\"\ncache_type_v = \"q4_0\"\n"
                              "[[variant]]\nname = \"loaded\"\nload = 1\n"
                              // Replay alone: every configuration measured under both replays (as replay = "both").
                              "[[variant]]\nname = \"served\"\nreplay = \"served\"\n"
                              "[branch]\nmax_tokens = 8\nmax_branches = 2\n");
  auto e = ParseExperiment(p);
  ASSERT_TRUE(e.ok()) << e.status().message();
  RunOptions ro;
  ro.outdir = (fs::path(p).parent_path() / "out").string();
  ro.log = Log::Quiet();
  auto r = fixtures::RunToJson(*e, ro);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const auto& served = (*r)["served"];
  // The served twins: every configuration but the loaded one, each run served.
  EXPECT_EQ(served["baseline"], "baseline@served");
  EXPECT_EQ(served["asked_by"], "served");
  EXPECT_EQ(Named((*r)["configs"], "name", "served"), nullptr) << "the replay-only variant is no configuration";
  ASSERT_EQ(served["configs"].size(), 2u) << served["configs"].dump();
  for (const auto& c : served["configs"]) EXPECT_EQ(c["knobs"]["replay"], "served") << c["name"];
  for (const auto& c : (*r)["configs"]) EXPECT_EQ(c["knobs"]["replay"], "prefill") << c["name"];
  ASSERT_NE(Named(served["skipped"], "config", "loaded"), nullptr);
  // Like with like: the served variant against the served baseline's first capture.
  ASSERT_NE(Named(served["comparisons"], "config", "kv-q4_0@served"), nullptr);
  for (const auto& c : served["comparisons"])
    EXPECT_NE(c["config"].get<std::string>().find("@served"), std::string::npos);
  ASSERT_NE(Named(served["summary"], "config", "kv-q4_0@served"), nullptr);
  EXPECT_TRUE(served["floor"].is_object());

  // Each configuration's distance: its prefill capture against its served one.
  ASSERT_EQ(served["distance"].size(), 2u) << served["distance"].dump();
  for (const std::string name : {"baseline", "kv-q4_0"}) {
    const auto* d = Named(served["distance"], "config", name);
    ASSERT_NE(d, nullptr) << name;
    const auto* pre = Named((*r)["configs"], "name", name);
    const auto* srv = Named(served["configs"], "name", name + "@served");
    CompareOptions co;
    co.log = Log::Quiet();
    auto direct = CompareFiles((*pre)["captures"][0], (*srv)["captures"][0], co);
    ASSERT_TRUE(direct.ok()) << direct.status().message();
    EXPECT_EQ((*d)["flips"], direct->overall.flips) << name;
    EXPECT_EQ((*d)["probes"], direct->overall.probes) << name;
    EXPECT_EQ((*d)["bit_identical"], direct->bit_identical) << name;
    EXPECT_DOUBLE_EQ((*d)["kl_mean"].get<double>(), direct->overall.kl_base_cand.mean) << name;
    // The model wrote a third or so of this chat: decode steps, whose rows differ from prefill's.
    const auto* wrote = Named((*d)["groups"], "group", "written");
    const auto* calls = Named((*d)["groups"], "group", "tool_calls");
    const auto* read = Named((*d)["groups"], "group", "elsewhere");
    ASSERT_TRUE(wrote && calls && read);
    EXPECT_EQ((*wrote)["probes"].get<int64_t>() + (*read)["probes"].get<int64_t>(), (*d)["probes"].get<int64_t>());
    EXPECT_GT((*calls)["probes"].get<int64_t>(), 0);
    EXPECT_LE((*calls)["probes"].get<int64_t>(), (*wrote)["probes"].get<int64_t>());
    EXPECT_LT((*wrote)["bit_identical"].get<int64_t>(), (*wrote)["probes"].get<int64_t>()) << name;
    EXPECT_GT((*d)["windows"].size(), 0u);
  }
  // The ranking under each replay, and whether it changed.
  const auto& ranking = served["ranking"];
  // Those measured under both replays: not the loaded variant.
  EXPECT_EQ(ranking["prefill"].size(), 2u) << ranking.dump();
  EXPECT_EQ(ranking["served"].size(), 2u) << ranking.dump();
  EXPECT_EQ(ranking["changed"], ranking["prefill"] != ranking["served"]);
  // The recipe ranks every row by its served figures, and says so; the loaded variant has no
  // served twin, so it is listed as not ranked rather than ranked on prefill figures.
  const auto& recipe = (*r)["recipe"];
  EXPECT_EQ(recipe["ranked_by"],
            "served replay (every ranked row: each configuration's served twin against baseline@served)");
  for (const auto& row : recipe["ranking"]) EXPECT_EQ(row["replay"], "served") << row["config"];
  const auto* q4 = Named(recipe["ranking"], "config", "kv-q4_0");
  ASSERT_NE(q4, nullptr);
  EXPECT_EQ((*q4)["median_flip_rate"], (*Named(served["summary"], "config", "kv-q4_0@served"))["median_flip_rate"]);
  EXPECT_EQ((*q4)["served_distance"]["flips"], (*Named(served["distance"], "config", "kv-q4_0"))["flips"]);
  EXPECT_EQ(Named(recipe["ranking"], "config", "loaded"), nullptr);
  ASSERT_NE(Named(recipe["not_ranked"], "config", "loaded"), nullptr) << recipe["not_ranked"].dump();
  // The twins' forks are followed on their own captures, and the served row ranks with the
  // damage found there and the reproduced rate of those forks (like with like).
  const auto* twin_forks = Named(served["branches"], "config", "kv-q4_0@served");
  ASSERT_NE(twin_forks, nullptr) << "the 4-bit KV cache must flip served for this test to mean anything";
  for (const char* side : {"base", "cand"}) {
    const auto& cfg = (*twin_forks)["branch_config"][side];
    EXPECT_EQ(cfg["knobs"]["replay"], "served") << side;
    EXPECT_EQ(cfg["rows_reproduced"], cfg["rows_checked"]) << side << ": forks start from the served captures' rows";
  }
  const auto* twin_row = Named(served["summary"], "config", "kv-q4_0@served");
  EXPECT_EQ((*q4)["branches_followed"], (*twin_row)["branches_followed"]);
  EXPECT_EQ((*q4)["damage"], (*twin_row)["damage"]);
  int64_t reproduced = 0, of = 0;
  for (const auto& rec : (*twin_forks)["records"])
    if (rec.contains("reproduced")) ++of, reproduced += rec["reproduced"].get<bool>();
  EXPECT_EQ((*q4)["forks_reproduced"]["of"], of);
  EXPECT_EQ((*q4)["forks_reproduced"]["reproduced"], reproduced);
  // results.csv: the configurations, then the served twins, each with its replay; the rank is on
  // the twin's row, whose figures it rests on.
  auto csv = ReadFile((fs::path(ro.outdir) / "results.csv").string());
  ASSERT_TRUE(csv.ok());
  EXPECT_NE(csv->find(",recommended,replay\r\n"), std::string::npos) << *csv;
  EXPECT_NE(csv->find("\r\n,kv-q4_0,ok,"), std::string::npos) << *csv;
  size_t place = 0;
  while (place < recipe["ranking"].size() && recipe["ranking"][place]["config"] != "kv-q4_0") ++place;
  const std::string rank = std::to_string(place + 1);
  EXPECT_NE(csv->find("\r\n" + rank + ",kv-q4_0@served,ok,"), std::string::npos) << *csv;
  EXPECT_NE(csv->find(",served\r\n"), std::string::npos) << *csv;
  // The report's section and labels.
  auto md = ReadFile((fs::path(ro.outdir) / "report.md").string());
  ASSERT_TRUE(md.ok());
  EXPECT_NE(md->find("## Prefill against served replay"), std::string::npos);
  EXPECT_NE(md->find(" kv-q4\\_0 (served replay) |"), std::string::npos) << *md;
  EXPECT_NE(md->find("- **loaded** — not ranked: not captured under served replay"), std::string::npos) << *md;
  EXPECT_NE(md->find("The variant served changed only the replay"), std::string::npos) << *md;
  auto html = ReadFile((fs::path(ro.outdir) / "report.html").string());
  ASSERT_TRUE(html.ok());
  EXPECT_NE(html->find("<section id=\"served\">"), std::string::npos);
}
