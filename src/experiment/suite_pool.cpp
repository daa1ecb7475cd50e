// The suite's figures pooled over its sessions: clustered intervals (compare's ClusteredRate),
// one row per session, where the flips concentrate, the breakdown by kind of text and by token
// depth, and the results the recipe ranks on (docs/experiment.md, "Suites").
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <tuple>
#include <type_traits>

#include "compare/compare.h"
#include "experiment/suite_internal.h"

namespace flipscope {

namespace {

// A session's probes as the bootstrap's cluster: its weight, blocks of consecutive probes.
RatioCluster ClusterOf(const std::vector<double>& per_probe, double weight, int block) {
  return {weight, BlocksOf(per_probe, block)};
}

double Sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

PooledFigure Figure(const ClusteredEstimate& e, std::optional<std::pair<double, double>> naive = std::nullopt) {
  PooledFigure f{e.value, {e.ci.first, e.ci.second}, std::nullopt};
  if (naive) f.naive_ci = Interval{naive->first, naive->second};
  return f;
}

// Flips and KL per kind of text in one series, appended as rows of `session`.
void AddKinds(const ProbeSeries& s, const std::string& session, std::vector<KindRow>& rows) {
  for (const auto& [kind, name] : Names<TextKind>::v) {
    KindRow r{name, session};
    double kl = 0;
    for (size_t i = 0; i < s.kind.size(); ++i)
      if (s.kind[i] == kind) ++r.probes, r.flips += int64_t(s.flip[i]), kl += s.kl[i];
    if (r.probes == 0) continue;
    r.kl_mean = kl / double(r.probes);
    r.flip_rate = double(r.flips) / double(r.probes);
    rows.push_back(r);
  }
}

// Flips and KL per window of `window` tokens in one series, appended as rows of `session`.
void AddDepth(const ProbeSeries& s, const std::string& session, int64_t window, std::vector<DepthRow>& rows) {
  std::map<int64_t, std::pair<DepthRow, double>> by;  // window index -> row, KL sum
  for (size_t i = 0; i < s.position.size(); ++i) {
    const int64_t w = s.position[i] / window;
    auto& [row, kl] = by[w];
    row.session = session, row.begin = w * window, row.end = (w + 1) * window;
    ++row.probes, row.flips += int64_t(s.flip[i]), kl += s.kl[i];
  }
  for (auto& [w, rk] : by) {
    rk.first.kl_mean = rk.second / double(rk.first.probes);
    rk.first.flip_rate = double(rk.first.flips) / double(rk.first.probes);
    rows.push_back(rk.first);
  }
}

// Pooled rows (session "") from the per-session rows, by kind or by depth window: each session's
// probes count `weight` times, as in the pooled flip rate (a session of weight 2 counts as two).
template <typename Row, typename Key>
void AddPooled(std::vector<Row>& rows, const std::map<std::string, double>& weight, Key key) {
  struct Sums {
    Row row;
    double probes = 0, flips = 0, kl = 0;
  };
  std::map<std::invoke_result_t<Key, const Row&>, Sums> by;
  for (const Row& r : rows) {
    auto [it, fresh] = by.try_emplace(key(r), Sums{r});
    if (fresh) it->second.row.session = "";
    const double w = weight.at(r.session);
    it->second.probes += w * double(r.probes), it->second.flips += w * double(r.flips);
    it->second.kl += w * r.kl_mean * double(r.probes);
  }
  for (auto& [k, s] : by) {
    s.row.probes = std::llround(s.probes), s.row.flips = std::llround(s.flips);
    s.row.flip_rate = s.probes > 0 ? s.flips / s.probes : 0;
    s.row.kl_mean = s.probes > 0 ? s.kl / s.probes : 0;
    rows.push_back(s.row);
  }
}

// The session holding most of a weighted count, flagged when it holds at least half of it and
// at least twice its share of the probes (a long session is not flagged for being long).
std::optional<Concentration> ConcentrationOf(const std::vector<double>& counts, const std::vector<double>& probes,
                                             const std::vector<SuiteSessionRow>& rows, const char* of) {
  const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
  const double all = std::accumulate(probes.begin(), probes.end(), 0.0);
  if (counts.size() < 2 || total < 3 || all <= 0) return std::nullopt;
  const size_t top = size_t(std::max_element(counts.begin(), counts.end()) - counts.begin());
  const double share = counts[top] / total;
  if (share < 0.5 || share < 2 * probes[top] / all) return std::nullopt;
  return Concentration{rows[top].session, of, share};
}

// One configuration over the sessions; the baseline's entry only names it.
SuiteConfig PoolConfig(const std::vector<SessionMeasure>& sessions, const std::string& name, const PoolOptions& o,
                       double floor_threshold) {
  SuiteConfig c{name, "ok"};
  std::vector<RatioCluster> flips, kls, damage;
  std::vector<double> flip_w, dmg_w, probes_w;
  bool forked = false;
  for (const SessionMeasure& m : sessions) {
    const ConfigEntry* e = nullptr;
    for (const ConfigEntry& ce : m.results.measured.configs)
      if (ce.name == name) e = &ce;
    if (e && !e->Ok()) {
      c.status = e->status ? NameOf(*e->status) : "failed";
      const bool everywhere = std::all_of(sessions.begin(), sessions.end(), [&](const SessionMeasure& o) {
        const ConfigEntry* oe = o.results.measured.Config(name);
        return oe && !oe->Ok() && oe->reason == e->reason;
      });
      c.reason = fmt::format("{}: {}", everywhere ? "in every session" : "in session '" + m.session.name + "'",
                             e->reason.value_or("no reason given"));
      return c;
    }
    if (e) c.repeats = int(e->captures.size());
    auto it = m.series.find(name);
    if (it == m.series.end()) continue;
    const ProbeSeries& s = it->second;
    const SummaryRow* row = m.results.measured.Row(name);
    SuiteSessionRow r{m.session.name, int64_t(s.flip.size()), int64_t(Sum(s.flip))};
    r.flip_rate = r.probes ? double(r.flips) / double(r.probes) : 0;
    r.kl_mean = r.probes ? Sum(s.kl) / double(r.probes) : 0;
    r.above_floor = row && row->above_floor.value_or(false);
    if (row && row->forks)
      r.damage_rate = row->forks->damage_rate, r.damage = row->forks->damage, r.followed = row->forks->followed;
    if (m.results.recipe)
      if (const RecipeRankingRow* rr = m.results.recipe->Row(name); rr && rr->tie_group) r.rank = int(*rr->tie_group);
    const double w = m.session.weight;
    flips.push_back(ClusterOf(s.flip, w, o.block));
    kls.push_back(ClusterOf(s.kl, w, o.block));
    forked |= r.damage_rate.has_value();
    // Forks are few: a session's damage is one block (its estimated damaging flips per probe).
    damage.push_back({w, {{r.damage_rate.value_or(0) * double(r.probes), double(r.probes)}}});
    flip_w.push_back(w * double(r.flips)), dmg_w.push_back(w * r.damage_rate.value_or(0) * double(r.probes));
    probes_w.push_back(w * double(r.probes));
    c.probes += int64_t(std::llround(w * double(r.probes))), c.flips += int64_t(std::llround(w * double(r.flips)));
    AddKinds(s, m.session.name, c.kinds);
    AddDepth(s, m.session.name, o.window, c.depth);
    c.sessions.push_back(r);
  }
  if (c.sessions.empty()) return c;
  BootstrapOptions bo;
  bo.replicates = o.replicates;
  c.flip_rate = Figure(ClusteredRate(flips, bo), NaiveRateInterval(flips));
  c.kl_mean = Figure(ClusteredRatio(kls, bo));
  if (forked) c.damage_rate = Figure(ClusteredRatio(damage, bo));
  c.above_floor = c.flip_rate->value > floor_threshold;
  c.concentration = ConcentrationOf(flip_w, probes_w, c.sessions, "flips");
  if (!c.concentration && forked) c.concentration = ConcentrationOf(dmg_w, probes_w, c.sessions, "damage");
  std::map<std::string, double> weight;
  for (const SessionMeasure& m : sessions) weight[m.session.name] = m.session.weight;
  AddPooled(c.kinds, weight, [](const KindRow& r) { return FromName<TextKind>(r.kind).value_or(TextKind::kOther); });
  AddPooled(c.depth, weight, [](const DepthRow& r) { return r.begin; });
  return c;
}

}  // namespace

void PoolSessions(const std::vector<SessionMeasure>& sessions, const Experiment& exp, const PoolOptions& o,
                  SuiteResults& out) {
  out.window = o.window, out.block = o.block, out.replicates = o.replicates;
  std::vector<RatioCluster> floor;
  bool identical = true;
  for (const SessionMeasure& m : sessions) {
    out.sessions.push_back(m.session);
    if (!m.floor) continue;
    floor.push_back(ClusterOf(m.floor->flip, m.session.weight, o.block));
    identical &= m.floor_bit_identical;
    SuiteSessionRow r{m.session.name, int64_t(m.floor->flip.size()), int64_t(Sum(m.floor->flip))};
    r.flip_rate = r.probes ? double(r.flips) / double(r.probes) : 0;
    r.kl_mean = r.probes ? Sum(m.floor->kl) / double(r.probes) : 0;
    out.floor_sessions.push_back(r);
  }
  BootstrapOptions bo;
  bo.replicates = o.replicates;
  if (!floor.empty()) out.floor = Figure(ClusteredRate(floor, bo), NaiveRateInterval(floor));
  // As for one session: above the floor means above the upper end of its interval, or flipping at
  // all where every session's repeats were bit for bit identical.
  const double threshold = !out.floor || identical ? 0.0 : out.floor->ci[1];
  out.configs.push_back(SuiteConfig{exp.baseline.name, "ok"});
  for (const ConfigEntry& c : sessions.front().results.measured.configs)
    if (c.name != exp.baseline.name) out.configs.push_back(PoolConfig(sessions, c.name, o, threshold));
}

// The floor's flips and probes over the sessions, weighted and rounded as a configuration's.
std::pair<int64_t, int64_t> FloorCounts(const SuiteResults& suite) {
  double flips = 0, probes = 0;
  for (const SuiteSessionRow& f : suite.floor_sessions) {
    double w = 1;
    for (const SuiteSession& x : suite.sessions)
      if (x.name == f.session) w = x.weight;
    flips += w * double(f.flips), probes += w * double(f.probes);
  }
  return {std::llround(flips), std::llround(probes)};
}

std::vector<RecipeNotRanked> NotRankedInSomeSession(const std::vector<SessionMeasure>& sessions,
                                                    const std::string& baseline) {
  std::vector<RecipeNotRanked> out;
  for (const ConfigEntry& c : sessions.front().results.measured.configs) {
    if (c.name == baseline) continue;
    std::string why;
    for (const SessionMeasure& m : sessions) {
      const ConfigEntry* e = m.results.measured.Config(c.name);
      const std::string* own = m.results.recipe ? m.results.recipe->NotRankedWhy(c.name) : nullptr;
      if (e && !e->Ok())
        why = fmt::format("{} in session '{}' ({})", e->status ? NameOf(*e->status) : "failed", m.session.name,
                          e->reason.value_or("no reason given"));
      else if (own)
        why = fmt::format("not ranked in session '{}' ({})", m.session.name, *own);
      else if (!e)
        why = fmt::format("not run in session '{}'", m.session.name);
      if (!why.empty()) break;
    }
    if (!why.empty())
      out.push_back({c.name, why + ": its pooled figures would rest on the other sessions alone, so it is not "
                                   "ranked against configurations measured in every session"});
  }
  return out;
}

ExperimentResults PooledForRecipe(const std::vector<SessionMeasure>& sessions, const SuiteResults& suite,
                                  const std::vector<RecipeNotRanked>& not_ranked) {
  ExperimentResults r = sessions.front().results;
  r.served.reset();
  r.reference.reset();
  r.recipe.reset();
  Measurements& m = r.measured;
  if (m.floor && suite.floor) {
    m.floor->flip_rate = suite.floor->value, m.floor->flip_rate_ci = suite.floor->ci;
    std::tie(m.floor->flips, m.floor->probes) = FloorCounts(suite);
    m.floor->bit_identical = suite.floor->ci[1] == 0 || std::all_of(sessions.begin(), sessions.end(),
                                                                    [](auto& s) { return s.floor_bit_identical; });
  }
  std::erase_if(m.summary, [&](const SummaryRow& s) {
    return std::any_of(not_ranked.begin(), not_ranked.end(), [&](const auto& n) { return n.config == s.config; });
  });
  for (SummaryRow& s : m.summary) {
    // The baseline's row is its repeats against its first capture: the floor, pooled.
    if (s.config == suite.baseline && suite.floor) {
      s.median_flip_rate = suite.floor->value, s.flip_rate_ci = suite.floor->ci, s.flip_rates = {suite.floor->value};
      std::tie(s.flips, s.probes) = FloorCounts(suite);
      continue;
    }
    const SuiteConfig* c = suite.Config(s.config);
    if (!c || !c->flip_rate) continue;
    s.median_flip_rate = c->flip_rate->value, s.flip_rate_ci = c->flip_rate->ci, s.flip_rates = {c->flip_rate->value};
    s.flips = c->flips, s.probes = c->probes, s.kl_mean = c->kl_mean->value;
    s.above_floor = c->above_floor;
    if (!s.forks) continue;
    ForkCounts sum;
    for (const SessionMeasure& sm : sessions)
      if (const SummaryRow* o = sm.results.measured.Row(s.config); o && o->forks)
        sum.damage += o->forks->damage, sum.repair += o->forks->repair, sum.followed += o->forks->followed,
            sum.teacher_forced_only += o->forks->teacher_forced_only, sum.forkable += o->forks->forkable;
    sum.damage_rate = c->damage_rate ? c->damage_rate->value : 0;
    s.forks = sum;
  }
  return r;
}

RecipeResult PooledRecipe(const std::vector<SessionMeasure>& sessions, const SuiteResults& suite,
                          const ModelInfo& model) {
  const std::vector<RecipeNotRanked> left_out = NotRankedInSomeSession(sessions, suite.baseline);
  const ExperimentResults pooled = PooledForRecipe(sessions, suite, left_out);
  RecipeResult recipe = MakeRecipe(pooled, model);
  // Only those the pooled results would have ranked: one refused in the first session is listed
  // as refused already.
  for (const RecipeNotRanked& n : left_out)
    if (const ConfigEntry* e = pooled.measured.Config(n.config); e && e->Ok()) {
      if (!recipe.not_ranked) recipe.not_ranked.emplace();
      recipe.not_ranked->push_back(n);
    }
  return recipe;
}

std::vector<RankDifference> RankDifferences(const std::vector<SessionMeasure>& sessions, const RecipeResult& pooled) {
  std::vector<RankDifference> out;
  for (const SessionMeasure& m : sessions) {
    if (!m.results.recipe) continue;
    const RecipeResult& own = *m.results.recipe;
    RankDifference d{m.session.name, own.recommended};
    for (const RecipeRankingRow& a : pooled.ranking)
      for (const RecipeRankingRow& b : pooled.ranking) {
        const RecipeRankingRow *sa = own.Row(a.config), *sb = own.Row(b.config);
        if (!a.tie_group || !b.tie_group || !sa || !sb || !sa->tie_group || !sb->tie_group) continue;
        if (*a.tie_group<*b.tie_group&& * sa->tie_group> * sb->tie_group)
          d.reversed.push_back(b.config + " above " + a.config);
      }
    if (d.recommended != pooled.recommended || !d.reversed.empty()) out.push_back(std::move(d));
  }
  return out;
}

}  // namespace flipscope
