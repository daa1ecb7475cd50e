// The judge against labels a reader gave real fork records (tests/data/fork-labels.json, made by
// tests/data/make-fork-labels.py from SmolLM2 and Gemma 3 runs over several sessions): every
// record's outcome and failure kind must be the reader's, and every record must say "agrees
// again" the same way in all its fields.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "branch/verdict.h"
#include "util/util.h"

namespace flipscope {
namespace {

using json = nlohmann::json;

FutureText ReadFuture(const json& f) {
  FutureText t;
  t.pieces = f.at("pieces").get<std::vector<std::string>>();
  t.ended = f.at("ended").get<bool>();
  t.cap_hit = f.value("cap_hit", false);
  return t;
}

// The judge's context at a record's branch point, as the record builder makes it: every word of
// the text before the point (a word the point cuts in two left out), the literal spans ended by
// then, every word of the transcript as known-right, the tools and markers.
struct Source {
  std::string text;
  std::set<std::string, std::less<>> words;
  json literals;
  std::vector<ToolSpec> tools;
  ToolEnvelope envelope;
  int reconverge = 8;
};

JudgeContext ContextAt(const Source& s, size_t prefix_bytes) {
  JudgeContext ctx;
  ctx.prefix = s.text.substr(0, prefix_bytes);
  size_t cut = prefix_bytes;
  while (cut > 0 && IsWordChar(s.text[cut - 1])) --cut;
  ctx.literals.AddText(std::string_view(s.text).substr(0, cut));
  for (const json& l : s.literals)
    if (l.at("end_byte").get<size_t>() <= prefix_bytes) ctx.literals.AddLiteral(l.at("label").get<std::string>());
  ctx.known_words = &s.words;
  ctx.tools = s.tools;
  ctx.envelope = s.envelope;
  ctx.reconverge = s.reconverge;
  return ctx;
}

// Whether a and b hold the same pieces from i and j on: at least k of them holding at least 2k
// bytes, or both to their ends.
bool Aligned(const FutureText& a, int i, const FutureText& b, int j, int k) {
  const int na = int(a.pieces.size()), nb = int(b.pieces.size());
  if (a.ended && b.ended && na - i == nb - j && std::equal(a.pieces.begin() + i, a.pieces.end(), b.pieces.begin() + j))
    return true;
  int t = 0;
  size_t bytes = 0;
  while (i + t < na && j + t < nb && a.pieces[size_t(i + t)] == b.pieces[size_t(j + t)])
    bytes += a.pieces[size_t(i + t++)].size();
  return t >= k && bytes >= 2 * size_t(k);
}

// The reconvergence rule as stated, checked on a found reconvergence: aligned for K pieces and 2K
// bytes (or to both ends), each detour at most K tokens from the token holding the first
// differing byte.
void ExpectAlignedWithinK(const FutureText& a, const FutureText& b, const Reconvergence& r, int k,
                          const std::string& where) {
  EXPECT_TRUE(Aligned(a, r.base_at, b, r.cand_at, k)) << where;
  EXPECT_LE(r.base_detour, k) << where;
  EXPECT_LE(r.cand_detour, k) << where;
  const size_t fd = CommonPrefix(a.Text(), b.Text());
  size_t at = 0;
  for (int t = 0; t < r.base_at - r.base_detour; ++t) at += a.pieces[size_t(t)].size();
  EXPECT_LE(at, fd) << where << ": the base detour starts at the token holding the first difference";
  EXPECT_GT(at + a.pieces[size_t(r.base_at - r.base_detour)].size(), fd) << where;
}

// "Agrees again" means one thing in every field of a record: the pair's verdict and outcome say
// the futures agree again exactly when reconverge_*_at is set, and a side follows the transcript
// exactly when it writes the transcript's text or rejoins_at is set.
void ExpectConsistent(const JudgeContext& ctx, const FutureText& base, const FutureText& cand, const FutureText& ref,
                      const Judgement& pair, const SideJudgement (&sides)[2], const Attribution& a,
                      const std::string& where) {
  const bool same = !pair.first_difference.has_value();
  const bool agree = same || pair.reconverge.has_value();
  EXPECT_FALSE(pair.verdict == Verdict::kDivergent && agree) << where;
  EXPECT_FALSE(pair.verdict == Verdict::kBenign && !agree) << where;
  EXPECT_FALSE(a.outcome == Outcome::kDifferentButFine && agree) << where;
  EXPECT_FALSE(a.outcome == Outcome::kBenign && !agree) << where;
  if (pair.reconverge) ExpectAlignedWithinK(base, cand, *pair.reconverge, ctx.reconverge, where + " (pair)");
  const FutureText* futures[2] = {&base, &cand};
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(sides[s].follows_reference, sides[s].writes_reference || sides[s].rejoins.has_value()) << where;
    if (sides[s].rejoins) ExpectAlignedWithinK(*futures[s], ref, *sides[s].rejoins, ctx.reconverge, where + " (side)");
    EXPECT_EQ(SideRecord(sides[s], *futures[s]).rejoins_at.has_value(), sides[s].rejoins.has_value()) << where;
  }
}

// A label's grade of one side ("base_grade" / "cand_grade", in the label or beside it); "" where
// the reader gave none (labels written before futures were graded).
std::string LabelGrade(const json& r, const char* key) {
  for (const json* j : {&r.at("label"), &r})
    if (j->contains(key) && j->at(key).is_string()) return j->at(key).get<std::string>();
  return "";
}

// Why the reader held a record out ("held_out: why" in its reason, or a "held_out" field); "" when not.
std::string HeldOut(const json& label) {
  if (label.contains("held_out") && label.at("held_out").is_string()) return label.at("held_out").get<std::string>();
  const std::string reason = label.value("reason", "");
  return reason.rfind("held_out", 0) == 0 ? reason : "";
}

// The first check split: a third of the first 159 records, drawn at random once (Python:
// random.Random(49).sample of the sorted (source, position) keys, 53 of 159), kept out of tuning
// the judge's rules until its figure was measured (80.8%); its disagreements were read then and
// some rules changed, so its figure since is no longer one of records the rules were not fitted to.
const std::set<std::pair<std::string, int>> kCheckSplit = {
    {"gemma-demo", 880},   {"gemma-demo", 1072},  {"gemma-pg", 1028},    {"gemma-pg", 1078},    {"gemma-pg", 1334},
    {"gemma-pg", 1974},    {"gemma-pg", 2612},    {"gemma-pg", 3150},    {"gemma-s4", 320},     {"gemma-s4", 992},
    {"gemma-s4", 1053},    {"gemma-s4", 1058},    {"gemma-s4", 1060},    {"gemma-sre", 428},    {"gemma-sre", 588},
    {"gemma-sre", 648},    {"gemma-sre", 932},    {"gemma-sre", 976},    {"gemma-sre", 1376},   {"gemma-sre", 1452},
    {"gemma-sre", 1544},   {"gemma-sre", 1712},   {"gemma-sre", 1788},   {"gemma-sre", 1852},   {"gemma-sre", 2104},
    {"gemma-sre", 2292},   {"gemma-sre", 2588},   {"gemma-sre", 2692},   {"smol-demo", 208},    {"smol-demo", 896},
    {"smol-demo", 1157},   {"smol-demo", 1248},   {"smol-demo", 1568},   {"smol-s4", 32},       {"smol-s4", 528},
    {"smol-s4", 752},      {"smol-s4", 1104},     {"smol-s4", 1579},     {"smol-s4", 1720},     {"smol-s4", 1824},
    {"smolq8-code", 1680}, {"smolq8-code", 1704}, {"smolq8-code", 1740}, {"smolq8-code", 2212}, {"smolq8-code", 2800},
    {"smolq8-code", 3032}, {"smolq8-code", 3160}, {"smolq8-pg", 1256},   {"smolq8-pg", 1528},   {"smolq8-pg", 2800},
    {"smolq8-pg", 2892},   {"smolq8-pg", 3040},   {"smolq8-pg", 3276}};

// The second check split: every record of sources (sessions and model files) that no rule was
// fitted to, labelled by hand before the judge's verdict on them was read, then measured (80.6%).
// Its disagreements were read afterwards and rules changed for some of them, so, like the first,
// it is kept apart to show its figure but no longer measures records the rules were not fitted to.
const std::set<std::string> kSecondCheckSources = {"gemma-dbrec", "smol-codeedit", "smolq6-support", "smolq6-netops"};

// The third check split: every record of sources no earlier record uses (generated sessions of
// seeds no test uses, a fourth model file, KV types q8_0, q5_1 and iq4_nl), labelled by hand
// before the judge ran on them, and measured once with the rules frozen (69.6%). Its
// disagreements were read afterwards and rules changed for some of them, so it is read since.
const std::set<std::string> kThirdCheckSources = {"smolq5-gcode",  "gemma-gsup",  "smol-gdb",
                                                  "smolq5-gcode4", "gemma-gsup4", "gemmaq8-gnet"};

// The fourth check split: every record of sources no earlier record uses (generated sessions of
// new seeds, SmolLM2 requantized to Q4_K_S), labelled by hand before the judge ran on them, and
// measured once with the rules frozen (86.7%). Its disagreements were read afterwards and rules
// changed for them, so it is read since.
const std::set<std::string> kFourthCheckSources = {"smolq4ks-gsup", "smolq4ks-gcode"};

// The fifth check split: every record of sources no earlier record uses (generated sessions of new
// seeds, Gemma 3 requantized to Q6_K, SmolLM2 requantized to Q5_0, KV types q4_1 with Gemma 3 and
// bf16), labelled by hand before the judge ran on them, and measured once with the rules frozen
// (76.2%). Its disagreements were read afterwards and rules changed for them, so it is read since.
const std::set<std::string> kFifthCheckSources = {"gemmaq6-gdb", "smolq50-gcode", "gemma-gnet", "smol-gsup94"};

// The sixth check split: every record of sources no earlier record uses (generated sessions of seeds
// 101-104, Gemma 3 requantized to Q5_K_M, SmolLM2 requantized to Q3_K_M, KV iq4_nl and q5_0 with
// Gemma 3, q5_1 with SmolLM2), labelled by hand before the judge ran on them, measured once with the
// rules frozen, then read.
const std::set<std::string> kSixthCheckSources = {"gemmaq5-gcode", "smolq3-gdb", "gemma-gsup102", "smol-gnet104"};

// The seventh check split: every record of sources no earlier record uses (generated sessions of
// seeds 111-114, Gemma 3 requantized to Q4_0 and Q3_K_M, SmolLM2 requantized to Q4_K_M, KV q4_1 with
// SmolLM2 Q4_1), labelled by hand before the judge ran on them (tests/data/show-forks.py), measured
// once with the rules frozen, then read.
const std::set<std::string> kSeventhCheckSources = {"smolq4km-gdb", "gemmaq40-gcode", "smol-gsup112", "gemmaq3-gnet"};

enum Split { kTuning, kFirstCheck, kSecondCheck, kThirdCheck, kFourthCheck, kFifthCheck, kSixthCheck, kSeventhCheck };
Split SplitOf(const std::string& source, int position) {
  if (kSeventhCheckSources.count(source)) return kSeventhCheck;
  if (kSixthCheckSources.count(source)) return kSixthCheck;
  if (kFifthCheckSources.count(source)) return kFifthCheck;
  if (kFourthCheckSources.count(source)) return kFourthCheck;
  if (kThirdCheckSources.count(source)) return kThirdCheck;
  if (kSecondCheckSources.count(source)) return kSecondCheck;
  return kCheckSplit.count({source, position}) ? kFirstCheck : kTuning;
}

// The judge's agreement with the reader, in percent of the records not held out, below which the
// test fails (measured: docs/branch.md, "The judge against the graded labels": 92.8% and 95.6%
// over the first seven splits).
constexpr double kAgreementFloor = 92.7, kOutcomeAgreementFloor = 95.5;
// Each check split on its own after the first, as a floor: the records it must hold and its
// agreement in everything and in outcome and kind (docs/branch.md, "The judge against the graded
// labels", has how each moved):
// - second: 91.7% and 94.4% since its disagreements were read;
// - third: measured once with the rules frozen 69.6% and 75.0%; 83.9%/87.5% once read, 82.1%/87.5%
//   since the fourth's were, 85.7%/91.1% since the fifth's, 87.5%/92.9% since the sixth's;
// - fourth: measured once 86.7% and 86.7%; 100% and 100% since read;
// - fifth: measured once 76.2% and 83.3%; 95.2% and 97.6% since read;
// - sixth: measured once 75.6% and 85.4%; 82.9%/90.2% once three labels the reader got wrong were
//   regraded; 90.2%/95.1% since read;
// - seventh, the newest: measured once 79.6% and 83.7%; 85.7% and 87.8% since read.
struct SplitFloor {
  Split split;
  const char* name;
  int min_records;
  double floor, outcome_floor;
};
constexpr SplitFloor kSplitFloors[] = {
    {kSecondCheck, "second check split", 30, 91.5, 94.0}, {kThirdCheck, "third check split", 40, 85.5, 91.0},
    {kFourthCheck, "fourth check split", 30, 99.5, 99.5}, {kFifthCheck, "fifth check split", 40, 95.0, 97.5},
    {kSixthCheck, "sixth check split", 40, 90.0, 95.0},   {kSeventhCheck, "seventh check split", 40, 85.5, 87.5}};
// How a disagreement names its split.
constexpr const char* kSplitTag[] = {"",
                                     " (first check split)",
                                     " (second check split)",
                                     " (third check split)",
                                     " (fourth check split)",
                                     " (fifth check split)",
                                     " (sixth check split)",
                                     " (seventh check split)"};

// Every labelled record judged again: the judge must give the reader's outcome, failure kind and
// (where the reader graded them) both sides' grades on at least kAgreementFloor percent of the
// records not held out; every disagreement and every held-out record is listed with the reader's reason.
TEST(ForkLabels, JudgeAgreesWithTheLabels) {
  auto text = ReadFile(std::string(FLIPSCOPE_SOURCE_DIR) + "/tests/data/fork-labels.json");
  ASSERT_TRUE(text.ok()) << text.status().message();
  const json doc = json::parse(*text);
  std::map<std::string, Source> sources;
  std::map<std::string, FactTable> facts;
  std::set<std::string> models;
  for (auto& [name, s] : doc.at("sources").items()) {
    Source& src = sources[name];
    src.text = s.at("text").get<std::string>();
    for (Word& w : SplitWords(src.text)) src.words.insert(std::move(w.text));
    facts[name] = FactTable::FromText(src.text);
    src.literals = s.at("literals");
    auto tools = ParseToolSpecs(s.at("tools"));
    ASSERT_TRUE(tools.ok()) << tools.status().message();
    src.tools = *tools;
    src.envelope = {s.at("envelope").at("open").get<std::string>(), s.at("envelope").at("close").get<std::string>()};
    src.reconverge = s.at("reconverge").get<int>();
    models.insert(s.at("model").get<std::string>());
  }
  const json& records = doc.at("records");
  EXPECT_GE(records.size(), 410u);
  EXPECT_GE(models.size(), 3u) << "records from the test models and at least one other";
  std::map<std::string, int> seen;  // outcomes the labels cover
  std::set<std::string> grades_seen;
  // Per split (Split): records judged, agreeing in everything, in outcome and kind.
  struct Tally {
    int judged = 0, agreed = 0, outcome_agreed = 0;
  } tally[kSeventhCheck + 1];
  int graded = 0, split_seen = 0;
  std::string disagreements, held;
  for (const json& r : records) {
    const std::string name = r.at("source").get<std::string>();
    const int position = r.at("position").get<int>();
    const std::string where = fmt::format("{} position {}", name, position);
    const Source& s = sources.at(name);
    JudgeContext ctx = ContextAt(s, r.at("prefix_bytes").get<size_t>());
    ctx.facts = &facts.at(name);
    const FutureText base = ReadFuture(r.at("base")), cand = ReadFuture(r.at("cand")),
                     ref = ReadFuture(r.at("reference"));
    const Judgement pair = Judge(ctx, base, cand, ref);
    const SideJudgement sides[2] = {JudgeSide(ctx, base, ref), JudgeSide(ctx, cand, ref)};
    const Attribution a = Attribute(sides[0], sides[1], pair, ctx.reconverge);
    ExpectConsistent(ctx, base, cand, ref, pair, sides, a, where);
    const Split split = SplitOf(name, position);
    split_seen += split == kFirstCheck;
    const json& label = r.at("label");
    if (const std::string why = HeldOut(label); !why.empty()) {
      held += fmt::format("  {}: {}\n", where, why);
      continue;
    }
    const std::string want_outcome = label.at("outcome").get<std::string>();
    const std::string want_kind = label.at("kind").is_null() ? "none" : label.at("kind").get<std::string>();
    const std::string want_grades[2] = {LabelGrade(r, "base_grade"), LabelGrade(r, "cand_grade")};
    ++seen[want_outcome];
    Tally& t = tally[split];
    ++t.judged;
    const bool outcome_same = OutcomeName(a.outcome) == want_outcome && FailureName(a.kind) == want_kind;
    bool same = outcome_same;
    if (!want_grades[0].empty()) {
      ++graded;
      for (int i = 0; i < 2; ++i) {
        grades_seen.insert(want_grades[i]);
        same = same && GradeName(GradeOf(sides[i])) == want_grades[i];
      }
    }
    t.agreed += same;
    t.outcome_agreed += outcome_same;
    if (!same)
      disagreements +=
          fmt::format("  {}{}: the reader says {} {} (grades {} / {}): {}\n    the judge: {} {} ({} / {}): {}\n", where,
                      kSplitTag[split], want_outcome, want_kind, want_grades[0], want_grades[1],
                      label.value("reason", ""), OutcomeName(a.outcome), FailureName(a.kind),
                      GradeName(GradeOf(sides[0])), GradeName(GradeOf(sides[1])), a.reason);
  }
  EXPECT_EQ(split_seen, int(kCheckSplit.size())) << "every record of the first check split is labelled";
  // The overall floor is over the splits before the newest (which has its own).
  int judged = 0, agreed = 0, outcome_agreed = 0;
  for (int s = kTuning; s < kSeventhCheck; ++s)
    judged += tally[s].judged, agreed += tally[s].agreed, outcome_agreed += tally[s].outcome_agreed;
  auto line = [](const char* what, int n, int all, int outcome) {
    std::printf("  %s: %d of %d (%.1f%%) in outcome, kind and both grades, %d (%.1f%%) in outcome and kind\n", what, n,
                all, 100.0 * n / std::max(all, 1), outcome, 100.0 * outcome / std::max(all, 1));
  };
  std::printf("fork labels: the judge agrees with the reader (%d graded by side)\n", graded);
  line("all but the seventh check split", agreed, judged, outcome_agreed);
  line("tuning split", tally[kTuning].agreed, tally[kTuning].judged, tally[kTuning].outcome_agreed);
  line("first check split (read since)", tally[kFirstCheck].agreed, tally[kFirstCheck].judged,
       tally[kFirstCheck].outcome_agreed);
  for (const SplitFloor& f : kSplitFloors)
    line((std::string(f.name) + " (read since)").c_str(), tally[f.split].agreed, tally[f.split].judged,
         tally[f.split].outcome_agreed);
  if (!held.empty()) std::printf("held out:\n%s", held.c_str());
  if (!disagreements.empty()) std::printf("disagreements:\n%s", disagreements.c_str());
  // The agreement measured (docs/branch.md, "The judge against the graded labels"), as a floor: a
  // change to the judge that agrees with the reader less fails here. The aim is 95% on records no
  // rule was fitted to.
  EXPECT_GE(100.0 * agreed, kAgreementFloor * judged);
  EXPECT_GE(100.0 * outcome_agreed, kOutcomeAgreementFloor * judged);
  for (const SplitFloor& f : kSplitFloors) {
    const Tally& t = tally[f.split];
    EXPECT_GE(t.judged, f.min_records) << "the " << f.name << " holds at least " << f.min_records << " records";
    EXPECT_GE(100.0 * t.agreed, f.floor * t.judged) << f.name;
    EXPECT_GE(100.0 * t.outcome_agreed, f.outcome_floor * t.judged) << f.name;
  }
  // The set is worth checking only if it holds every outcome the attribution can give, and the
  // graded failures the scale adds.
  for (Outcome o : AllOutcomes()) EXPECT_GT(seen[OutcomeName(o)], 0) << "no labelled record of " << OutcomeName(o);
  for (const char* g : {"equivalent_call", "invented_fact", "runaway"})
    EXPECT_TRUE(grades_seen.count(g)) << "no labelled side graded " << g;
}

}  // namespace
}  // namespace flipscope
