// Fuzz target: the capture file reader (safetensors length prefix, header JSON, tensor table,
// shapes, offsets, the small tensors' values), then every accessor and a self-comparison, which
// reads each row the way `compare` does (and refuses NaN / +inf rows).
#include <vector>

#include "capture/capture.h"
#include "compare/compare.h"
#include "fuzz/fuzz_input.h"

using namespace flipscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::InputFile(data, size, ".safetensors");
  auto opened = CaptureReader::Open(path);
  fuzz::ExpectOneLineError(opened.status(), path);
  if (!opened.ok()) return 0;
  const CaptureReader& r = **opened;
  const int64_t n = int64_t(r.positions().size());
  std::vector<double> row(r.truncated() ? 0 : size_t(r.n_vocab()));
  for (int64_t i = 0; i < n; ++i) {
    if (!r.truncated()) {
      if (!r.ReadRowF64(i, row).ok()) std::abort();  // a validated file has every row
      if (r.StoredRow(i).empty()) std::abort();
    } else if (r.TopKIds(i).size() != size_t(r.topk()) || r.TopKLogprobs(i).size() != size_t(r.topk())) {
      std::abort();
    }
  }
  CompareOptions options;
  options.threads = 1;
  options.log = Log::Quiet();
  auto c = Compare(r, r, options);
  fuzz::ExpectOneLineError(c.status(), path);
  return 0;
}
