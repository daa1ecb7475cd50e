// Fuzz target: an unfinished tool call as a model writes it (the judge's PartialCallDifference and
// ExtractCall/CheckCall over arbitrary text), against a fixed reference call. The text is the
// model's, so any bytes can come: no crash, and a difference only ever names a place.
#include <nlohmann/json.hpp>
#include <string>

#include "branch/verdict.h"

using namespace flipscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::json ref = {
      {"name", "apply_config"},
      {"arguments", {{"device", "lab-core01"}, {"lines", {"ip access-list extended X", "30 permit tcp any any"}}}}};
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)PartialCallDifference(text, ref);
  const CallText c = ExtractCall("<tool_call>", text, ToolEnvelope{});
  (void)CheckCall(c, false, {}, nullptr);
  return 0;
}
