// Bisect's pure parts: the criterion, git's commit list, and the search over it.
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <regex>

#include "history/history.h"

namespace flipscope {

namespace {
constexpr const char* kCriterionForms = "not-bit-identical, flips>N or kl>X";
}  // namespace

std::string BisectCriterion::ToString() const {
  switch (kind) {
    case Kind::kNotBitIdentical: return "not-bit-identical";
    case Kind::kFlipsAbove: return fmt::format("flips>{}", int64_t(threshold));
    case Kind::kKlMeanAbove: return fmt::format("kl>{}", threshold);
  }
  return "";
}

Result<BisectCriterion> ParseBisectCriterion(const std::string& text) {
  if (text == "not-bit-identical") return BisectCriterion{};
  static const std::regex flips(R"(flips>(\d{1,9}))");
  static const std::regex kl(R"(kl>((?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d{1,3})?))");
  std::smatch m;
  if (std::regex_match(text, m, flips)) return BisectCriterion{BisectCriterion::Kind::kFlipsAbove, std::stod(m[1])};
  if (std::regex_match(text, m, kl)) {
    const double x = std::strtod(m[1].str().c_str(), nullptr);
    if (std::isfinite(x)) return BisectCriterion{BisectCriterion::Kind::kKlMeanAbove, x};
  }
  return Status::InvalidArgument(fmt::format("bisect criterion '{}': expected {}", text, kCriterionForms));
}

bool IsBad(const BisectCriterion& c, int64_t probes, int64_t bit_identical, int64_t flips, double kl_mean) {
  switch (c.kind) {
    case BisectCriterion::Kind::kNotBitIdentical: return bit_identical < probes;
    case BisectCriterion::Kind::kFlipsAbove: return double(flips) > c.threshold;
    case BisectCriterion::Kind::kKlMeanAbove: return kl_mean > c.threshold;
  }
  return false;
}

Result<std::vector<GitCommit>> ParseCommitList(std::string_view text) {
  static const std::regex line_form("([0-9a-f]{40}|[0-9a-f]{64})\t([^\r\n]*)");
  std::vector<GitCommit> out;
  size_t number = 0;
  for (size_t i = 0; i < text.size();) {
    size_t j = text.find('\n', i);
    if (j == std::string_view::npos) j = text.size();
    const std::string line(text.substr(i, j - i));
    ++number;
    i = j + 1;
    std::smatch m;
    if (!std::regex_match(line, m, line_form))
      return Status::Error(fmt::format("git log output, line {}: expected a commit id, a tab and its subject, got '{}'",
                                       number, line.substr(0, 80)));
    out.push_back(GitCommit{m[1], m[2]});
  }
  return out;
}

Result<BisectSearch> BisectSearch::Create(std::vector<GitCommit> commits) {
  if (commits.empty()) return Status::InvalidArgument("bisect: no commit after good up to bad");
  BisectSearch s;
  s.marks_.assign(commits.size(), Mark::kUntested);
  s.marks_.back() = Mark::kBad;
  s.hi_ = commits.size() - 1;
  s.commits_ = std::move(commits);
  return s;
}

std::optional<size_t> BisectSearch::Next() const {
  // The untested commit nearest the middle of [lo_, hi_): every one there is still unknown.
  const double middle = (double(lo_) + double(hi_) - 1) / 2;
  std::optional<size_t> best;
  for (size_t i = lo_; i < hi_; ++i)
    if (marks_[i] == Mark::kUntested && (!best || std::abs(double(i) - middle) < std::abs(double(*best) - middle)))
      best = i;
  return best;
}

Status BisectSearch::Record(size_t index, Mark mark) {
  if (index >= commits_.size())
    return Status::InvalidArgument(fmt::format("bisect: commit index {} out of range ({} commits)", index, commits_.size()));
  if (mark == Mark::kUntested) return Status::InvalidArgument("bisect: a commit cannot be marked untested");
  const std::string& sha = commits_[index].sha;
  if (mark == Mark::kGood && index >= hi_)
    return Status::Error(fmt::format("bisect: {} is good but comes after {}, which is bad: the criterion is not "
                                     "monotone over this range",
                                     sha.substr(0, 12), commits_[hi_].sha.substr(0, 12)));
  if (mark == Mark::kBad && lo_ > 0 && index < lo_)
    return Status::Error(fmt::format("bisect: {} is bad but comes before {}, which is good: the criterion is not "
                                     "monotone over this range",
                                     sha.substr(0, 12), commits_[lo_ - 1].sha.substr(0, 12)));
  marks_[index] = mark;
  if (mark == Mark::kGood) lo_ = std::max(lo_, index + 1);
  if (mark == Mark::kBad) hi_ = std::min(hi_, index);
  return Status::Ok();
}

std::vector<size_t> BisectSearch::Candidates() const {
  std::vector<size_t> out;
  for (size_t i = lo_; i < hi_; ++i)
    if (marks_[i] != Mark::kGood) out.push_back(i);  // skipped (or, before the end, untested)
  out.push_back(hi_);
  return out;
}

}  // namespace flipscope
