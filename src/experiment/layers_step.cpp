// [layers]: where each variant's flips against the baseline are born, by the layers stage. Each
// configuration's result is kept beside the results (OUT/layers/NAME.json) and reused while it is
// newer than both captures, so a resumed run does not recompute it.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "experiment/steps.h"
#include "layers/layers.h"
#include "util/util.h"

namespace flipscope {
namespace fs = std::filesystem;

namespace {

const ConfigSpec* SpecOf(const Experiment& exp, const std::string& name) {
  for (const auto& v : exp.variants)
    if (v.name == name) return &v;
  return nullptr;
}

// Why the layers stage cannot look into this configuration ("" when it can).
std::string Unsupported(const ConfigSpec& c) {
  if (c.engine != EngineKind::kLlama) return "a server configuration: its graph is not llama.cpp's to tap";
  if (c.knobs.load > 0) return "runs under load: its batches hold other sequences' tokens";
  return "";
}

// The kept result for these captures and settings, if it is newer than both captures.
std::optional<LayersResult> Kept(const std::string& path, const std::string& base, const std::string& cand,
                                 const LayersSettings& s) {
  std::error_code ec;
  auto t = fs::last_write_time(path, ec);
  if (ec || t < fs::last_write_time(base, ec) || ec || t < fs::last_write_time(cand, ec) || ec) return std::nullopt;
  auto text = ReadFile(path);
  if (!text.ok()) return std::nullopt;
  const auto j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  LayersResult r = LayersResultFromJson(j);
  if (r.max_flips.value_or(-1) != s.options.max_flips || r.exact_asked.value_or(!s.options.exact) != s.options.exact)
    return std::nullopt;
  if (r.allow_drift && !s.options.allow_drift) return std::nullopt;  // a strict run is asked for again
  return r;
}

}  // namespace

bool Layered(const Experiment& exp, const std::string& name) {
  const auto& only = exp.layers.configs;
  return exp.layers.enabled && (only.empty() || std::find(only.begin(), only.end(), name) != only.end());
}

Status LayersAll(const Experiment& exp, ExperimentResults& results, const RunOptions& opts) {
  std::vector<LayersRecord>& out = results.layers.emplace();
  const Measurements& m = results.measured;
  const std::string base = m.configs[0].captures[0];
  const fs::path dir = fs::path(opts.outdir) / "layers";
  for (const ConfigEntry& c : m.configs) {
    const ConfigSpec* spec = SpecOf(exp, c.name);
    if (!spec || !c.Ok() || !Layered(exp, c.name) || FirstRepeatFlips(m, c.name) == 0) continue;
    LayersRecord entry;
    entry.config = c.name;
    if (std::string why = Unsupported(*spec); !why.empty() || exp.baseline.engine != EngineKind::kLlama) {
      entry.skipped = why.empty() ? "the baseline is a server configuration" : why;
      out.push_back(std::move(entry));
      continue;
    }
    const std::string& cand = c.captures[0];
    const std::string kept_path = (dir / (c.name + ".json")).string();
    std::optional<LayersResult> got = Kept(kept_path, base, cand, exp.layers);
    if (!got) {
      opts.log.Info(fmt::format("  recomputing the flips of {} layer by layer", c.name));
      LayersRequest req{base, cand, {}};
      req.options = exp.layers.options;
      req.options.log = opts.log;
      auto r = RunLayers(req);
      if (!r.ok()) {  // e.g. rows that do not reproduce on this machine: said, not fatal
        entry.error = r.status().message();
        out.push_back(std::move(entry));
        continue;
      }
      got = std::move(*r);
      got->max_flips = exp.layers.options.max_flips;
      got->exact_asked = exp.layers.options.exact;
      std::error_code ec;
      fs::create_directories(dir, ec);
      FS_RETURN_IF_ERROR(
          WriteFileAtomic(kept_path, ToJson(*got).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
    }
    entry.result = std::move(*got);
    out.push_back(std::move(entry));
  }
  return Status::Ok();
}

}  // namespace flipscope
