// Fuzz target: experiment files (TOML) through ParseExperiment, the parser `flipscope run` uses.
#include "experiment/experiment.h"
#include "fuzz/fuzz_input.h"

using namespace flipscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::InputFile(data, size, ".toml");
  auto e = ParseExperiment(path);
  fuzz::ExpectOneLineError(e.status(), path);
  return 0;
}
