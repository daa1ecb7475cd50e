// Fuzz target: llama-server /completion answers (completion_probabilities with top_logprobs, read
// by --verify-recipe) through the JSON reader and the parser, with the vocabulary size taken from
// the input's first byte. A parsed choice must hold ids inside the vocabulary, one log-probability
// per id, each <= 0 (within rounding); errors must be one line.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "engine/http_internal.h"

using namespace flipscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int32_t n_vocab = 1 + data[0] * 197;  // up to ~50K, like a real vocabulary
  std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  nlohmann::json json = nlohmann::json::parse(body, nullptr, false);
  if (json.is_discarded()) return 0;
  auto r = http::ParseLlamaServerCompletion(json, n_vocab);
  if (!r.ok()) {
    if (r.status().message().find('\n') != std::string::npos) std::abort();  // one line
    return 0;
  }
  if (r->token < 0 || r->token >= n_vocab || r->ids.size() != r->logprobs.size()) std::abort();
  for (size_t i = 0; i < r->ids.size(); ++i)
    if (r->ids[i] < 0 || r->ids[i] >= n_vocab || !(r->logprobs[i] <= 1e-3)) {
      std::fprintf(stderr, "entry %zu: id %d, log-probability %g\n", i, r->ids[i], r->logprobs[i]);
      std::abort();
    }
  return 0;
}
