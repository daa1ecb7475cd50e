// Fuzz target: transcripts as users hand them over, before any model is involved: chat JSON
// (object or bare messages array), chat JSONL, token-id lists, and the literal finder that runs
// over every message. LoadWorkload itself needs a model to render and tokenize, so this target
// feeds the parsers it calls first (workload/internal.h).
#include "fuzz/fuzz_input.h"
#include "workload/internal.h"
#include "workload/workload.h"

using namespace flipscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string path = "fuzz.json";
  for (auto parse : {&workload::ParseChatJson, &workload::ParseChatJsonl}) {
    auto t = parse(text, path);
    fuzz::ExpectOneLineError(t.status(), path);
    if (!t.ok()) continue;
    for (const auto& m : t->messages) {
      (void)FindLiterals(m.content);
      for (const auto& call : m.calls) (void)workload::DumpSpaced(call.arguments);
    }
  }
  auto ids = workload::ParseTokenIds(text, path, 49152);
  fuzz::ExpectOneLineError(ids.status(), path);
  (void)FindLiterals(text);
  return 0;
}
