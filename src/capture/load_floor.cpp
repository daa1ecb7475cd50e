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

Result<LoadComparison> CompareToAlone(const std::string& alone_path, const std::string& loaded_path) {
  FS_ASSIGN_OR_RETURN(auto alone, CaptureReader::Open(alone_path));
  FS_ASSIGN_OR_RETURN(auto loaded, CaptureReader::Open(loaded_path));
  if (!std::ranges::equal(alone->tokens(), loaded->tokens()) ||
      !std::ranges::equal(alone->positions(), loaded->positions()))
    return Status::InvalidArgument(loaded_path + ": not the same tokens and probe positions as " + alone_path);
  LoadComparison c;
  c.capture = loaded_path;
  c.probes = int64_t(alone->positions().size());
  for (size_t i = 0; i < alone->positions().size(); ++i) {
    c.identical_rows += alone->digest()[i] == loaded->digest()[i];
    if (alone->argmax()[i] != loaded->argmax()[i])
      c.flipped.push_back({alone->positions()[i], alone->argmax()[i], loaded->argmax()[i]});
  }
  c.flips = int64_t(c.flipped.size());
  c.bit_identical = c.identical_rows == c.probes;
  return c;
}

Result<LoadFloorRecord> RunLoadFloor(const CaptureRequest& req, int repeats) {
  if (req.knobs.load < 1) return Status::InvalidArgument(OptionName("repeats") + " needs " + OptionName("load") + " >= 1");
  if (repeats < 1) return Status::InvalidArgument(OptionName("repeats") + " must be >= 1");
  CaptureRequest alone = req;
  alone.knobs.load = 0;
  FS_RETURN_IF_ERROR(CheckKnobs(alone.engine, alone.knobs));  // a bad knob is reported before any file is read
  // One source for all 1 + R captures: the model is hashed and the workload rendered once.
  FS_ASSIGN_OR_RETURN(CaptureSource source, PrepareCapture(req));
  FS_RETURN_IF_ERROR(RunCapture(alone, source).status());
  LoadFloorRecord out;
  out.alone = req.out_path, out.load = req.knobs.load, out.load_seed = req.knobs.load_seed, out.of = repeats;
  for (int r = 1; r <= repeats; ++r) {
    CaptureRequest loaded = req;
    loaded.out_path = LoadRepeatPath(req.out_path, r);
    FS_RETURN_IF_ERROR(RunCapture(loaded, source).status());
    FS_ASSIGN_OR_RETURN(LoadComparison cmp, CompareToAlone(req.out_path, loaded.out_path));
    out.bit_identical_repeats += cmp.bit_identical;
    out.repeats.push_back(std::move(cmp));
  }
  std::filesystem::path summary(req.out_path);
  summary.replace_extension(".load.json");
  FS_RETURN_IF_ERROR(WriteFileAtomic(summary.string(), ToJson(out).dump(1)));
  out.summary_path = summary.string();
  return out;
}

}  // namespace flipscope
