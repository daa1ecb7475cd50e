// End-to-end checks of the compare stage against tests/ref/compare_ref.py, an independent numpy
// FP64 implementation, over real capture files written by the capture writer: F32, BF16, mixed
// F32/BF16, truncated, full-vs-truncated, a bit-identical repeat, and (when the SmolLM2 model and
// the capture command are there) real captures under two thread counts.
#include "compare/compare.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numeric>
#include <random>

#include "capture/capture.h"
#include "support/compare_test_util.h"
#include "testing/tiny_model.h"
#include "util/util.h"

using namespace flipscope;
using namespace flipscope::testutil;
using nlohmann::json;

namespace {

// |a - b| <= rel |b| + abs, null == NaN. The absolute floor for KL/JS: both sides' FP64
// log-sum-exp carry ~|lse| * 2^-53 of rounding, which no divergence below ~1e-14 can resolve.
constexpr double kKlRel = 1e-9, kKlAbs = 2e-14, kProbRel = 1e-12, kProbAbs = 1e-15;
void ExpectClose(double got, const json& want, double rel, double abs, const std::string& what) {
  if (want.is_null()) {
    EXPECT_TRUE(std::isnan(got)) << what << ": got " << got << ", numpy has none";
    return;
  }
  const double w = want.get<double>();
  EXPECT_LE(std::fabs(got - w), rel * std::fabs(w) + abs) << what << ": got " << got << " numpy " << w;
}

void ExpectKlStats(const compare::KlStats& s, const json& r, const std::string& what) {
  for (auto [key, v] :
       {std::pair{"mean", s.mean}, {"median", s.median}, {"p99", s.p99}, {"max", s.max}, {"min", s.min}})
    ExpectClose(v, r[key], kKlRel, kKlAbs, what + "." + key);
  for (size_t i = 0; i < compare::kKlPercentiles.size(); ++i) {
    std::string key = fmt::format("{:.1f}", compare::kKlPercentiles[i]);
    ExpectClose(s.percentiles[i], r["percentiles"][key], kKlRel, kKlAbs, what + " percentile " + key);
  }
}

// Every figure of c against the numpy reference's output for the same files.
void ExpectMatchesReference(const Comparison& c, const json& ref) {
  ASSERT_EQ(c.probes_compared, ref["probes_compared"].get<int64_t>());
  EXPECT_EQ(c.probes_skipped_base, ref["probes_skipped_base"].get<int64_t>());
  EXPECT_EQ(c.probes_skipped_cand, ref["probes_skipped_cand"].get<int64_t>());
  EXPECT_EQ(c.bit_identical, ref["bit_identical"].get<int64_t>());
  const json& rp = ref["probes"];
  ASSERT_EQ(c.probes.size(), rp.size());
  for (size_t i = 0; i < rp.size(); ++i) {
    const auto& p = c.probes[i];
    const json& r = rp[i];
    const std::string at = fmt::format("probe {} (position {})", i, p.position);
    ASSERT_EQ(p.position, r["position"].get<int32_t>()) << at;
    EXPECT_EQ(p.base_token, r["base_token"].get<int32_t>()) << at;
    EXPECT_EQ(p.cand_token, r["cand_token"].get<int32_t>()) << at;
    EXPECT_EQ(p.flip, r["flip"].get<bool>()) << at;
    EXPECT_EQ(p.identical, r["identical"].get<bool>()) << at;
    ExpectClose(p.kl_base_cand, r["kl_base_cand"], kKlRel, kKlAbs, at + " KL(base||cand)");
    ExpectClose(p.kl_cand_base, r["kl_cand_base"], kKlRel, kKlAbs, at + " KL(cand||base)");
    ExpectClose(p.js, r["js"], kKlRel, kKlAbs, at + " JS");
    ExpectClose(p.base_entropy, r["base_entropy"], kKlRel, kKlAbs, at + " entropy");
    // Divergences are never negative, and those of bit-identical rows are exactly 0.
    for (double v : {p.kl_base_cand, p.kl_cand_base, p.js}) {
      EXPECT_GE(v, 0.0) << at;
      if (p.identical) {
        EXPECT_EQ(v, 0.0) << at;
      }
    }
    ExpectClose(p.top5, r["top5"], 0, 0, at + " top5");
    ExpectClose(p.top10, r["top10"], 0, 0, at + " top10");
    ExpectClose(p.base_prob, r["base_prob"], kProbRel, kProbAbs, at + " base_prob");
    ExpectClose(p.cand_prob, r["cand_prob"], kProbRel, kProbAbs, at + " cand_prob");
    ExpectClose(p.cand_prob_of_base, r["cand_prob_of_base"], kProbRel, kProbAbs, at + " cand_prob_of_base");
    ExpectClose(p.base_margin, r["base_margin"], kKlRel, 1e-12, at + " margin");
  }
  const auto& o = c.overall;
  const json& ro = ref["overall"];
  EXPECT_EQ(o.probes, ro["probes"].get<int64_t>());
  EXPECT_EQ(o.flips, ro["flips"].get<int64_t>());
  EXPECT_EQ(o.confident_flips, ro["confident_flips"].get<int64_t>());
  EXPECT_EQ(o.uncertain_flips, ro["uncertain_flips"].get<int64_t>());
  ExpectClose(o.flip_rate, ro["flip_rate"], 1e-15, 0, "flip_rate");
  ExpectClose(o.flip_rate_ci.first, ro["flip_rate_ci"][0], 1e-12, 1e-15, "ci lo");
  ExpectClose(o.flip_rate_ci.second, ro["flip_rate_ci"][1], 1e-12, 1e-15, "ci hi");
  ExpectClose(o.same_top1_rate, ro["same_top1_rate"], 1e-15, 1e-15, "same_top1_rate");
  ExpectClose(o.top5_agree, ro["top5_agree"], 1e-12, 0, "top5_agree");
  ExpectClose(o.top10_agree, ro["top10_agree"], 1e-12, 0, "top10_agree");
  ExpectClose(o.js_mean, ro["js_mean"], kKlRel, kKlAbs, "js_mean");
  ExpectKlStats(o.kl_base_cand, ro["kl_base_cand"], "kl_base_cand");
  ExpectKlStats(o.kl_cand_base, ro["kl_cand_base"], "kl_cand_base");
  ASSERT_EQ(c.windows.size(), ref["windows"].size());
  for (size_t i = 0; i < c.windows.size(); ++i) {
    const auto& w = c.windows[i];
    const json& r = ref["windows"][i];
    EXPECT_EQ(w.index, r["index"].get<int64_t>());
    EXPECT_EQ(w.begin, r["begin"].get<int64_t>());
    EXPECT_EQ(w.end, r["end"].get<int64_t>());
    EXPECT_EQ(w.probes, r["probes"].get<int64_t>());
    EXPECT_EQ(w.flips, r["flips"].get<int64_t>());
    ExpectClose(w.flip_rate_ci.first, r["flip_rate_ci"][0], 1e-12, 1e-15, "window ci lo");
    ExpectClose(w.flip_rate_ci.second, r["flip_rate_ci"][1], 1e-12, 1e-15, "window ci hi");
    for (auto [key, v] :
         {std::pair{"kl_mean", w.kl_mean}, {"kl_median", w.kl_median}, {"kl_p99", w.kl_p99}, {"kl_max", w.kl_max}})
      ExpectClose(v, r[key], kKlRel, kKlAbs, fmt::format("window {} {}", w.index, key));
  }
  ASSERT_EQ(c.flips.size(), ref["flips"].size());
  for (size_t i = 0; i < c.flips.size(); ++i) {
    const auto& f = c.flips[i];
    const json& r = ref["flips"][i];
    EXPECT_EQ(f.position, r["position"].get<int32_t>());
    EXPECT_EQ(f.window, r["window"].get<int64_t>());
    EXPECT_EQ(f.span, r["span"].is_null() ? "" : r["span"].get<std::string>());
    EXPECT_EQ(f.base_token, r["base_token"].get<int32_t>());
    EXPECT_EQ(f.cand_token, r["cand_token"].get<int32_t>());
    EXPECT_EQ(f.klass, r["class"].get<std::string>());
    ExpectClose(f.cand_prob_of_base_token, r["cand_prob_of_base_token"], kProbRel, kProbAbs, "flip p_cand(base)");
    ExpectClose(f.kl, r["kl"], kKlRel, kKlAbs, "flip kl");
  }
}

// Compares with the library (3 threads, and 1 thread for the determinism check) and numpy.
Comparison CheckPair(const std::string& base, const std::string& cand, int64_t window = 64) {
  CompareOptions o;
  o.window = window;
  o.threads = 3;
  o.log.bars = false;
  auto c = CompareFiles(base, cand, o);
  EXPECT_TRUE(c.ok()) << c.status().message();
  if (!c.ok()) return {};
  json ref = RunReference(base, cand, window);
  ExpectMatchesReference(*c, ref);
  o.threads = 1;
  auto one = CompareFiles(base, cand, o);
  EXPECT_TRUE(one.ok());
  json a = ToJson(*c), b = ToJson(*one);
  a.erase("timing");
  b.erase("timing");
  EXPECT_EQ(a.dump(), b.dump()) << "results depend on the thread count";
  return std::move(c).value();
}

}  // namespace

TEST(Compare, F32PairMatchesNumpy) {
  auto c =
      CheckPair(Capture("f32-base", Side::kBase, StoreDtype::kF32), Capture("f32-cand", Side::kCand, StoreDtype::kF32));
  EXPECT_GT(c.overall.flips, 5);  // the generator makes flips of every class
  EXPECT_GT(c.overall.confident_flips, 0);
  EXPECT_GT(c.overall.uncertain_flips, 0);
  EXPECT_GT(c.probes_skipped_base, 0);
  EXPECT_GT(c.probes_skipped_cand, 0);
  EXPECT_GT(c.bit_identical, 0);  // some candidate rows are copies
  EXPECT_LT(c.bit_identical, c.probes_compared);
  EXPECT_FALSE(c.truncated);
  // Spans come from the base manifest: every flip lies in a message span at least.
  for (const auto& f : c.flips) EXPECT_FALSE(f.span.empty()) << f.position;
}

TEST(Compare, EveryKernelInstructionSetMatchesNumpy) {
  const std::string base = Capture("f32-base", Side::kBase, StoreDtype::kF32);
  const std::string cand = Capture("f32-cand", Side::kCand, StoreDtype::kF32);
  const std::string bf_base = Capture("bf16-base", Side::kBase, StoreDtype::kBF16);
  const std::string bf_cand = Capture("bf16-cand", Side::kCand, StoreDtype::kBF16);
  const std::string initial = compare::KernelIsa();
  int ran = 0;
  for (const char* isa : {"avx512", "avx2", "baseline"}) {
    if (!compare::SetKernelIsa(isa).ok()) continue;  // not on this CPU
    SCOPED_TRACE(isa);
    CheckPair(base, cand);
    CheckPair(bf_base, bf_cand);
    ++ran;
  }
  EXPECT_GE(ran, 1);
  EXPECT_FALSE(compare::SetKernelIsa("sse9").ok());
  ASSERT_TRUE(compare::SetKernelIsa(initial).ok());
}

TEST(Compare, Bf16AndMixedPrecisionMatchNumpy) {
  CheckPair(Capture("bf16-base", Side::kBase, StoreDtype::kBF16), Capture("bf16-cand", Side::kCand, StoreDtype::kBF16));
  // The same rows stored as F32 and as BF16: flips are decided on the native argmax, so none.
  auto c = CheckPair(Capture("f32-base", Side::kBase, StoreDtype::kF32),
                     Capture("bf16-base", Side::kBase, StoreDtype::kBF16));
  EXPECT_EQ(c.overall.flips, 0);
  EXPECT_GT(c.overall.kl_base_cand.mean, 0);
  EXPECT_EQ(c.bit_identical, 0);
}

TEST(Compare, TruncatedPairsMatchNumpy) {
  auto c = CheckPair(TopKCapture("topk-base", Side::kBase, 20), TopKCapture("topk-cand", Side::kCand, 20));
  EXPECT_TRUE(c.truncated);
  EXPECT_EQ(ToJson(c)["truncated"], true);
  EXPECT_GT(c.overall.flips, 0);
  // Full base against a truncated candidate, and a top-5 capture (top-10 agreement unknown).
  auto mixed = CheckPair(Capture("f32-base", Side::kBase, StoreDtype::kF32), TopKCapture("topk-cand", Side::kCand, 20));
  EXPECT_TRUE(mixed.truncated);
  auto k5 = CheckPair(TopKCapture("topk5-base", Side::kBase, 5), TopKCapture("topk5-cand", Side::kCand, 5));
  EXPECT_TRUE(std::isnan(k5.overall.top10_agree));
  EXPECT_TRUE(ToJson(k5)["overall"]["top10_agree"].is_null());
}

TEST(Compare, RepeatIsBitIdentical) {
  std::string a = Capture("f32-base", Side::kBase, StoreDtype::kF32);
  std::string b = Capture("f32-base-again", Side::kBase, StoreDtype::kF32);
  auto c = CheckPair(a, b);
  EXPECT_EQ(c.bit_identical, c.probes_compared);
  EXPECT_EQ(c.overall.flips, 0);
  EXPECT_EQ(c.overall.kl_base_cand.max, 0.0);
  EXPECT_EQ(c.overall.js_mean, 0.0);  // not +-1e-17 from the last bits of log m against x - lse
  // The same for truncated rows (the tail-bucket path).
  auto k = CheckPair(TopKCapture("topk-base", Side::kBase, 20), TopKCapture("topk-base-again", Side::kBase, 20));
  EXPECT_EQ(k.overall.kl_base_cand.max, 0.0);
  EXPECT_EQ(k.overall.js_mean, 0.0);
  EXPECT_NE(RenderCompareTable({c}).find(
                fmt::format("bit-for-bit identical: {} of {} probes", c.probes_compared, c.probes_compared)),
            std::string::npos);
  EXPECT_EQ(ToJson(c)["all_bit_identical"], true);
}

// Which computation each side measured: the replay from the manifests' knobs, a capture without
// one counted as a prefill (the only replay there was), shown on the terminal and in the JSON.
TEST(Compare, SaysWhichReplayEachSideUsed) {
  CaptureSpec served;
  served.replay = "served";
  auto c = CheckPair(Capture("f32-base", Side::kBase, StoreDtype::kF32),
                     Capture("f32-cand-served", Side::kCand, StoreDtype::kF32, served));
  EXPECT_EQ(c.base_replay, "prefill");
  EXPECT_EQ(c.cand_replay, "served");
  EXPECT_NE(RenderCompareTable({c}).find("ran with: base ? replay prefill; candidate -fa on replay served"),
            std::string::npos)
      << RenderCompareTable({c});
  EXPECT_EQ(ToJson(c)["replay"], (nlohmann::json{{"base", "prefill"}, {"cand", "served"}}));
  EXPECT_EQ(ToJson(c)["flags"]["cand"], "-fa on");
}

// Two captures with the same flags under other ggml variables (CUDA's fusion off) computed
// differently: the variables lead each side's "ran with".
TEST(Compare, SaysWhichGgmlVariablesEachSideRanUnder) {
  CaptureSpec plain, unfused;
  plain.replay = unfused.replay = "prefill";
  unfused.env = {{"GGML_CUDA_DISABLE_FUSION", "1"}};
  auto c = CheckPair(Capture("f32-base-plain", Side::kBase, StoreDtype::kF32, plain),
                     Capture("f32-cand-unfused", Side::kCand, StoreDtype::kF32, unfused));
  EXPECT_EQ(c.base_flags, "-fa on");
  EXPECT_EQ(c.cand_flags, "GGML_CUDA_DISABLE_FUSION=1 -fa on");
  EXPECT_NE(RenderCompareTable({c}).find("candidate GGML_CUDA_DISABLE_FUSION=1 -fa on replay prefill"),
            std::string::npos)
      << RenderCompareTable({c});
}

TEST(Compare, RefusesDifferentTokensAndVocabularies) {
  std::string base = Capture("f32-base", Side::kBase, StoreDtype::kF32);
  CaptureSpec other;
  other.token_offset = 1;
  std::string moved = Capture("f32-other-tokens", Side::kCand, StoreDtype::kF32, other);
  auto r = CompareFiles(base, moved, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(base), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(moved), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("different tokens"), std::string::npos) << r.status().message();
  CaptureSpec vocab;
  vocab.n_vocab = 1000;
  std::string small = Capture("f32-small-vocab", Side::kCand, StoreDtype::kF32, vocab);
  r = CompareFiles(base, small, {});
  ASSERT_FALSE(r.ok());
  // Two models: said as such, with each model's vocabulary, not as a token difference.
  EXPECT_NE(r.status().message().find("models with different tokenizers"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("1003 tokens) vs "), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("1000 tokens)"), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find("fed different tokens"), std::string::npos) << r.status().message();
  r = CompareFiles(base, base + ".missing", {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(".missing"), std::string::npos);
}

TEST(Compare, FlipDetailsWithADetokenizer) {
  CompareOptions o;
  o.window = 64;
  o.log.bars = false;
  o.context_chars = 12;
  o.detokenize = [](int32_t id) { return id % 7 == 0 ? std::string("é") : "t" + std::to_string(id) + " "; };
  auto c = CompareFiles(Capture("f32-base", Side::kBase, StoreDtype::kF32),
                        Capture("f32-cand", Side::kCand, StoreDtype::kF32), o);
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_FALSE(c->flips.empty());
  for (const auto& f : c->flips) {
    EXPECT_EQ(f.base_text, o.detokenize(f.base_token));
    EXPECT_EQ(f.cand_text, o.detokenize(f.cand_token));
    // The context ends with the text of the token at the flip's position, holds 12 code points.
    EXPECT_TRUE(f.context.ends_with(o.detokenize(TokensFor({})[size_t(f.position)]))) << f.context;
    auto cps = std::count_if(f.context.begin(), f.context.end(), [](char ch) { return (ch & 0xC0) != 0x80; });
    if (f.position > 10) {
      EXPECT_EQ(cps, 12) << f.context;
    }
  }
  json j = ToJson(*c);
  EXPECT_EQ(j["flips"][0]["base_text"], c->flips[0].base_text);
  EXPECT_EQ(j["kl_direction"], "KL(base||cand) = sum P_base (log P_base - log P_cand)");
}

TEST(Compare, CliGatesAndFormats) {
  std::string exe = std::string(FLIPSCOPE_BINARY_DIR) + "/bin/flipscope";
  ASSERT_TRUE(std::filesystem::exists(exe)) << exe << " is not built";
  std::string base = Capture("f32-base", Side::kBase, StoreDtype::kF32);
  std::string cand = Capture("f32-cand", Side::kCand, StoreDtype::kF32);
  auto exit_code = [&](const std::string& args) {
    int st = std::system(fmt::format("{} compare {} {} -q {} >/dev/null 2>&1", exe, base, cand, args).c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  // The pair flips 25 of 219 probes (11.4%) with a mean KL(base||cand) of 0.168.
  EXPECT_EQ(exit_code("--fail-above 5%"), 3);
  EXPECT_EQ(exit_code("--fail-above 0.2"), 0);
  EXPECT_EQ(exit_code("--max-kl 0.1"), 3);
  EXPECT_EQ(exit_code("--max-kl 0.5 --fail-above 20%"), 0);
  EXPECT_EQ(exit_code("--fail-above 5x"), 1);
  EXPECT_EQ(exit_code("--json --csv"), 1);
  // --json is the library's ToJson; --csv has one row per window plus the overall row.
  CompareOptions o;
  o.window = 64;
  o.log.bars = false;
  auto c = CompareFiles(base, cand, o);
  ASSERT_TRUE(c.ok());
  json cli = json::parse(RunCommand(fmt::format("{} compare {} {} --window 64 --json -q --no-text", exe, base, cand)));
  json lib = ToJson(*c);
  cli.erase("timing");
  lib.erase("timing");
  EXPECT_EQ(cli, lib);
  std::string csv = RunCommand(fmt::format("{} compare {} {} --window 64 --csv -q", exe, base, cand));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + int64_t(c->windows.size()) + 1);
}

TEST(Compare, SmolLM2CapturesMatchNumpy) {
  std::string model = fixtures::SmolLM2Path();
  std::string exe = std::string(FLIPSCOPE_BINARY_DIR) + "/bin/flipscope";
  ASSERT_FALSE(model.empty()) << "SmolLM2 is not in the cache (make test fetches it)";
  ASSERT_TRUE(std::filesystem::exists(exe)) << exe << " is not built";
  std::string a = fixtures::TempPath("smol-t1.safetensors"), b = fixtures::TempPath("smol-q4kv.safetensors");
  std::string workload = WriteWorkloadText("smol-workload.txt");
  // A 4-bit KV cache makes real flips; the thread and batch changes make every row differ.
  for (auto [out, knobs] : {std::pair{a, "-t 1"}, {b, "-t 2 -ub 32 -fa on -ctk q4_0 -ctv q4_0"}}) {
    std::string cmd =
        fmt::format("{} capture -q -m {} -w {} -o {} --stride 2 -c 512 {} 2>&1", exe, model, workload, out, knobs);
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  Comparison c = CheckPair(a, b, 64);
  EXPECT_GT(c.overall.flips, 0);
  // The CLI names the flipped tokens with the vocabulary of the model in the manifest.
  json cli = json::parse(RunCommand(fmt::format("{} compare {} {} --window 64 --json -q", exe, a, b)));
  ASSERT_EQ(cli["flips"].size(), c.flips.size());
  for (const auto& f : cli["flips"]) {
    EXPECT_TRUE(f["base_text"].is_string());
    EXPECT_TRUE(f["context"].is_string());
    EXPECT_FALSE(f["context"].get<std::string>().empty());
  }
}

// A row holding NaN or +inf has no probability distribution: compare refuses the pair, naming the
// file and the probe's position, rather than let NaN into FP64 metrics. -inf (a masked token) is
// a valid logit; a row of nothing but -inf is not.
TEST(Compare, RefusesNonFiniteRows) {
  const std::string base = Capture("f32-base", Side::kBase, StoreDtype::kF32);
  auto reader = CaptureReader::Open(base);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  const int64_t probe = 5;
  const int32_t position = (*reader)->positions()[probe];
  const int32_t n_vocab = (*reader)->n_vocab();
  // logits is the last tensor (docs/capture-format.md): row `probe` starts this far into the file.
  const uint64_t row_at = (*reader)->file_size() - uint64_t((*reader)->positions().size() - probe) * n_vocab * 4;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const char* name;
    std::vector<float> values;  // written over the row from its first entry
    bool refused;
  };
  const std::vector<Case> cases = {{"nan", {0.0f, nan}, true},
                                   {"plus-inf", {inf}, true},
                                   {"minus-inf", {-inf, -inf}, false},
                                   {"all-minus-inf", std::vector<float>(size_t(n_vocab), -inf), true}};
  for (const Case& c : cases) {
    std::string bytes = *ReadFile(base);
    std::memcpy(bytes.data() + row_at, c.values.data(), c.values.size() * 4);
    const std::string path = fixtures::TempPath(std::string("compare-nonfinite-") + c.name + ".safetensors");
    ASSERT_TRUE(WriteFileAtomic(path, bytes).ok());
    for (auto [a, b] : {std::pair{base, path}, std::pair{path, base}}) {
      auto r = CompareFiles(a, b, {});
      EXPECT_EQ(r.ok(), !c.refused) << c.name << ": " << r.status().message();
      if (!c.refused) continue;
      const std::string msg = r.status().message();  // a copy: status() is a temporary
      EXPECT_EQ(msg.rfind(path + ": probe at position " + std::to_string(position) + ": ", 0), 0u) << msg;
      EXPECT_NE(msg.find("NaN or +inf"), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
}
