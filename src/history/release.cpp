// llama-cpp-python releases: parsing, and the range whose llama.cpp API the engine drives.
#include <fmt/format.h>

#include <regex>
#include <set>

#include "history/history.h"

namespace flipscope {

namespace {
// The range is kept by hand: a release joins it once scripts/build-worker.sh builds the tree
// against it and the history test (tests/history_test.py) passes over it (docs/history.md).
constexpr Release kOldest{0, 3, 30};
constexpr Release kNewest{0, 3, 36};
}  // namespace

std::string Release::ToString() const { return fmt::format("{}.{}.{}", major, minor, patch); }

Release OldestSupported() { return kOldest; }
Release NewestSupported() { return kNewest; }

Result<Release> ParseRelease(const std::string& text) {
  static const std::regex form(R"((?:llama-cpp-python==)?(\d{1,4})\.(\d{1,4})\.(\d{1,4}))");
  std::smatch m;
  if (!std::regex_match(text, m, form))
    return Status::InvalidArgument(
        fmt::format("llama-cpp-python release '{}': expected a version such as {}", text, kNewest.ToString()));
  return Release{std::stoi(m[1]), std::stoi(m[2]), std::stoi(m[3])};
}

Status CheckSupported(const Release& r) {
  if (r >= kOldest && r <= kNewest) return Status::Ok();
  return Status::Refused(
      fmt::format("llama-cpp-python {}: its llama.cpp API is outside the range flipscope's engine drives ({} to {}; "
                  "docs/history.md)",
                  r.ToString(), kOldest.ToString(), kNewest.ToString()));
}

Result<std::vector<Release>> ParseHistoryReleases(const std::vector<std::string>& texts) {
  if (texts.size() < 2)
    return Status::InvalidArgument(
        fmt::format("a history needs at least two llama-cpp-python releases ({} given)", texts.size()));
  std::vector<Release> out;
  std::set<Release> seen;
  for (const auto& t : texts) {
    FS_ASSIGN_OR_RETURN(Release r, ParseRelease(t));
    FS_RETURN_IF_ERROR(CheckSupported(r));
    if (!seen.insert(r).second)
      return Status::InvalidArgument(fmt::format("llama-cpp-python {} is listed twice", r.ToString()));
    out.push_back(r);
  }
  return out;
}

}  // namespace flipscope
