// Fuzz target: the history stage's documents: the input read as a history.json (HistoryResult,
// then the history's page, Markdown and terminal table) and as a bisect.json (BisectResult, as a
// rerun reads an earlier run's to resume, then its terminal lines). A document read and written
// once must be a fixed point: reading what was written and writing it again gives the same bytes.
#include <cstdlib>

#include "fuzz/fuzz_input.h"
#include "history/history.h"
#include "report/report.h"
#include "results/bisect_result.h"
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
  const BisectResult b = BisectResult::FromJson(doc);
  const std::string bisect_once = text(b.ToJson());
  if (text(BisectResult::FromJson(nlohmann::json::parse(bisect_once)).ToJson()) != bisect_once) std::abort();
  (void)BisectTerminal(b);
  return 0;
}
