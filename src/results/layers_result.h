// The layers stage's result, typed (docs/layers.md): both captures as recomputed, every flip's
// relative differences layer by layer, where each flip is born and the summary over the flips.
// The layers stage makes it; this file alone turns it into the layers document (`flipscope layers
// -o`, results.json layers[].result) and back.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace flipscope {

// Two rows compared in FP64: ||a - b|| / ||a|| (0 when both are zero) and their cosine.
struct RowDiff {
  double rel = 0;
  double cosine = 1;
};

// The graph tensors that hold one layer's sub-block outputs, as llama.cpp names them ("{}" is
// the layer), plus the embedding and the final norm around the layers.
struct LayerTaps {
  std::string embedding;   // the residual stream entering layer 0 (llama: its attention norm);
                           // the first tapped tensor of every ubatch (TensorTap::ubatch_marker)
  std::string attn_out;    // what attention adds to the residual stream
  std::string attn_resid;  // the residual stream after attention
  std::string mlp_out;     // what the MLP adds
  std::string layer_out;   // the residual stream after the layer
  std::string final_norm;  // the output norm (input of the logits' matrix product)
};

// The four points of a layer, in LayerPart order, as the document names them.
inline constexpr const char* kLayerPartKeys[] = {"attn_out", "attn_resid", "mlp_out", "layer_out"};

// A place along the residual stream: the embedding (layer -1) or a layer's attention or MLP.
struct StreamPlace {
  int layer = -1;
  std::string block;  // "embedding", "attention" or "mlp"
};

// One flip, recomputed in both configurations.
struct LayersFlip {
  int32_t position = 0, base_token = -1, cand_token = -1;
  RowDiff embedding, final_norm, logits;
  std::vector<std::array<RowDiff, 4>> layers;  // per layer, its points in kLayerPartKeys order
  // Where the residual difference first jumps (docs/layers.md) and its size there; none: no jump.
  std::optional<StreamPlace> birth;
  double birth_rel = 0, birth_level_before = 0;
  // After the birth, the sub-block that multiplies the difference the most, and by how much.
  std::optional<StreamPlace> largest_jump;
  double largest_jump_factor = 0;
  // With the exact reference: each side's relative difference from the FP64 rows (base, cand).
  struct VsExact {
    double embedding = 0, final_norm = 0;
    std::vector<std::array<double, 4>> layers;
  };
  std::optional<std::array<VsExact, 2>> vs_exact;
  std::optional<std::string> base_text, cand_text;  // with a detokenizer
  // Whether the two recomputations still part here as the captures did (each side's recomputed
  // greedy token is its capture's). Always so when every row reproduced its capture's digest; with
  // allow_drift a flip the recomputation loses is kept but not attributed (no birth, no jump).
  bool reproduced = true;
};

// One side as recomputed.
struct LayersSide {
  std::string capture, model, model_sha256, flags;
  nlohmann::json knobs;  // the knobs it ran with (Knobs::ToJson)
  int64_t rows_checked = 0;
  double seconds = 0;
  // Of rows_checked, those with their capture's digest and those whose greedy token moved (only
  // with allow_drift can they be fewer than rows_checked, or more than 0).
  int64_t rows_identical = 0, rows_top1_moved = 0;
};

// The whole document.
struct LayersResult {
  LayersSide base, cand;
  std::string architecture;
  int n_layer = 0;
  LayerTaps taps;
  double jump = 0, floor = 0;
  // The recomputations were allowed to differ from their captures (LayersOptions::allow_drift).
  bool allow_drift = false;
  int64_t flips_available = 0, flips_compared = 0, rows_peak_bytes = 0;
  nlohmann::json exact;  // the exact pass (model, engine, seconds); null without one
  std::vector<LayersFlip> flips;
  // The experiment's own settings beside the stage's document ([layers] max_flips, exact).
  std::optional<int64_t> max_flips;
  std::optional<bool> exact_asked;
  // Fields of a document this version does not know, kept as read (forward compatibility).
  nlohmann::json extra = nlohmann::json::object();
};

// Counts and medians over a result's flips (the document's "summary").
struct LayersSummary {
  int64_t flips = 0;
  int64_t not_reproduced = 0;  // flips the recomputation lost: counted here, in nothing below
  int64_t born_embedding = 0, born_attention = 0, born_mlp = 0, born_none = 0;
  std::vector<std::array<int64_t, 2>> birth_layers;  // per layer: born in attention, in the MLP
  int64_t jump_attention = 0, jump_mlp = 0, jump_none = 0;
  std::array<std::vector<double>, 4> median_rel;  // per point (kLayerPartKeys), per layer
  double median_logits_rel = 0;
  std::optional<std::array<std::vector<double>, 2>> vs_exact_median_layer_out;  // base, cand
};
// The summary of a result (a function of its flips and layer count).
LayersSummary Summarize(const LayersResult& r);

// How far the recomputations kept to their captures, as one clause of plain text: "every final row
// reproduced its capture's digest", or each side's rows with their digest and the flips reproduced.
std::string ReproductionText(const LayersResult& r);

// The layers document: config, flips and summary, and the experiment's settings when set.
nlohmann::json ToJson(const LayersResult& r);
// Reads a layers document; never fails (what is missing reads as the default, unknown fields go
// to extra). The summary is not read: Summarize gives it from the flips.
LayersResult LayersResultFromJson(const nlohmann::json& j);

}  // namespace flipscope
