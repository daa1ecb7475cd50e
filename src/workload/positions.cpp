// The one parser of position specs ("A-B,C-D", "tool_calls"): capture's full-row probes and the
// branch stage's ranges select positions by the same rule, so a spec means the same everywhere.
#include <fmt/format.h>

#include <charconv>
#include <set>

#include "workload/workload.h"

namespace flipscope {
namespace {

// "A-B" with 0 <= A <= B, digits only; false for anything else.
bool ParseRange(std::string_view item, int64_t* a, int64_t* b) {
  const size_t dash = item.find('-');
  if (dash == std::string_view::npos || dash == 0) return false;
  auto whole = [](std::string_view s, int64_t* v) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
    return ec == std::errc() && end == s.data() + s.size() && !s.empty();
  };
  return whole(item.substr(0, dash), a) && whole(item.substr(dash + 1), b) && *a >= 0 && *b >= *a;
}

}  // namespace

Result<std::vector<int32_t>> SelectPositions(std::string_view spec, int32_t last, const std::vector<Span>& spans,
                                             std::string_view field) {
  std::set<int32_t> pos;
  auto add = [&](int64_t a, int64_t b) {
    for (int64_t p = std::max<int64_t>(0, a); p <= std::min<int64_t>(b, last); ++p) pos.insert(int32_t(p));
  };
  size_t start = 0;
  while (start < spec.size()) {
    const size_t comma = spec.find(',', start);
    const std::string_view item = spec.substr(start, comma == std::string_view::npos ? spec.npos : comma - start);
    start = comma == std::string_view::npos ? spec.size() : comma + 1;
    if (item.empty()) continue;
    if (item == "tool_calls") {
      // Position p predicts token p+1: the positions of a call [begin, end) are begin-1 .. end-2.
      for (const Span& s : spans)
        if (s.kind == SpanKind::kToolCall) add(int64_t(s.begin) - 1, int64_t(s.end) - 2);
      continue;
    }
    int64_t a = 0, b = 0;
    if (!ParseRange(item, &a, &b))
      return Status::Error(fmt::format("{}: '{}' is not tool_calls or a range A-B (0 <= A <= B)", field, item));
    if (a > last)
      return Status::Error(
          fmt::format("{}: range {} starts past the workload's last scored position {}", field, item, last));
    add(a, b);
  }
  return std::vector<int32_t>(pos.begin(), pos.end());
}

}  // namespace flipscope
