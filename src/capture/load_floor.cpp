// The floor under load: one capture alone, R under load, and how many of the R are bit-for-bit
// the alone one (and where they are not, which greedy choices flipped).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "capture/capture.h"
#include "util/util.h"

namespace flipscope {

std::string LoadRepeatPath(const std::string& alone, int r) {
  std::filesystem::path p(alone);
  return (p.parent_path() / fmt::format("{}.load{}{}", p.stem().string(), r, p.extension().string())).string();
}

Result<nlohmann::json> CompareToAlone(const std::string& alone_path, const std::string& loaded_path) {
  FS_ASSIGN_OR_RETURN(auto alone, CaptureReader::Open(alone_path));
  FS_ASSIGN_OR_RETURN(auto loaded, CaptureReader::Open(loaded_path));
  if (!std::ranges::equal(alone->tokens(), loaded->tokens()) ||
      !std::ranges::equal(alone->positions(), loaded->positions()))
    return Status::InvalidArgument(loaded_path + ": not the same tokens and probe positions as " + alone_path);
  int64_t identical = 0, flips = 0;
  nlohmann::json flipped = nlohmann::json::array();
  for (size_t i = 0; i < alone->positions().size(); ++i) {
    identical += alone->digest()[i] == loaded->digest()[i];
    if (alone->argmax()[i] == loaded->argmax()[i]) continue;
    ++flips;
    flipped.push_back(
        {{"position", alone->positions()[i]}, {"alone", alone->argmax()[i]}, {"loaded", loaded->argmax()[i]}});
  }
  const int64_t n = int64_t(alone->positions().size());
  return nlohmann::json{{"capture", loaded_path},          {"probes", n},    {"identical_rows", identical},
                        {"bit_identical", identical == n}, {"flips", flips}, {"flipped", flipped}};
}

Result<nlohmann::json> RunLoadFloor(const CaptureRequest& req, int repeats) {
  if (req.knobs.load < 1) return Status::InvalidArgument("repeats needs load >= 1");
  if (repeats < 1) return Status::InvalidArgument("repeats must be >= 1");
  CaptureRequest alone = req;
  alone.knobs.load = 0;
  FS_RETURN_IF_ERROR(CheckKnobs(alone.engine, alone.knobs));  // a bad knob is reported before any file is read
  // One source for all 1 + R captures: the model is hashed and the workload rendered once.
  FS_ASSIGN_OR_RETURN(CaptureSource source, PrepareCapture(req));
  FS_RETURN_IF_ERROR(RunCapture(alone, source).status());
  nlohmann::json out = {{"alone", req.out_path},
                        {"load", req.knobs.load},
                        {"load_seed", req.knobs.load_seed},
                        {"repeats", nlohmann::json::array()}};
  int identical = 0;
  for (int r = 1; r <= repeats; ++r) {
    CaptureRequest loaded = req;
    loaded.out_path = LoadRepeatPath(req.out_path, r);
    FS_RETURN_IF_ERROR(RunCapture(loaded, source).status());
    FS_ASSIGN_OR_RETURN(nlohmann::json cmp, CompareToAlone(req.out_path, loaded.out_path));
    identical += cmp["bit_identical"].get<bool>();
    out["repeats"].push_back(cmp);
  }
  out["bit_identical_repeats"] = identical;
  out["of"] = repeats;
  std::filesystem::path summary(req.out_path);
  summary.replace_extension(".load.json");
  FS_RETURN_IF_ERROR(WriteFileAtomic(summary.string(), out.dump(1)));
  out["summary_path"] = summary.string();
  return out;
}

}  // namespace flipscope
