// The typed results document: a results.json the experiment wrote reads back into
// ExperimentResults and writes out byte for byte as it was; reading tolerates any document.
#include "results/experiment_results.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace flipscope {
namespace {

using nlohmann::json;

// tests/data/results-v0.1.0.json: written by `flipscope run` 0.1.0 on the tiny test model, with
// every part a run can have (exact reference, repeats, a loaded variant, forks followed, layers,
// served replay, recipe).
std::string WrittenByV010() {
  std::ifstream in(std::string(FLIPSCOPE_SOURCE_DIR) + "/tests/data/results-v0.1.0.json", std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// As the experiment writes results.json.
std::string Dumped(const json& j) { return j.dump(1, ' ', false, json::error_handler_t::replace); }

TEST(ExperimentResults, AFileTheExperimentWroteRoundTripsByteForByte) {
  const std::string text = WrittenByV010();
  ASSERT_FALSE(text.empty());
  const ExperimentResults r = ExperimentResults::FromJson(json::parse(text));
  EXPECT_EQ(Dumped(r.ToJson()), text);
  // Every part was read into its type, not carried as unknown.
  EXPECT_TRUE(r.extra.empty()) << r.extra.dump();
  EXPECT_EQ(r.baseline, "baseline");
  ASSERT_GE(r.measured.configs.size(), 3u);
  EXPECT_TRUE(r.measured.configs[0].Ok());
  EXPECT_EQ(r.measured.configs[0].captures.size(), 2u);
  EXPECT_FALSE(r.measured.comparisons.empty());
  // Comparisons and a configuration's facts are typed: nothing of them is left as unknown.
  for (const ComparisonRecord& c : r.measured.comparisons) {
    ASSERT_TRUE(c.compare);
    EXPECT_TRUE(c.compare->extra.empty()) << c.compare->extra.dump();
    EXPECT_EQ(c.compare->overall.probes, c.entry.figures.probes);
    EXPECT_FALSE(c.compare->windows.empty());
  }
  const ConfigEntry& base = r.measured.configs[0];
  EXPECT_TRUE(base.description && base.flags && base.kv_bytes_per_token && base.model_file_size);
  EXPECT_EQ(base.repeats.value_or(0), 2);
  ASSERT_TRUE(base.capture_seconds && base.reused);
  EXPECT_EQ(base.capture_seconds->size(), 2u);
  for (const char* key : {"description", "flags", "repeats", "capture_seconds", "reused", "kv_bytes_per_token",
                          "model_file_size", "knobs", "engine", "changes"})
    EXPECT_FALSE(base.fields.contains(key)) << key;
  // What the capture recorded is read once: the knobs it ran with, its engine, the run's facts.
  ASSERT_NE(base.RanKnobs(), nullptr);
  EXPECT_EQ(base.RanKnobs()->n_ctx, 2048);
  EXPECT_EQ(base.RanKnobs()->n_batch, 16);
  EXPECT_EQ(base.RanReplay(), Replay::kPrefill);
  EXPECT_EQ(r.measured.configs[1].RanKnobs()->cache_type_k, KvCacheType::kQ4_0);
  EXPECT_EQ(r.measured.configs[2].RanKnobs()->load, 1);
  ASSERT_TRUE(base.engine);
  EXPECT_EQ(base.engine->name, "llama");
  EXPECT_FALSE(base.engine->kernel_path.empty());
  EXPECT_EQ(r.model.facts.name, "flipscope-tiny");
  EXPECT_GT(r.model.facts.n_layer, 0);
  EXPECT_EQ(r.workload.facts.path, "chat.json");
  EXPECT_EQ(r.workload.facts.n_tokens, 226);
  EXPECT_TRUE(r.probe_plan.facts.recorded);
  EXPECT_EQ(r.probe_plan.facts.stride, 1);
  EXPECT_EQ(r.probe_plan.facts.full, "");
  EXPECT_EQ(r.probe_plan.facts.n_probes, 225);
  EXPECT_EQ(r.environment.name, "llama");
  ASSERT_EQ(r.environment.resolved.size(), 2u);
  EXPECT_EQ(r.environment.resolved[1].key, "repack");
  EXPECT_EQ(KnobText(r.environment.resolved[1].requested), "on");
  EXPECT_EQ(KnobText(r.environment.resolved[1].effective), "off");
  EXPECT_EQ(r.environment.swa_full, true);
  EXPECT_TRUE(r.measured.floor);
  EXPECT_FALSE(r.measured.summary.empty());
  ASSERT_TRUE(r.measured.branches);
  ASSERT_FALSE(r.measured.branches->empty());
  EXPECT_GT((*r.measured.branches)[0].Counts().followed, 0);
  ASSERT_TRUE(r.reference);
  EXPECT_EQ(r.reference->capture.name, "exact");
  EXPECT_FALSE(r.reference->summary.empty());
  ASSERT_TRUE(r.layers);
  EXPECT_FALSE(r.layers->empty());
  ASSERT_TRUE(r.served);
  EXPECT_FALSE(r.served->measured.summary.empty());
  EXPECT_FALSE(r.served->distance.empty());
  EXPECT_TRUE(r.served->ranking);
  EXPECT_TRUE(r.recipe.has_value());
}

TEST(ExperimentResults, UnknownAndMistypedPartsAreKeptAsRead) {
  const json doc = {{"future_part", {{"x", 1}}},
                    {"configs", {{{"name", "a"}, {"status", "paused"}, {"captures", {1, 2}}, {"note", "n"}}}}};
  const ExperimentResults r = ExperimentResults::FromJson(doc);
  EXPECT_EQ(r.extra["future_part"]["x"], 1);
  ASSERT_EQ(r.measured.configs.size(), 1u);
  EXPECT_FALSE(r.measured.configs[0].status) << "an unknown status is no status";
  EXPECT_TRUE(r.measured.configs[0].captures.empty());
  const json back = r.ToJson();
  EXPECT_EQ(back["future_part"], doc["future_part"]);
  EXPECT_EQ(back["configs"][0], doc["configs"][0]);

  // A fact of another type than this version writes stays in fields and is written back as read;
  // an integer where a float is written is not turned into one.
  const json facts = {{"name", "b"},     {"model_file_size", "unknown"}, {"kv_bytes_per_token", 23040},
                      {"repeats", 2},    {"capture_seconds", {1.5, 2}},  {"reused", {false, true}},
                      {"flags", nullptr}};
  const ConfigEntry e = ConfigEntry::FromJson(facts);
  EXPECT_FALSE(e.model_file_size);
  EXPECT_FALSE(e.kv_bytes_per_token);
  EXPECT_FALSE(e.capture_seconds);
  EXPECT_FALSE(e.flags);
  EXPECT_EQ(e.repeats.value_or(0), 2);
  ASSERT_TRUE(e.reused);
  EXPECT_TRUE((*e.reused)[1]);
  json written = e.ToJson();
  written.erase("captures");
  EXPECT_EQ(written.dump(), facts.dump());

  // The run's settings: a budget in whole bytes is written back as the integer it was, one field
  // this version does not know is kept.
  const json settings = {{"window", 64}, {"confident", 0.9}, {"memory_budget_bytes", 8589934592ull}, {"later", 1}};
  const RunSettings rs = RunSettings::FromJson(settings);
  EXPECT_EQ(rs.window.value_or(0), 64);
  EXPECT_DOUBLE_EQ(rs.memory_budget_bytes.value_or(0), 8589934592.0);
  EXPECT_EQ(rs.ToJson().dump(), settings.dump());
  EXPECT_FALSE(RunSettings::FromJson(json{{"memory_budget_bytes", nullptr}}).memory_budget_bytes);

  // A compare document's field this version does not know is kept and written back.
  json cmp = {{"config", "b"}, {"repeat", 0}, {"compare", {{"future_figure", {1, 2}}, {"window", 64}}}};
  const ComparisonRecord c = ComparisonRecord::FromJson(cmp);
  ASSERT_TRUE(c.compare);
  EXPECT_EQ(c.compare->window, 64);
  EXPECT_EQ(c.ToJson()["compare"]["future_figure"], cmp["compare"]["future_figure"]);
}

// Found by fuzz_results: a number far outside an integer field's range (here a flip's position)
// was converted anyway, which is undefined; it now reads as the field's default.
// A configuration's recorded knobs, engine, changes and contradictions: read into their types,
// written back as they were; a later version's knob leaves the knobs unread but the record whole.
TEST(ExperimentResults, RecordedFactsReadTypedAndWriteBackAsWritten) {
  const json launch = {{"asked", {{"command", "srv --port {port}"}, {"env", {{"B", "2"}, {"A", 1}}}}},
                       {"run", {{"command", "srv --port 4242"}, {"url", "http://127.0.0.1:4242"}}}};
  const json entry = {
      {"name", "v"},
      {"captures", json::array()},
      {"knobs", {{"ctx_size", 4096}, {"replay", "served"}, {"cache_type_v", "q8_0"}}},
      {"engine",
       {{"engine", "openai"},
        {"flags", "-fa on"},
        {"server", {{"version", "b1"}}},
        {"launch", launch},
        {"swa_full", false},
        {"resolved", {{"flash_attn", {{"requested", "auto"}, {"effective", "on"}, {"reason", "r"}}}, {"bad", 3}}}}},
      {"changes", {{"cache_type_v", "q8_0"}}},
      {"contradictions", {{{"knob", "flash_attn"}, {"asked", "off"}, {"ran", "on"}}}},
      {"timings", {{"total_s", 1.5}}},
      {"kv_bytes_per_token", nullptr}};
  const ConfigEntry e = ConfigEntry::FromJson(entry);
  EXPECT_EQ(e.ToJson(), entry);
  ASSERT_NE(e.RanKnobs(), nullptr);
  EXPECT_EQ(e.RanKnobs()->n_ctx, 4096);
  EXPECT_EQ(e.RanKnobs()->cache_type_v, KvCacheType::kQ8_0);
  EXPECT_EQ(e.RanReplay(), Replay::kServed);
  ASSERT_TRUE(e.engine && e.engine->launch);
  EXPECT_EQ(e.engine->name, "openai");
  EXPECT_EQ(e.engine->server_version, "b1");
  EXPECT_EQ(e.engine->swa_full, false);
  EXPECT_EQ(e.engine->launch->command, "srv --port 4242");
  EXPECT_EQ(e.engine->launch->url, "http://127.0.0.1:4242");
  EXPECT_EQ(e.engine->launch->asked_command, "srv --port {port}");
  EXPECT_EQ(e.engine->launch->env, (std::map<std::string, std::string>{{"A", "1"}, {"B", "2"}}));
  ASSERT_EQ(e.engine->resolved.size(), 1u);  // an entry that is not an object is left out
  EXPECT_EQ(ResolvedNotes(*e.engine), std::vector<std::string>{"flash_attn auto ran as on: r"});
  ASSERT_TRUE(e.contradictions);
  ASSERT_EQ(e.contradictions->size(), 1u);
  EXPECT_EQ((*e.contradictions)[0].knob, "flash_attn");
  EXPECT_EQ((*e.contradictions)[0].ran, "on");
  EXPECT_EQ(e.timings, json({{"total_s", 1.5}}));  // not read by any stage: kept as written
  EXPECT_TRUE(e.kv_bytes_unknown);                 // a server's: written as null
  EXPECT_TRUE(e.fields.empty()) << e.fields.dump();

  // A knob this version does not know (a later version's): the knobs read as none, the record
  // is kept whole; a mistyped engine block stays in fields as it was.
  const json later = {{"name", "w"},
                      {"captures", json::array()},
                      {"knobs", {{"ctx_size", 8}, {"warp_drive", "on"}}},
                      {"engine", "not a block"}};
  const ConfigEntry l = ConfigEntry::FromJson(later);
  EXPECT_EQ(l.RanKnobs(), nullptr);
  EXPECT_EQ(l.RanReplay(), Replay::kPrefill);
  EXPECT_FALSE(l.engine);
  EXPECT_EQ(l.ToJson(), later);
}

// The run's recorded facts, from older files too: a probe plan's parts written as a list read
// joined; a model or workload that is not an object reads as empty facts and writes back as it was.
TEST(ExperimentResults, RunFactsReadFromAnyVersion) {
  json doc = {{"configs", json::array()},
              {"probe_plan", {{"stride", 32}, {"full", {"tool_calls", "10-20"}}}},
              {"model", "a name only"},
              {"workload", {{"n_tokens", 9.0}, {"template", {{"name", "chatml"}, {"source", "builtin"}}}}}};
  const ExperimentResults r = ExperimentResults::FromJson(doc);
  EXPECT_EQ(r.probe_plan.facts.full, "tool_calls, 10-20");
  EXPECT_EQ(r.probe_plan.facts.stride, 32);
  EXPECT_FALSE(r.probe_plan.facts.n_probes);
  EXPECT_EQ(r.model.facts.name, "");
  EXPECT_EQ(r.workload.facts.n_tokens, 9);
  EXPECT_EQ(r.workload.facts.template_name, "chatml");
  EXPECT_EQ(r.workload.facts.template_source, "builtin");
  const json out = r.ToJson();
  for (const char* key : {"probe_plan", "model", "workload"}) EXPECT_EQ(out[key], doc[key]) << key;
  EXPECT_TRUE(out["environment"].is_null());
  EXPECT_TRUE(r.environment.name.empty());
}

TEST(ExperimentResults, NumbersOutsideAnIntegerFieldsRangeReadAsItsDefault) {
  const json doc = {{"window", 1e300},
                    {"probes_compared", -1e19},
                    {"bit_identical", 18446744073709551615ull},
                    {"base", {{"topk", 3e9}}},
                    {"flips", {{{"position", 1e300}, {"base_token", -3e9}, {"window", std::nan("")}}}}};
  const Comparison c = ComparisonFromJson(doc);
  EXPECT_EQ(c.window, 0);
  EXPECT_EQ(c.probes_compared, 0);
  EXPECT_EQ(c.bit_identical, 0);
  EXPECT_EQ(c.base_topk, 0);
  ASSERT_EQ(c.flips.size(), 1u);
  EXPECT_EQ(c.flips[0].position, 0);
  EXPECT_EQ(c.flips[0].base_token, -1);
  // In range, a float is truncated as before.
  EXPECT_EQ(ComparisonFromJson(json{{"window", 64.0}}).window, 64);
  EXPECT_EQ(ComparisonFromJson(json{{"window", -2.0}}).window, -2);
}

TEST(ExperimentResults, ReadingNeverFails) {
  for (const json& j : {json(), json(7), json::array(), json{{"configs", 3}, {"served", "x"}, {"layers", {1}}}}) {
    const ExperimentResults r = ExperimentResults::FromJson(j);
    EXPECT_TRUE(r.measured.configs.empty());
    EXPECT_FALSE(r.served);
  }
  const ExperimentResults r = ExperimentResults::FromJson(json{{"layers", {1, {{"config", "q"}, {"skipped", "why"}}}}});
  ASSERT_TRUE(r.layers);
  ASSERT_EQ(r.layers->size(), 1u);
  EXPECT_EQ(r.layers->at(0).skipped.value_or(""), "why");
}

// Every results.json kept in the source tree (tests/data, the fuzz corpus, the measured runs under
// docs/) reads into ExperimentResults and writes out a document that reads back and writes out
// byte for byte; one written by this version (v0.1.0, the tests' and the fuzz corpus's) is that
// document already. (Files of earlier versions gain the fields written since, e.g. a comparison's
// flags and replay, so their first write differs from them by design.)
std::string FileText(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// "" when a and b are equal (a final newline of the file aside), else where they first differ.
std::string FirstDifference(const std::string& written, const std::string& file) {
  if (written == file || written + "\n" == file) return "";
  size_t i = 0;
  while (i < written.size() && i < file.size() && written[i] == file[i]) ++i;
  return "at byte " + std::to_string(i) + ": written '" + written.substr(i > 40 ? i - 40 : 0, 80) + "' file '" +
         file.substr(i > 40 ? i - 40 : 0, 80) + "'";
}

TEST(ExperimentResults, EveryResultsFileInTheTreeRoundTrips) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  const fs::path root(FLIPSCOPE_SOURCE_DIR);
  for (const char* dir : {"tests/data", "fuzz/corpus/fuzz_results", "docs"})
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      if (e.path().extension() != ".json") continue;
      const json j = json::parse(FileText(e.path()), nullptr, false);
      if (j.is_object() && j.contains("configs") && j.contains("baseline")) files.push_back(e.path());
    }
  std::sort(files.begin(), files.end());
  // tests/data (2), the fuzz corpus (2) and the runs documented under docs/ (10 and more).
  EXPECT_GE(files.size(), 14u);
  int current = 0;
  for (const fs::path& p : files) {
    const std::string text = FileText(p);
    const std::string once = Dumped(ExperimentResults::FromJson(json::parse(text)).ToJson());
    EXPECT_EQ(FirstDifference(Dumped(ExperimentResults::FromJson(json::parse(once)).ToJson()), once), "") << p;
    if (p.filename() == "results-v0.1.0.json") {
      ++current;
      EXPECT_EQ(FirstDifference(once, text), "") << p;
    }
  }
  EXPECT_EQ(current, 2);
}

}  // namespace
}  // namespace flipscope
