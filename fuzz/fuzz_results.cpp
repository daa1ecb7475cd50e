// Fuzz target: results.json as `flipscope report` reads it (ReadResultsFile: the typed results
// model's tolerant readers, comparisons included), then every renderer of the report. A document
// read and written once must be a fixed point: reading what was written and writing it again gives
// the same bytes (no field drifts between reads).
#include <cstdlib>

#include "fuzz/fuzz_input.h"
#include "report/report.h"
#include "results/experiment_results.h"

using namespace flipscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::InputFile(data, size, ".json");
  auto r = ReadResultsFile(path);
  fuzz::ExpectOneLineError(r.status(), path);
  if (!r.ok()) return 0;
  const nlohmann::json once = r->ToJson();
  const nlohmann::json twice = ExperimentResults::FromJson(once).ToJson();
  if (once.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) !=
      twice.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
    std::abort();  // a field changed between two reads of what was written
  (void)RenderHtml(*r);
  (void)RenderMarkdown(*r);
  (void)RenderCsv(*r);
  (void)TerminalSummary(*r, "report.html");
  return 0;
}
