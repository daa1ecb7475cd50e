// Grammar-constrained futures on the tiny model: each token is the best one the grammar allows
// (checked against the rows of the same text prefilled), a rejected first token is replaced, a
// lazy grammar waits for its trigger, which the turn's tokens before the point can have written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>

#include "engine/engine.h"
#include "testing/tiny_model.h"
#include "util/util.h"

namespace flipscope {
namespace {

constexpr int32_t kTokenA = 271, kTokenQ = kTokenA + ('q' - 'a'), kDigit0 = 297;  // the tiny vocabulary's
constexpr int kLen = 12;

Knobs GrammarKnobs() {
  Knobs k;
  k.n_threads = 1;
  k.n_ctx = 256;
  return k;
}

// A transcript: tokens 5 + (i * 37) % 290, with "q" at 100 and digits after it.
std::vector<int32_t> Tokens() {
  std::vector<int32_t> t(120);
  for (int i = 0; i < 120; ++i) t[size_t(i)] = 5 + (i * 37) % 290;
  t[100] = kTokenQ;
  for (int i = 101; i < 120; ++i) t[size_t(i)] = kDigit0 + i % 10;
  return t;
}

DecodeGrammar Digits(bool lazy, int32_t start) {
  DecodeGrammar g;
  g.gbnf = lazy ? "root ::= \"q\" [0-9]{40}" : "root ::= [0-9]{40}";
  g.lazy = lazy;
  if (lazy) g.trigger_tokens = {kTokenQ};
  g.turn_start = [start](int32_t p) { return start < 0 ? p + 1 : start; };
  return g;
}

Future Fork(LlamaEngine& e, const std::vector<int32_t>& tokens, int32_t p, int32_t first) {
  Future out;
  std::vector<ForkRequest> forks = {{p, first}};
  std::vector<int32_t> probes = {p};
  Status st = e.Prefill({.tokens = tokens,
                         .probes = probes,
                         .sink = [](const Row&) { return Status::Ok(); },
                         .forks = forks,
                         .max_tokens = kLen,
                         .fork_sink =
                             [&](size_t, const Future& f) {
                               out = f;
                               return Status::Ok();
                             }});
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

bool IsDigitToken(int32_t t) { return (t >= kDigit0 && t < kDigit0 + 10) || (t >= 5 + '0' && t <= 5 + '9'); }

// Each token after the first is the highest-logit digit token of the row that predicts it (the
// rows of the same text prefilled; a near-tie may go either way between the two batch shapes).
void ExpectBestDigits(LlamaEngine& e, const std::vector<int32_t>& tokens, int32_t p, const Future& f) {
  std::vector<int32_t> text(tokens.begin(), tokens.begin() + p + 1);
  text.insert(text.end(), f.tokens.begin(), f.tokens.end());
  std::vector<int32_t> probes;
  for (size_t i = 0; i + 1 < f.tokens.size(); ++i) probes.push_back(p + 1 + int32_t(i));
  size_t i = 0;
  Status st = e.Prefill(text, probes, [&](const Row& r) {
    int32_t best = -1;
    for (int32_t t = 0; t < int32_t(r.logits.size()); ++t)
      if (IsDigitToken(t) && (best < 0 || r.logits[size_t(t)] > r.logits[size_t(best)])) best = t;
    const int32_t got = f.tokens[i + 1];
    EXPECT_TRUE(IsDigitToken(got)) << "token " << i + 1;
    EXPECT_LT(r.logits[size_t(best)] - r.logits[size_t(got)], 1e-3) << "token " << i + 1;
    ++i;
    return Status::Ok();
  }, nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(i, probes.size());
}

TEST(GrammarFutures, EveryTokenIsTheBestTheGrammarAllows) {
  auto e = LlamaEngine::Create(fixtures::DefaultTinyModel(), GrammarKnobs(), 2);
  ASSERT_TRUE(e.ok()) << e.status().message();
  const auto tokens = Tokens();
  const Future free = Fork(**e, tokens, 50, kTokenA);
  EXPECT_EQ(free.decoding, FutureDecoding::kFree);
  // Without the grammar the tiny model writes more than digits, or the test shows nothing.
  EXPECT_FALSE(std::all_of(free.tokens.begin() + 1, free.tokens.end(), IsDigitToken));
  ASSERT_TRUE((*e)->SetGrammar(Digits(false, -1)).ok());
  const Future g = Fork(**e, tokens, 50, kTokenA);
  EXPECT_EQ(g.decoding, FutureDecoding::kGrammar);
  ASSERT_EQ(g.tokens.size(), size_t(kLen));
  EXPECT_TRUE(g.first_masked) << "a letter is outside [0-9]: the first token is the grammar's";
  EXPECT_TRUE(IsDigitToken(g.tokens[0]));
  ExpectBestDigits(**e, tokens, 50, g);
  // The re-prefill path decodes the same way.
  auto fresh = (*e)->DecodeFresh(std::vector<int32_t>(tokens.begin(), tokens.begin() + 51), kTokenA, kLen);
  ASSERT_TRUE(fresh.ok()) << fresh.status().message();
  EXPECT_TRUE(fresh->first_masked);
  EXPECT_TRUE(std::all_of(fresh->tokens.begin(), fresh->tokens.end(), IsDigitToken));
}

TEST(GrammarFutures, LazyGrammarWaitsForItsTriggerInTheTurn) {
  auto e = LlamaEngine::Create(fixtures::DefaultTinyModel(), GrammarKnobs(), 2);
  ASSERT_TRUE(e.ok()) << e.status().message();
  const auto tokens = Tokens();
  const Future free = Fork(**e, tokens, 110, kTokenA);
  // The turn began before the "q" at 100: the grammar is triggered by the turn's own tokens.
  ASSERT_TRUE((*e)->SetGrammar(Digits(true, 90)).ok());
  const Future on = Fork(**e, tokens, 110, kTokenA);
  EXPECT_EQ(on.decoding, FutureDecoding::kGrammar);
  EXPECT_TRUE(on.first_masked);
  ExpectBestDigits(**e, tokens, 110, on);
  // The turn began after it: nothing triggers, the future is the free one.
  ASSERT_TRUE((*e)->SetGrammar(Digits(true, 105)).ok());
  const Future off = Fork(**e, tokens, 110, kTokenA);
  EXPECT_EQ(off.decoding, FutureDecoding::kGrammar);
  EXPECT_FALSE(off.first_masked);
  EXPECT_EQ(off.tokens, free.tokens);
  // A turn whose tokens leave the grammar (a letter after "q"): nothing to constrain with.
  auto broken = tokens;
  broken[105] = kTokenA;
  ASSERT_TRUE((*e)->SetGrammar(Digits(true, 90)).ok());
  EXPECT_EQ(Fork(**e, broken, 110, kTokenA).decoding, FutureDecoding::kFree);
}

TEST(GrammarFutures, BadGrammarIsRefused) {
  auto e = LlamaEngine::Create(fixtures::DefaultTinyModel(), GrammarKnobs(), 2);
  ASSERT_TRUE(e.ok());
  DecodeGrammar g = Digits(false, -1);
  g.gbnf = "root ::= [0-9";
  EXPECT_FALSE((*e)->SetGrammar(g).ok());
  g = Digits(false, -1);
  g.turn_start = nullptr;
  EXPECT_FALSE((*e)->SetGrammar(g).ok());
  EXPECT_TRUE((*e)->SetGrammar(std::nullopt).ok());
}

}  // namespace
}  // namespace flipscope
