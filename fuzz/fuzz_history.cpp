// Fuzz target: a history.json (the history stage's document) read into the typed HistoryResult,
// then the history's page, Markdown and terminal table. A document read and written once must be
// a fixed point: reading what was written and writing it again gives the same bytes.
#include <cstdlib>

#include "fuzz/fuzz_input.h"
#include "history/history.h"
#include "report/report.h"
#include "results/history_result.h"

using namespace flipscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json doc = nlohmann::json::parse(data, data + size, nullptr, false);
  if (doc.is_discarded()) return 0;
  const HistoryResult h = HistoryResult::FromJson(doc);
  const auto text = [](const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  const std::string once = text(h.ToJson());
  if (text(HistoryResult::FromJson(nlohmann::json::parse(once)).ToJson()) != once)
    std::abort();  // a field changed between two reads of what was written
  (void)RenderHistoryHtml(h);
  (void)HistoryMarkdown(h);
  (void)HistoryTerminal(h);
  return 0;
}
