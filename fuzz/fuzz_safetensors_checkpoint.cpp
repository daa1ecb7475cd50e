// Fuzz target: safetensors checkpoints as `tensors` opens them (OpenSafetensors: header, dtypes,
// shapes and offsets checked against the file size), then every tensor's first and last byte.
#include "checkpoint/checkpoint.h"
#include "fuzz/fuzz_input.h"

using namespace flipscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::InputFile(data, size, ".safetensors");
  auto ckpt = OpenSafetensors(path);
  fuzz::ExpectOneLineError(ckpt.status(), path);
  if (!ckpt.ok()) return 0;
  fuzz::TouchEveryTensor(*ckpt);
  return 0;
}
