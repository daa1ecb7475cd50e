// The judge against labels a reader gave real fork records (tests/data/fork-labels.json, made by
// tests/data/make-fork-labels.py from SmolLM2 and Gemma 3 runs): every record's outcome and
// failure kind must be the reader's.
#include <fmt/format.h>
#include <gtest/gtest.h>

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

TEST(ForkLabels, JudgeAgreesWithEveryLabel) {
  auto text = ReadFile(std::string(FLIPSCOPE_SOURCE_DIR) + "/tests/data/fork-labels.json");
  ASSERT_TRUE(text.ok()) << text.status().message();
  const json doc = json::parse(*text);
  std::map<std::string, Source> sources;
  std::set<std::string> models;
  for (auto& [name, s] : doc.at("sources").items()) {
    Source& src = sources[name];
    src.text = s.at("text").get<std::string>();
    for (Word& w : SplitWords(src.text)) src.words.insert(std::move(w.text));
    src.literals = s.at("literals");
    auto tools = ParseToolSpecs(s.at("tools"));
    ASSERT_TRUE(tools.ok()) << tools.status().message();
    src.tools = *tools;
    src.envelope = {s.at("envelope").at("open").get<std::string>(), s.at("envelope").at("close").get<std::string>()};
    src.reconverge = s.at("reconverge").get<int>();
    models.insert(s.at("model").get<std::string>());
  }
  const json& records = doc.at("records");
  EXPECT_GE(records.size(), 40u);
  EXPECT_GE(models.size(), 2u) << "records from both models";
  std::map<std::string, int> seen;  // outcomes the labels cover
  for (const json& r : records) {
    const Source& s = sources.at(r.at("source").get<std::string>());
    const JudgeContext ctx = ContextAt(s, r.at("prefix_bytes").get<size_t>());
    const FutureText base = ReadFuture(r.at("base")), cand = ReadFuture(r.at("cand")),
                     ref = ReadFuture(r.at("reference"));
    const Judgement pair = Judge(ctx, base, cand, ref);
    const Attribution a = Attribute(JudgeSide(ctx, base, ref), JudgeSide(ctx, cand, ref), pair, ctx.reconverge);
    const json& label = r.at("label");
    const std::string want_kind = label.at("kind").is_null() ? "none" : label.at("kind").get<std::string>();
    ++seen[label.at("outcome").get<std::string>()];
    EXPECT_EQ(OutcomeName(a.outcome), label.at("outcome").get<std::string>())
        << r.at("source").get<std::string>() << " position " << r.at("position") << ": the reader says "
        << label.at("reason").get<std::string>() << "; the judge: " << a.reason;
    EXPECT_EQ(FailureName(a.kind), want_kind)
        << r.at("source").get<std::string>() << " position " << r.at("position") << ": " << a.reason;
  }
  // The set is worth checking only if it holds every outcome the attribution can give.
  for (Outcome o : AllOutcomes()) EXPECT_GT(seen[OutcomeName(o)], 0) << "no labelled record of " << OutcomeName(o);
}

}  // namespace
}  // namespace flipscope
