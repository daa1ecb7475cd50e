// support: counting a marker in rendered text (a report's HTML, Markdown or terminal output).
#pragma once

#include <cstddef>
#include <string>

namespace flipscope::fixtures {

// How many times needle occurs in hay, without overlaps.
inline size_t CountOf(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + needle.size())) ++n;
  return n;
}

}  // namespace flipscope::fixtures
