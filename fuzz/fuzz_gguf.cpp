// Fuzz target: the GGUF reading of `info`, `tensors` and `doctor`: CheckGguf, ReadModelInfo and
// OpenCheckpoint (the tensor table checked against the file). The GGUF parser itself is
// llama.cpp's (a prebuilt library, not instrumented); what is fuzzed is flipscope's use of it.
#include "checkpoint/checkpoint.h"
#include "fuzz/fuzz_input.h"

using namespace flipscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::InputFile(data, size, ".gguf");
  auto info = ReadModelInfo(path);
  fuzz::ExpectOneLineError(info.status(), path);
  if (info.ok()) {
    (void)info->ToJson();
    (void)info->ToText();
  }
  auto ckpt = OpenCheckpoint(path);
  fuzz::ExpectOneLineError(ckpt.status(), path);
  if (!ckpt.ok()) return 0;
  fuzz::TouchEveryTensor(*ckpt);
  return 0;
}
