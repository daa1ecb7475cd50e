// Fuzz target: llama-cpp-python release lists as `flipscope history --releases` and [history]
// releases take them (comma-separated text). A parsed release prints back to a text that parses
// to the same release; an accepted list is inside the supported range with no release twice;
// errors are one line.
#include <cstdlib>
#include <string>
#include <vector>

#include "history/history.h"

using namespace flipscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> items;
  for (size_t i = 0; i <= text.size();) {
    size_t j = text.find(',', i);
    if (j == std::string::npos) j = text.size();
    items.push_back(text.substr(i, j - i));
    i = j + 1;
  }
  for (const auto& item : items) {
    auto r = ParseRelease(item);
    if (!r.ok()) {
      if (r.status().message().find('\n') != std::string::npos) std::abort();
      continue;
    }
    auto again = ParseRelease(r->ToString());
    if (!again.ok() || *again != *r) std::abort();
  }
  auto list = ParseHistoryReleases(items);
  if (!list.ok()) {
    if (list.status().message().find('\n') != std::string::npos) std::abort();
    return 0;
  }
  for (size_t i = 0; i < list->size(); ++i) {
    if (!CheckSupported((*list)[i]).ok()) std::abort();
    for (size_t j = 0; j < i; ++j)
      if ((*list)[i] == (*list)[j]) std::abort();
  }
  return 0;
}
