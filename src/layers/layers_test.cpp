// The layers stage on tiny generated models: a candidate whose one layer's weights are scaled is
// born in that layer's sub-block; the graph tap's rows are checked against the model's own
// weights; a capture that does not reproduce is refused, or with drift allowed its lost flips are not attributed.
#include "layers/layers.h"

#include <ggml.h>
#include <gguf.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "capture/capture.h"
#include "layers/internal.h"
#include "testing/tiny_model.h"
#include "util/util.h"

using namespace flipscope;
namespace fs = std::filesystem;

namespace {

constexpr int kLayers = 4;

fixtures::TinyModelOptions Tiny(const std::string& perturb = "") {
  fixtures::TinyModelOptions o;
  o.n_layer = kLayers;
  o.matrix_type = "f32";
  o.weight_scale = 3;  // peaky enough that a changed layer flips greedy tokens
  o.perturb_tensor = perturb;
  o.perturb_scale = perturb.empty() ? 0 : 1.0f;
  return o;
}

std::string Dir(const std::string& name) {
  std::string d = fixtures::TempPath("layers-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// The capture stage itself over a short text, with several chunks and ubatches (-b 64 -ub 16).
std::string Capture(const std::string& dir, const std::string& model, const std::string& name,
                    const std::string& kv = "f16") {
  std::string work = dir + "/work.txt";
  if (!fs::exists(work)) {
    std::ofstream w(work);
    for (int i = 0; i < 12; ++i) w << "show the port " << 5432 + i * 7 << " on the interface a" << i << ". ";
  }
  CaptureRequest r;
  r.model_path = model;
  r.workload_path = work;
  r.out_path = dir + "/" + name + ".safetensors";
  r.knobs.n_threads = 1;
  r.knobs.cache_type_k = r.knobs.cache_type_v = *FromName<KvCacheType>(kv);
  if (kv == "f32") r.knobs.flash_attn = FlashAttn::kOff;  // llama.cpp's all-F32 path, as in docs/exact.md
  r.knobs.n_batch = 64;
  r.knobs.n_ubatch = 16;
  r.knobs.n_ctx = 512;
  r.plan.stride = 3;
  r.log.bars = false;
  auto m = RunCapture(r);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return r.out_path;
}

nlohmann::json Layers(const std::string& base, const std::string& cand) {
  LayersRequest req{base, cand, {}};
  req.options.log.bars = false;
  auto out = RunLayers(req);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? ToJson(*out) : nlohmann::json();  // the document (docs/layers.md)
}

// Every flip is born at (layer, block), and nothing before that sub-block differs at all.
void ExpectBornAt(const nlohmann::json& out, int layer, const std::string& block) {
  ASSERT_GT(out["flips"].size(), 0u) << "scaling a whole layer matrix by 2 should flip some probes";
  // Every probe row was recomputed and had its capture's digest (a mismatch fails the run).
  EXPECT_GT(out["config"]["base"]["rows_checked"].get<int>(), 50);
  EXPECT_EQ(out["config"]["base"]["rows_checked"], out["config"]["cand"]["rows_checked"]);
  for (const auto& f : out["flips"]) {
    ASSERT_FALSE(f["birth"].is_null()) << f.dump();
    EXPECT_EQ(f["birth"]["layer"], layer) << f["position"];
    EXPECT_EQ(f["birth"]["block"], block) << f["position"];
    EXPECT_EQ(f["embedding"]["rel"], 0.0);
    for (int l = 0; l < layer; ++l) EXPECT_EQ(f["layers"][size_t(l)]["layer_out"]["rel"], 0.0) << l;
    const auto& at = f["layers"][size_t(layer)];
    if (block == "mlp") {
      EXPECT_EQ(at["attn_resid"]["rel"], 0.0);
    }
    EXPECT_GT(at[block == "mlp" ? "mlp_out" : "attn_out"]["rel"].get<double>(), 1e-3);
    EXPECT_GT(f["logits"]["rel"].get<double>(), 0.0);
  }
  const auto& births = out["summary"]["births"];
  EXPECT_EQ(births[block], out["flips"].size());
  EXPECT_EQ(out["summary"]["birth_layers"][size_t(layer)][block], out["flips"].size());
}

}  // namespace

TEST(DiffRows, AgainstHandComputedValues) {
  std::vector<float> a = {3, 4, 0}, b = {3, 4, 0}, c = {0, 4, 3}, z = {0, 0, 0};
  EXPECT_EQ(DiffRows(a, b).rel, 0.0);
  EXPECT_DOUBLE_EQ(DiffRows(a, b).cosine, 1.0);
  // |a - c| = |(3, 0, -3)| = sqrt(18), |a| = 5; a.c = 16, |a||c| = 25.
  EXPECT_DOUBLE_EQ(DiffRows(a, c).rel, std::sqrt(18.0) / 5);
  EXPECT_DOUBLE_EQ(DiffRows(a, c).cosine, 16.0 / 25);
  EXPECT_EQ(DiffRows(z, z).rel, 0.0);
  EXPECT_TRUE(std::isinf(DiffRows(z, a).rel));
}

TEST(BirthIndex, FirstJumpPastTheEarlierLevel) {
  // Rounding-level noise below the floor, then a jump at index 3.
  std::vector<double> s = {0, 1e-7, 2e-7, 5e-3, 8e-3, 2e-2};
  EXPECT_EQ(BirthIndex(s, 4, 1e-5), 3);
  // A difference from the first sub-block on (e.g. a 4-bit KV cache) is born there.
  std::vector<double> kv = {0, 2e-2, 2.5e-2, 9e-2};
  EXPECT_EQ(BirthIndex(kv, 4, 1e-5), 1);
  // Growth that never jumps by the factor: no birth after the first one.
  std::vector<double> flat = {1e-3, 2e-3, 3e-3};
  EXPECT_EQ(BirthIndex(flat, 4, 1e-5), 0);
  std::vector<double> none = {0, 1e-7, 2e-7};
  EXPECT_EQ(BirthIndex(none, 4, 1e-5), -1);
}

TEST(TapsFor, KnownArchitecturesOnly) {
  EXPECT_EQ(TapsFor("llama")->layer_out, "l_out-{}");
  EXPECT_EQ(TapsFor("gemma3")->attn_resid, "sa_out-{}");
  auto bad = TapsFor("mamba");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("mamba"), std::string::npos);
}

TEST(RunLayers, AScaledMlpMatrixIsBornInItsLayersMlp) {
  std::string d = Dir("mlp");
  ASSERT_TRUE(fixtures::WriteTinyModel(d + "/base.gguf", Tiny()).ok());
  ASSERT_TRUE(fixtures::WriteTinyModel(d + "/cand.gguf", Tiny("blk.2.ffn_down.weight")).ok());
  auto out = Layers(Capture(d, d + "/base.gguf", "base"), Capture(d, d + "/cand.gguf", "cand"));
  ExpectBornAt(out, 2, "mlp");
}

TEST(RunLayers, AScaledAttentionMatrixIsBornInItsLayersAttention) {
  std::string d = Dir("attn");
  ASSERT_TRUE(fixtures::WriteTinyModel(d + "/base.gguf", Tiny()).ok());
  ASSERT_TRUE(fixtures::WriteTinyModel(d + "/cand.gguf", Tiny("blk.1.attn_output.weight")).ok());
  auto out = Layers(Capture(d, d + "/base.gguf", "base"), Capture(d, d + "/cand.gguf", "cand"));
  ExpectBornAt(out, 1, "attention");
}

namespace {
// A copy of capture `src` at `dst` with its manifest and rows edited: what a capture looks like
// that its recorded configuration no longer computes (another machine, another kernel).
void Forge(const std::string& src, const std::string& dst, const std::function<void(nlohmann::json&)>& manifest,
           const std::function<void(std::vector<float>&)>& row_edit) {
  auto rc = CaptureReader::Open(src);
  ASSERT_TRUE(rc.ok());
  nlohmann::json m = (*rc)->manifest().raw;
  manifest(m);
  CaptureLayout layout{std::vector<int32_t>((*rc)->tokens().begin(), (*rc)->tokens().end()),
                       std::vector<int32_t>((*rc)->positions().begin(), (*rc)->positions().end()), (*rc)->n_vocab()};
  auto w = CaptureWriter::Create(dst, layout, m);
  ASSERT_TRUE(w.ok());
  std::vector<float> row(size_t((*rc)->n_vocab()));
  for (int64_t i = 0; i < int64_t(layout.positions.size()); ++i) {
    ASSERT_TRUE((*rc)->ReadRow(i, row).ok());
    row_edit(row);
    ASSERT_TRUE((*w)->WriteRow(i, row).ok());
  }
  ASSERT_TRUE((*w)->Commit().ok());
}

// The candidate capture of the MLP case with its manifest naming the base model (same
// architecture, hash checked): its recorded rows are not what that configuration computes.
std::string ForgedCandidate(const std::string& d, std::string* base) {
  EXPECT_TRUE(fixtures::WriteTinyModel(d + "/base.gguf", Tiny()).ok());
  EXPECT_TRUE(fixtures::WriteTinyModel(d + "/cand.gguf", Tiny("blk.2.ffn_down.weight")).ok());
  *base = Capture(d, d + "/base.gguf", "base");
  const std::string forged = d + "/forged.safetensors";
  Forge(
      Capture(d, d + "/cand.gguf", "cand"), forged,
      [&](nlohmann::json& m) {
        m["model"]["path"] = d + "/base.gguf";
        m["model"]["sha256"] = *Sha256File(d + "/base.gguf");
      },
      [](std::vector<float>&) {});
  return forged;
}
}  // namespace

TEST(RunLayers, ACaptureThatDoesNotReproduceIsRefused) {
  std::string base, forged = ForgedCandidate(Dir("forged"), &base);
  LayersRequest req{base, forged, {}};
  req.options.log.bars = false;
  auto out = RunLayers(req);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("differs from the capture's"), std::string::npos) << out.status().message();
  EXPECT_NE(out.status().message().find("forged.safetensors"), std::string::npos);
  EXPECT_NE(out.status().message().find("--allow-drift"), std::string::npos);
}

// With drift allowed, the same pair runs: the candidate's recomputation is the base model's, so
// every row differs from its capture, no flip survives, and none is attributed to a layer.
TEST(RunLayers, WithDriftAllowedAFlipTheRecomputationLosesIsNotAttributed) {
  std::string base, forged = ForgedCandidate(Dir("drift-lost"), &base);
  LayersRequest req{base, forged, {}};
  req.options.log.bars = false;
  req.options.allow_drift = true;
  auto out = RunLayers(req);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_GT(out->flips.size(), 0u);
  EXPECT_EQ(out->base.rows_identical, out->base.rows_checked);
  EXPECT_EQ(out->base.rows_top1_moved, 0);
  EXPECT_LT(out->cand.rows_identical, out->cand.rows_checked);
  EXPECT_GE(out->cand.rows_top1_moved, int64_t(out->flips.size()));  // at least every flip's row moved back
  const LayersSummary s = Summarize(*out);
  EXPECT_EQ(s.not_reproduced, int64_t(out->flips.size()));
  EXPECT_EQ(s.born_attention + s.born_mlp + s.born_embedding + s.born_none, 0);
  for (const LayersFlip& f : out->flips) {
    EXPECT_FALSE(f.reproduced);
    EXPECT_FALSE(f.birth.has_value());
    EXPECT_EQ(f.logits.rel, 0.0);  // both recomputations are the base model's
  }
  // The document says so and reads back the same.
  nlohmann::json j = ToJson(*out);
  EXPECT_EQ(j["config"]["allow_drift"], true);
  EXPECT_EQ(j["summary"]["not_reproduced"], out->flips.size());
  EXPECT_EQ(ToJson(LayersResultFromJson(j)), j);
  EXPECT_NE(ReproductionText(*out).find("0 of"), std::string::npos) << ReproductionText(*out);
}

// Rows that drift a little (scaled by 1 + 2^-20: another digest, the same greedy tokens) keep every
// flip, and the flips are born where the scaled matrix is, as without drift.
TEST(RunLayers, WithDriftAllowedSmallDriftKeepsEveryFlipAndItsBirth) {
  std::string d = Dir("drift-small");
  ASSERT_TRUE(fixtures::WriteTinyModel(d + "/base.gguf", Tiny()).ok());
  ASSERT_TRUE(fixtures::WriteTinyModel(d + "/cand.gguf", Tiny("blk.2.ffn_down.weight")).ok());
  const std::string base = Capture(d, d + "/base.gguf", "base"), drifted = d + "/drifted.safetensors";
  Forge(
      Capture(d, d + "/cand.gguf", "cand"), drifted, [](nlohmann::json&) {},
      [](std::vector<float>& row) {
        for (float& v : row) v *= 1 + 0x1p-20f;
      });
  LayersRequest req{base, drifted, {}};
  req.options.log.bars = false;
  ASSERT_FALSE(RunLayers(req).ok());  // refused without the flag
  req.options.allow_drift = true;
  auto out = RunLayers(req);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->cand.rows_identical, 0);
  EXPECT_EQ(out->cand.rows_top1_moved, 0);
  EXPECT_EQ(Summarize(*out).not_reproduced, 0);
  ExpectBornAt(ToJson(*out), 2, "mlp");
}

namespace {
// The F32 matrix `name` of a GGUF file, row-major [ne1][ne0].
std::vector<float> GgufMatrix(const std::string& path, const std::string& name, int64_t* width) {
  ggml_context* ctx = nullptr;
  gguf_init_params p = {false, &ctx};
  gguf_context* g = gguf_init_from_file(path.c_str(), p);
  ggml_tensor* t = ggml_get_tensor(ctx, name.c_str());
  std::vector<float> v(static_cast<const float*>(t->data), static_cast<const float*>(t->data) + ggml_nelements(t));
  *width = t->ne[0];
  gguf_free(g);
  ggml_free(ctx);
  return v;
}
}  // namespace

// The tap's row mapping, checked against the weights: layer 0's attention norm row at position
// p is the RMS norm of the token's row of token_embd times attn_norm.weight, and the final norm row at an output (after
// the last layer's row selection) times output.weight is that position's logits row.
TEST(TensorTap, RowsLieAtTheirPositions) {
  std::string d = Dir("tap");
  std::string model = d + "/m.gguf";
  ASSERT_TRUE(fixtures::WriteTinyModel(model, Tiny()).ok());
  std::vector<int32_t> tokens;
  for (int i = 0; i < 100; ++i) tokens.push_back(5 + (i * 37) % 290);
  std::vector<int32_t> probes = {3, 17, 18, 40, 63, 64, 90};
  int64_t ne = 0;
  const std::vector<float> embd = GgufMatrix(model, "token_embd.weight", &ne);
  int64_t n_embd = 0;
  const std::vector<float> norm_w = GgufMatrix(model, "blk.0.attn_norm.weight", &n_embd);
  const std::vector<float> out_w = GgufMatrix(model, "output.weight", &ne);
  std::map<int32_t, std::vector<float>> norm_rows;
  int embd_checked = 0;
  TensorTap tap;
  tap.ubatch_marker = "attn_norm-0";
  tap.want = [](std::string_view n) { return n == "attn_norm-0" || n == "result_norm"; };
  tap.take = [&](const TappedTensor& v) -> Status {
    std::vector<float> row(size_t(v.width));
    for (int32_t p : probes) {
      if (p < v.pos0 || p >= v.pos0 + v.n_tokens) continue;
      FS_ASSIGN_OR_RETURN(int64_t r, layers::RowOf(v, p, probes));
      FS_RETURN_IF_ERROR(v.read(r, row));
      if (v.name == "result_norm") {
        norm_rows[p] = row;
        continue;
      }
      const float* e = embd.data() + size_t(tokens[size_t(p)]) * size_t(v.width);
      double ss = 0;
      for (int64_t i = 0; i < v.width; ++i) ss += double(e[i]) * e[i];
      const double scale = 1 / std::sqrt(ss / double(v.width) + 1e-5);
      for (int64_t i = 0; i < v.width; ++i)
        EXPECT_NEAR(row[size_t(i)], e[i] * scale * norm_w[size_t(i)], 1e-4) << "position " << p << " value " << i;
      ++embd_checked;
    }
    return Status::Ok();
  };
  Knobs k;
  k.n_threads = 1, k.n_ctx = 256, k.n_batch = 64, k.n_ubatch = 16;
  auto e = LlamaEngine::Create(model, k, 1, &tap);
  ASSERT_TRUE(e.ok()) << e.status().message();
  int rows = 0;
  Status st = (*e)->Prefill(
      tokens, probes,
      [&](const Row& r) {
        auto found = norm_rows.find(r.position);
        if (found == norm_rows.end()) return Status::Error("no final norm row tapped at the output position");
        const std::vector<float>& n = found->second;
        for (size_t v = 0; v < r.logits.size(); ++v) {
          double dot = 0;
          for (int64_t i = 0; i < ne; ++i) dot += double(out_w[v * size_t(ne) + size_t(i)]) * n[size_t(i)];
          EXPECT_NEAR(dot, r.logits[v], 1e-3 * (1 + std::abs(dot))) << r.position << " " << v;
        }
        ++rows;
        return Status::Ok();
      },
      nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(rows, int(probes.size()));
  EXPECT_EQ(embd_checked, int(probes.size()));
}

// With --exact, each side is also compared with the FP64 exact engine on the base's model file:
// the base (llama.cpp's all-F32 path: F32 KV cache, no flash attention, F32 weights) stays at F32
// rounding at every point; the
// candidate, whose layer-2 MLP matrix is another one, departs from it in that MLP.
TEST(RunLayers, EachSideAgainstTheExactReference) {
  std::string d = Dir("exact");
  ASSERT_TRUE(fixtures::WriteTinyModel(d + "/base.gguf", Tiny()).ok());
  ASSERT_TRUE(fixtures::WriteTinyModel(d + "/cand.gguf", Tiny("blk.2.ffn_down.weight")).ok());
  LayersRequest req{Capture(d, d + "/base.gguf", "base", "f32"), Capture(d, d + "/cand.gguf", "cand", "f32"), {}};
  req.options.log.bars = false;
  req.options.exact = true;
  auto got = RunLayers(req);
  ASSERT_TRUE(got.ok()) << got.status().message();
  const std::optional<nlohmann::json> out = ToJson(*got);  // the document (docs/layers.md)
  ASSERT_GT((*out)["flips"].size(), 0u);
  for (const auto& f : (*out)["flips"]) {
    const auto& base = f["vs_exact"]["base"];
    const auto& cand = f["vs_exact"]["cand"];
    // F32 rounding, amplified by this peaky model's sharp attention to at most ~2e-4 here.
    EXPECT_LT(base["embedding"].get<double>(), 1e-6);
    for (int l = 0; l < kLayers; ++l)
      for (const char* k : {"attn_out", "attn_resid", "mlp_out", "layer_out"})
        EXPECT_LT(base["layers"][size_t(l)][k].get<double>(), 1e-3) << l << " " << k;
    EXPECT_LT(base["final_norm"].get<double>(), 1e-3);
    EXPECT_LT(cand["layers"][1]["layer_out"].get<double>(), 1e-3);
    EXPECT_LT(cand["layers"][2]["attn_resid"].get<double>(), 1e-3);
    // The candidate's MLP output there is twice the exact one: a relative difference of 1.
    EXPECT_NEAR(cand["layers"][2]["mlp_out"].get<double>(), 1.0, 1e-3);
  }
  EXPECT_EQ((*out)["summary"]["vs_exact_median_layer_out"]["base"].size(), size_t(kLayers));
}
