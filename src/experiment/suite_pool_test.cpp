// The suite's pooled figures on constructed sessions: the per-session table, the concentration
// flag where one session holds every flip (and none where flips spread), the kinds of text and
// the depth windows pooled across sessions.
#include <gtest/gtest.h>

#include "experiment/suite_internal.h"

using namespace flipscope;

namespace {

// A session of n probes every 8 tokens, `flips` of them flipping (the first ones), with the
// baseline and one variant "kv" measured.
SessionMeasure Session(const std::string& name, int n, int flips) {
  SessionMeasure m;
  m.session.name = name;
  ConfigEntry base, kv;
  base.name = "baseline", base.status = ConfigStatus::kOk, base.captures = {"b0", "b1"};
  kv.name = "kv", kv.status = ConfigStatus::kOk, kv.captures = {"k0"};
  m.results.measured.configs = {base, kv};
  SummaryRow row;
  row.config = "kv", row.median_repeat = 0;
  m.results.measured.summary = {row};
  ProbeSeries s, floor;
  for (int i = 0; i < n; ++i) {
    s.position.push_back(8 * i);
    s.flip.push_back(i < flips ? 1 : 0);
    s.kl.push_back(i < flips ? 0.5 : 0.001);
    s.kind.push_back(i % 2 ? TextKind::kToolCallArguments : TextKind::kAssistantProse);
    floor.position.push_back(8 * i), floor.flip.push_back(0), floor.kl.push_back(0),
        floor.kind.push_back(TextKind::kUser);
  }
  m.series["kv"] = s;
  m.floor = floor;
  m.floor_bit_identical = true;
  return m;
}

SuiteResults Pool(const std::vector<SessionMeasure>& sessions) {
  Experiment exp;
  exp.baseline.name = "baseline";
  PoolOptions o;
  o.window = 1024;
  o.replicates = 500;
  SuiteResults out;
  out.baseline = "baseline";
  PoolSessions(sessions, exp, o, out);
  return out;
}

}  // namespace

TEST(SuitePool, OneSessionHoldingEveryFlipIsFlaggedWithItsShare) {
  const SuiteResults s = Pool({Session("netops", 400, 0), Session("db", 400, 24), Session("support", 400, 0)});
  const SuiteConfig* kv = s.Config("kv");
  ASSERT_NE(kv, nullptr);
  ASSERT_EQ(kv->sessions.size(), 3u);
  EXPECT_EQ(kv->sessions[1].session, "db");
  EXPECT_EQ(kv->sessions[1].flips, 24);
  EXPECT_EQ(kv->sessions[0].flips, 0);
  EXPECT_DOUBLE_EQ(kv->flip_rate->value, 24.0 / 1200);
  ASSERT_TRUE(kv->concentration);
  EXPECT_EQ(kv->concentration->session, "db");
  EXPECT_EQ(kv->concentration->of, "flips");
  EXPECT_DOUBLE_EQ(kv->concentration->share, 1.0);
  // The clustered interval is wider than the naive one, which treats the probes as independent.
  ASSERT_TRUE(kv->flip_rate->naive_ci);
  EXPECT_GT(kv->flip_rate->ci[1] - kv->flip_rate->ci[0], (*kv->flip_rate->naive_ci)[1] - (*kv->flip_rate->naive_ci)[0]);
  // Bit-identical repeats in every session: any flip is above the floor.
  EXPECT_TRUE(kv->above_floor);
  ASSERT_TRUE(s.floor);
  EXPECT_EQ(s.floor->value, 0);
}

TEST(SuitePool, FlipsSpreadOverTheSessionsAreNotFlagged) {
  const SuiteResults s = Pool({Session("a", 400, 8), Session("b", 400, 8), Session("c", 400, 9)});
  EXPECT_FALSE(s.Config("kv")->concentration);
}

TEST(SuitePool, KindsAndDepthArePerSessionAndPooled) {
  const SuiteResults s = Pool({Session("a", 256, 10), Session("b", 128, 0)});
  const SuiteConfig* kv = s.Config("kv");
  int64_t pooled_args = -1, pooled_flips = -1;
  for (const KindRow& k : kv->kinds)
    if (k.session.empty() && k.kind == "tool-call arguments") pooled_args = k.probes, pooled_flips = k.flips;
  EXPECT_EQ(pooled_args, 128 + 64);
  EXPECT_EQ(pooled_flips, 5);  // the odd probes among the first 10
  // Windows of 1,024 tokens: probes every 8 tokens, so 128 per window; session a has 2 windows, b 1.
  int pooled_first = 0;
  for (const DepthRow& d : kv->depth)
    if (d.session.empty() && d.begin == 0) pooled_first = int(d.probes);
  EXPECT_EQ(pooled_first, 256);
  EXPECT_EQ(std::count_if(kv->depth.begin(), kv->depth.end(), [](const DepthRow& d) { return d.session == "a"; }), 2);
}
