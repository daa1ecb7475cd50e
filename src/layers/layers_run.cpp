// The layers stage: two captures -> each recomputed in its own configuration with a graph tap at
// the flip positions -> per flip and layer, the two configurations' rows compared.
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "capture/capture.h"
#include "engine/engine.h"
#include "exact/exact.h"
#include "layers/internal.h"
#include "util/util.h"

namespace flipscope {
namespace {

using json = nlohmann::json;

struct Side {
  const char* label = "";
  std::unique_ptr<CaptureReader> cap;
  CaptureReplay replay;
  int64_t rows_checked = 0, rows_identical = 0, rows_top1_moved = 0;
  std::vector<int32_t> flip_top1;  // the recomputed greedy token at each flip
  double seconds = 0;
};

// The layers of two captures are compared only on one workload and one graph (architecture).
Status CheckSameWorkloadAndArchitecture(const CaptureReader& b, const CaptureReader& c) {
  FS_RETURN_IF_ERROR(CheckSameWorkload(b, c));
  if (b.manifest().model.architecture != c.manifest().model.architecture)
    return Status::Error(c.path() + ": a model of another architecture than " + b.path() + "'s");
  return Status::Ok();
}

// The tensor name of every compared point -> its index (layers.h: PointIndex).
std::unordered_map<std::string, int> PointNames(const LayerTaps& t, int n_layer) {
  std::unordered_map<std::string, int> names = {{t.embedding, 0}, {t.final_norm, PointCount(n_layer) - 1}};
  const std::string* parts[] = {&t.attn_out, &t.attn_resid, &t.mlp_out, &t.layer_out};
  for (int l = 0; l < n_layer; ++l)
    for (int k = 0; k < 4; ++k) names[fmt::format(fmt::runtime(*parts[k]), l)] = PointIndex(l, LayerPart(k));
  return names;
}

// On CUDA the graph callback's cuts undo fused kernels (docs/layers.md): captures made with the
// fusion off reproduce. "" elsewhere, and where the capture already ran with it off.
std::string FusionHint(const EngineRecord& engine) {
  const bool cuda = std::find(engine.backends.begin(), engine.backends.end(), "CUDA") != engine.backends.end();
  if (!cuda || engine.env.count("GGML_CUDA_DISABLE_FUSION")) return "";
  return "on CUDA, captures made with GGML_CUDA_DISABLE_FUSION=1 reproduce with the callback; ";
}

// Checks one recomputed row against its capture, counted in s: its digest, else (drift allowed)
// whether its greedy token moved. Returns the recomputed row's greedy token.
Result<int32_t> CheckRow(Side& s, const Row& r, bool allow_drift) {
  ++s.rows_checked;
  const size_t i = size_t(r.index);
  const bool same = Digest64(r.logits.data(), r.logits.size_bytes()) == s.cap->digest()[i];
  if (!same && !allow_drift)
    return Status::Error(fmt::format(
        "{}: the recomputed row at position {} differs from the capture's (digest): this build or machine does not "
        "reproduce the capture ({}), so its layer rows would not be the capture's ({}--allow-drift compares the two "
        "recomputations instead, docs/layers.md)",
        s.cap->path(), r.position, s.replay.knobs.ToFlags(), FusionHint(s.cap->manifest().engine)));
  const int32_t top1 = same ? s.cap->argmax()[i] : ArgmaxLowest(r.logits);
  s.rows_identical += same;
  s.rows_top1_moved += top1 != s.cap->argmax()[i];
  return top1;
}

// One side's recomputation with the capture's probes (so its chunks and outputs are the
// capture's); every probe row is checked (CheckRow); rows at the flips go to on_row.
Status RunPass(Side& s, const std::vector<Flip>& flips, const std::unordered_map<std::string, int>& names,
               const std::string& marker, const layers::RowFn& on_row, const LayersOptions& o) {
  std::vector<int32_t> at;
  for (const Flip& f : flips) at.push_back(f.position);
  s.flip_top1.assign(flips.size(), -1);
  auto probes = s.cap->positions();
  std::vector<float> buf;
  std::vector<std::vector<bool>> seen(flips.size(), std::vector<bool>(names.size(), false));
  TensorTap tap;
  tap.ubatch_marker = marker;
  tap.want = [&](std::string_view n) { return names.count(std::string(n)) > 0; };
  tap.take = [&](const TappedTensor& v) -> Status {
    const int point = names.at(std::string(v.name));
    for (auto it = std::lower_bound(at.begin(), at.end(), v.pos0); it != at.end() && *it < v.pos0 + v.n_tokens; ++it) {
      FS_ASSIGN_OR_RETURN(int64_t row, layers::RowOf(v, *it, probes));
      buf.resize(size_t(v.width));
      FS_RETURN_IF_ERROR(v.read(row, buf));
      const size_t fi = size_t(it - at.begin());
      seen[fi][size_t(point)] = true;
      FS_RETURN_IF_ERROR(on_row(fi, point, buf));
    }
    return Status::Ok();
  };
  auto engine = LlamaEngine::Create(s.replay.model_path, s.replay.knobs, 1, &tap);
  if (!engine.ok()) return engine.status().Prefixed(s.cap->path());
  const double t0 = NowSeconds();
  const bool progress = o.log.bars;
  Progress bar(std::string("layers ") + s.label, progress ? s.cap->tokens().size() : 0);
  RowSink check = [&](const Row& r) -> Status {
    FS_ASSIGN_OR_RETURN(int32_t top1, CheckRow(s, r, o.allow_drift));
    auto it = std::lower_bound(at.begin(), at.end(), r.position);
    if (it == at.end() || *it != r.position) return Status::Ok();
    s.flip_top1[size_t(it - at.begin())] = top1;
    return on_row(size_t(it - at.begin()), layers::kLogitsPoint, r.logits);
  };
  FS_RETURN_IF_ERROR((*engine)->Prefill(s.cap->tokens(), probes, check, [&](int64_t done) {
    if (progress) bar.Update(uint64_t(done));
  }));
  bar.Finish();
  s.seconds = NowSeconds() - t0;
  for (size_t fi = 0; fi < flips.size(); ++fi)
    for (const auto& [name, point] : names)
      if (!seen[fi][size_t(point)])
        return Status::Error(
            fmt::format("{}: llama.cpp's graph never computed {} at position {} (its tensor names "
                        "changed?)",
                        s.cap->path(), name, flips[fi].position));
  return Status::Ok();
}

// The exact engine on the base's model file over the transcript, its rows at the flips kept; its
// n_layer layers (minutes each on a long transcript) are a stage of log.
Result<json> RunExact(const Side& base, const std::vector<Flip>& flips, layers::Collector& col, int n_layer,
                      const Log& log) {
  ExactOptions eo;
  eo.n_threads = base.replay.knobs.n_threads;
  auto engine = ExactEngine::Create(base.replay.model_path, eo);
  if (!engine.ok()) return engine.status().Prefixed(base.cap->path() + ": the exact reference");
  std::vector<int32_t> at;
  for (const Flip& f : flips) at.push_back(f.position);
  auto keep =
      col.KeepExact([&at](int32_t p) { return size_t(std::lower_bound(at.begin(), at.end(), p) - at.begin()); });
  const double t0 = NowSeconds();
  Progress bar(log, "exact layers", uint64_t(n_layer), "layer");
  FS_RETURN_IF_ERROR(
      (*engine)->ForwardPoints(base.cap->tokens(), at, keep, [&](int64_t done) { bar.Update(uint64_t(done)); }));
  bar.Finish();
  return json{
      {"model", base.replay.model_path}, {"engine", ToJson((*engine)->Describe())}, {"seconds", NowSeconds() - t0}};
}

LayersSide SideOf(const Side& s) {
  return {s.cap->path(),  s.replay.model_path, s.replay.model_sha256, s.replay.knobs.ToFlags(), s.replay.knobs.ToJson(),
          s.rows_checked, s.seconds,           s.rows_identical,      s.rows_top1_moved};
}

// A flip the recomputation still shows: each side's recomputed greedy token is its capture's.
// One it lost keeps its differences but is not attributed (LayersFlip::reproduced).
void MarkReproduced(const std::vector<Flip>& flips, const Side (&sides)[2], std::vector<LayersFlip>& records) {
  for (size_t f = 0; f < records.size(); ++f) {
    LayersFlip& rec = records[f];
    rec.reproduced = sides[0].flip_top1[f] == flips[f].base_token && sides[1].flip_top1[f] == flips[f].cand_token;
    if (!rec.reproduced) rec.birth.reset(), rec.largest_jump.reset();
  }
}

// Opens both captures of req and what re-running them takes; refuses a served-replay capture and
// a pair of two workloads or two architectures.
Status OpenSides(const LayersRequest& req, Side (&sides)[2]) {
  sides[0].label = "base";
  sides[1].label = "cand";
  std::map<std::string, std::string> hashes;
  const std::string* paths[2] = {&req.base_path, &req.cand_path};
  for (int i = 0; i < 2; ++i) {
    FS_ASSIGN_OR_RETURN(sides[i].cap, CaptureReader::Open(*paths[i]));
    FS_ASSIGN_OR_RETURN(sides[i].replay, ReplayOf(*sides[i].cap, "layers", &hashes));
    // The layer taps run one prefill pass; the served schedule (which tokens were decode steps)
    // is not passed to it, so a served capture is refused rather than recomputed as a prefill.
    if (sides[i].replay.knobs.replay == Replay::kServed)
      return Status::Error(*paths[i] +
                           ": a served-replay capture (replay served) cannot be re-run by layers yet; "
                           "capture the pair with replay prefill to see where in the network they part");
  }
  return CheckSameWorkloadAndArchitecture(*sides[0].cap, *sides[1].cap);
}

}  // namespace

Result<LayersResult> RunLayers(const LayersRequest& req) {
  const LayersOptions& o = req.options;
  if (o.max_flips < 0) return Status::InvalidArgument(OptionName("max_flips") + " must be >= 0");
  if (!(o.jump > 1)) return Status::InvalidArgument(OptionName("jump") + " must be > 1");
  if (!(o.floor >= 0)) return Status::InvalidArgument(OptionName("floor") + " must be >= 0");
  Side sides[2];
  FS_RETURN_IF_ERROR(OpenSides(req, sides));
  const ModelInfo& model = sides[0].cap->manifest().model;
  const std::string& arch = model.architecture;
  const int n_layer = model.n_layer;
  if (n_layer < 1) return Status::Error(req.base_path + ": the manifest gives no layer count (model.n_layer)");
  auto taps = TapsFor(arch);
  if (!taps.ok()) return taps.status().Prefixed(req.base_path);
  const auto names = PointNames(*taps, n_layer);

  int64_t available = 0;
  std::vector<Flip> flips = layers::FindFlips(*sides[0].cap, *sides[1].cap, o.max_flips, &available);
  layers::Collector col(flips.size(), PointCount(n_layer));
  json exact_cfg = nullptr;
  if (o.exact) {
    FS_ASSIGN_OR_RETURN(exact_cfg, RunExact(sides[0], flips, col, n_layer, o.log));
  }
  FS_RETURN_IF_ERROR(RunPass(sides[0], flips, names, taps->embedding, col.KeepBase(), o));
  FS_RETURN_IF_ERROR(RunPass(sides[1], flips, names, taps->embedding, col.CompareCand(), o));

  auto detok = LoadDetokenizer(sides[0].replay.model_path);
  LayersResult out;
  out.base = SideOf(sides[0]), out.cand = SideOf(sides[1]);
  out.architecture = arch, out.n_layer = n_layer, out.taps = *taps;
  out.jump = o.jump, out.floor = o.floor, out.allow_drift = o.allow_drift;
  out.flips_available = available, out.flips_compared = int64_t(flips.size());
  out.exact = exact_cfg;
  out.rows_peak_bytes = int64_t(col.peak_bytes());
  out.flips = layers::FlipRecords(flips, col, n_layer, o, detok.ok() ? *detok : nullptr);
  MarkReproduced(flips, sides, out.flips);
  return out;
}

}  // namespace flipscope
