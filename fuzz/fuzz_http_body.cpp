// Fuzz target: HTTP response bodies of the openai engine (vLLM prompt_logprobs and SGLang
// input_top_logprobs) through the lenient JSON reader and both parsers, with the k and vocabulary
// size taken from the input's first bytes. A parsed result must hold exactly n_entries * k ids,
// each inside the vocabulary or -1 (padding), and errors must be one line.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "engine/http_internal.h"

using namespace flipscope;

namespace {

void Check(const Result<http::PromptTopK>& r, int32_t n_vocab) {
  if (!r.ok()) {
    if (r.status().message().find('\n') != std::string::npos) std::abort();  // one line
    return;
  }
  if (r->ids.size() != r->n_entries * size_t(r->k) || r->logprobs.size() != r->ids.size()) std::abort();
  for (int32_t id : r->ids)
    if (id < -1 || id >= n_vocab) {
      std::fprintf(stderr, "id %d outside the vocabulary of %d\n", id, n_vocab);
      std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int32_t k = 1 + data[0] % 24;
  const int32_t n_vocab = 1 + data[1] * 197;  // up to ~50K, like a real vocabulary
  std::string_view body(reinterpret_cast<const char*>(data + 2), size - 2);
  auto json = http::ParseLenient(body);
  if (!json.ok()) {
    if (json.status().message().find('\n') != std::string::npos) std::abort();
    return 0;
  }
  Check(http::ParseVllm(*json, k, n_vocab), n_vocab);
  Check(http::ParseSglang(*json, k, n_vocab), n_vocab);
  (void)http::ErrorText(body);
  return 0;
}
