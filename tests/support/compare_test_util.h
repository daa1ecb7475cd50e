// Test helpers for compare_test: seeded capture pairs written with the real capture writer, and
// the numpy reference run over them.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "capture/capture.h"
#include "engine/engine.h"
#include "testing/tiny_model.h"

namespace flipscope::testutil {

enum class Side { kBase, kCand };

struct CaptureSpec {
  int n_tokens = 700;
  int n_vocab = 1003;  // not a multiple of the vector width: tails are exercised
  int token_offset = 0;
  std::string replay;  // the manifest's knobs.replay and engine.flags; "" = neither recorded
  std::map<std::string, std::string> env;  // the manifest's engine.env (with replay set)
};

inline std::vector<int32_t> TokensFor(const CaptureSpec& s) {
  std::vector<int32_t> t(size_t(s.n_tokens));
  for (int i = 0; i < s.n_tokens; ++i) t[size_t(i)] = (i * 37 + 11 + s.token_offset) % 997;
  return t;
}

// Base positions: every third. The candidate lacks every 51st and holds three the base lacks,
// so both sides skip some.
inline std::vector<int32_t> PositionsFor(Side side, const CaptureSpec& s) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i + 1 < s.n_tokens; ++i) {
    bool base = i % 3 == 0;
    bool cand = (base && i % 51 != 0) || i == 1 || i == 4 || i == 7;
    if (side == Side::kBase ? base : cand) p.push_back(i);
  }
  return p;
}

// Logits at a position, a pure function of (position, side): a peaked base distribution (top-1
// probability from ~0 to ~1); the candidate is a copy (10%), or noisy, sometimes with another
// token pushed up (which makes confident flips).
inline std::vector<float> RowFor(int32_t position, Side side, int n_vocab) {
  std::mt19937_64 rng(uint64_t(position) * 7919 + 17);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_real_distribution<double> uni(0, 1);
  std::vector<float> row(static_cast<size_t>(n_vocab));
  for (auto& x : row) x = float(1.5 * normal(rng));
  row[size_t(position * 31 % n_vocab)] += float(14 * uni(rng));
  if (side == Side::kBase) return row;
  std::mt19937_64 crng(uint64_t(position) * 104729 + 5);
  if (uni(crng) < 0.1) return row;
  for (auto& x : row) x += float(0.15 * normal(crng));
  if (uni(crng) < 0.08) row[size_t(crng() % uint64_t(n_vocab))] += float(4 + 10 * uni(crng));
  return row;
}

// Spans over the whole workload, nested: two messages, a tool call inside the first, a literal
// inside the tool call, and an unlabelled tool result.
inline nlohmann::json ManifestFor(const CaptureSpec& s) {
  nlohmann::json m = {
      {"workload",
       {{"spans",
         {{{"kind", "message"}, {"begin", 0}, {"end", 350}, {"index", 1}, {"label", "message #1 user"}},
          {{"kind", "message"}, {"begin", 350}, {"end", s.n_tokens}, {"index", 2}, {"label", "message #2 assistant"}},
          {{"kind", "tool_call"}, {"begin", 100}, {"end", 160}, {"index", 3}, {"label", "tool call #3"}},
          {{"kind", "literal"}, {"begin", 120}, {"end", 140}, {"index", 1}, {"subkind", "port"}, {"label", "5432"}},
          {{"kind", "tool_result"}, {"begin", 160}, {"end", 200}, {"index", 3}}}}}}};
  if (!s.replay.empty()) {
    m["knobs"] = {{"replay", s.replay}};
    m["engine"] = {{"engine", "llama"}, {"flags", "-fa on"}};
    if (!s.env.empty()) m["engine"]["env"] = s.env;
  }
  return m;
}

// The log-softmax of a row (FP64) and its ids by descending value, ties to the lowest id.
inline std::pair<std::vector<double>, std::vector<int32_t>> Ranked(const std::vector<float>& row) {
  double m = *std::max_element(row.begin(), row.end()), z = 0;
  for (float x : row) z += std::exp(double(x) - m);
  std::vector<double> lp(row.size());
  for (size_t i = 0; i < row.size(); ++i) lp[i] = double(row[i]) - m - std::log(z);
  std::vector<int32_t> ids(row.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return row[size_t(a)] > row[size_t(b)]; });
  return {lp, ids};
}

// Writes (once per process) a capture named `name` under the temp folder; returns its path.
// topk > 0 writes a truncated capture from the same rows.
inline std::string WriteCapture(const std::string& name, Side side, StoreDtype store, int topk,
                                const CaptureSpec& spec) {
  static std::set<std::string> written;
  std::string path = fixtures::TempPath("compare-" + name + ".safetensors");
  if (written.count(path)) return path;
  CaptureLayout layout;
  layout.tokens = TokensFor(spec);
  layout.positions = PositionsFor(side, spec);
  layout.n_vocab = topk > 0 ? 0 : spec.n_vocab;
  layout.store = store;
  layout.topk = topk;
  auto w = CaptureWriter::Create(path, layout, ManifestFor(spec));
  EXPECT_TRUE(w.ok()) << w.status().message();
  if (!w.ok()) return path;
  for (size_t i = 0; i < layout.positions.size(); ++i) {
    auto row = RowFor(layout.positions[i], side, spec.n_vocab);
    Status st;
    if (topk == 0) {
      st = (*w)->WriteRow(int64_t(i), row);
    } else {
      auto [lp, ids] = Ranked(row);
      std::vector<int32_t> top(ids.begin(), ids.begin() + topk);
      std::vector<float> lps;
      for (int32_t id : top) lps.push_back(float(lp[size_t(id)]));
      st = (*w)->WriteTopK(int64_t(i), top, lps, ArgmaxLowest(row));
    }
    EXPECT_TRUE(st.ok()) << st.message();
  }
  Status st = (*w)->Commit();
  EXPECT_TRUE(st.ok()) << st.message();
  written.insert(path);
  return path;
}

inline std::string Capture(const std::string& name, Side side, StoreDtype store, const CaptureSpec& spec = {}) {
  return WriteCapture(name, side, store, 0, spec);
}
inline std::string TopKCapture(const std::string& name, Side side, int k) {
  return WriteCapture(name, side, StoreDtype::kF32, k, {});
}

// stdout of a shell command (the test fails when it exits non-zero).
inline std::string RunCommand(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << cmd;
  return out;
}

// tests/ref/compare_ref.py's JSON (with per-probe values) for a pair.
inline nlohmann::json RunReference(const std::string& base, const std::string& cand, int64_t window) {
  std::string cmd = fmt::format("{} {}/tests/ref/compare_ref.py {} {} --window {} --probes", FLIPSCOPE_PYTHON,
                                FLIPSCOPE_SOURCE_DIR, base, cand, window);
  std::string out = RunCommand(cmd);
  auto j = nlohmann::json::parse(out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << cmd << ": " << out.substr(0, 500);
  return j;
}

// A plain-text workload of a few hundred tokens.
inline std::string WriteWorkloadText(const std::string& name) {
  std::string path = fixtures::TempPath(name);
  std::ofstream f(path);
  for (int i = 0; i < 6; ++i)
    f << "Step " << i << ": the service on port " << 5400 + i * 11 << " restarted after the config at /etc/app/" << i
      << ".conf was reloaded; the operator checked the logs and moved on.\n";
  return path;
}

}  // namespace flipscope::testutil
