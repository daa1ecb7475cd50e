// `flipscope layers BASE CAND -o LAYERS.json [--html LAYERS.html] [--max-flips N] [--jump X]
//  [--floor X] [--exact] [--allow-drift]`: where each flip between two captures is born, layer by layer.
#include <fmt/format.h>

#include <filesystem>

#include "cli/commands.h"
#include "layers/layers.h"
#include "report/report.h"
#include "util/util.h"

namespace flipscope::cli {

namespace {

void PrintSummary(const LayersResult& out) {
  const LayersSummary s = Summarize(out);
  fmt::print("{} of {} flips recomputed over {} layers ({}); {}\n", out.flips_compared, out.flips_available,
             out.n_layer, out.architecture, ReproductionText(out));
  fmt::print("born in attention {}, in the MLP {}, at the embedding {}, no jump {}\n", s.born_attention, s.born_mlp,
             s.born_embedding, s.born_none);
  for (size_t l = 0; l < s.birth_layers.size(); ++l)
    if (s.birth_layers[l][0] + s.birth_layers[l][1] > 0)
      fmt::print("  layer {:>3}: attention {:>4}  mlp {:>4}\n", l, s.birth_layers[l][0], s.birth_layers[l][1]);
  fmt::print("after the birth, the largest growth is in attention for {}, in the MLP for {} flips\n", s.jump_attention,
             s.jump_mlp);
  fmt::print("median relative difference of the logits at the flips: {:.4g}\n", s.median_logits_rel);
}

Status CheckFolder(const std::string& path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent))
    return Status::Error(path + ": the folder " + parent.string() + " does not exist");
  return Status::Ok();
}

}  // namespace

Action DefineLayers(CLI::App* cmd) {
  struct Opts {
    LayersRequest req;
    std::string out, html;
    bool quiet = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("base", o->req.base_path, "Baseline capture (.safetensors, llama engine)")->required();
  cmd->add_option("cand", o->req.cand_path, "Candidate capture of the same workload")->required();
  cmd->add_option("-o,--output", o->out, "Per-flip, per-layer differences to write (.json)")->required();
  cmd->add_option("--html", o->html, "Also write the charts and each flip's detail as one HTML page");
  cmd->add_option("--max-flips", o->req.options.max_flips, "Only the first N flips by position; 0 = all")
      ->capture_default_str();
  cmd->add_option("--jump", o->req.options.jump,
                  "A flip is born where the residual difference exceeds this many times the largest before it")
      ->capture_default_str();
  cmd->add_option("--floor", o->req.options.floor, "Relative differences below this are rounding, never a birth")
      ->capture_default_str();
  cmd->add_flag("--exact", o->req.options.exact,
                "Also compare both sides with the FP64 exact engine (the base's model file) at every point");
  cmd->add_flag("--allow-drift", o->req.options.allow_drift,
                "Go on when a recomputed row differs from its capture's (CUDA's kernels change when the layers are "
                "read): compare the two recomputations, attribute only the flips they still show");
  cmd->add_flag("-q,--quiet", o->quiet, "No progress bar");
  return [o]() -> int {
    // Refuse a missing output folder before the long run rather than after it.
    for (const std::string* p : {&o->out, &o->html})
      if (!p->empty())
        if (Status st = CheckFolder(*p); !st.ok()) return Fail(st);
    o->req.options.log.bars = !o->quiet;
    auto out = RunLayers(o->req);
    if (!out.ok())
      return Fail(
          FieldsAsFlags(out.status(), {{"max_flips", "--max-flips"}, {"jump", "--jump"}, {"floor", "--floor"}}));
    Status st =
        WriteFileAtomic(o->out, ToJson(*out).dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    if (st.ok() && !o->html.empty()) st = WriteFileAtomic(o->html, RenderLayersHtml(*out));
    if (!st.ok()) return Fail(st);
    PrintSummary(*out);
    fmt::print("wrote {}{}\n", o->out, o->html.empty() ? "" : " and " + o->html);
    return 0;
  };
}

}  // namespace flipscope::cli
