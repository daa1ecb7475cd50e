// Fuzz target: served-replay answers (vLLM /v1/completions logprobs, SGLang /generate
// output_top_logprobs, llama-server /completion completion_probabilities, with their cached-token
// counts) through the lenient JSON reader and ParseServedAnswer. The first byte picks the API and
// the vocabulary size, the second k. A parsed answer must hold k ids inside the vocabulary per step,
// log-probabilities <= 0, a chosen token inside the vocabulary, and counts that add up; errors one line.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "engine/http_internal.h"

using namespace flipscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static const HttpApi kApis[] = {HttpApi::kVllm, HttpApi::kSglang, HttpApi::kLlamaServer};
  const HttpApi api = kApis[data[0] % 3];
  const int32_t n_vocab = 1 + (data[0] / 3) * 587;
  const int32_t k = 1 + data[1] % 8;
  auto json = http::ParseLenient(std::string_view(reinterpret_cast<const char*>(data + 2), size - 2));
  if (!json.ok()) return 0;
  auto r = http::ParseServedAnswer(*json, api, k, n_vocab);
  if (!r.ok()) {
    if (r.status().message().find('\n') != std::string::npos) std::abort();  // one line
    return 0;
  }
  if (r->steps.empty()) std::abort();
  for (const auto& s : r->steps) {
    if (s.token < 0 || s.token >= n_vocab || s.ids.size() != size_t(k) || s.logprobs.size() != size_t(k)) std::abort();
    for (int32_t j = 0; j < k; ++j)
      if (s.ids[size_t(j)] < 0 || s.ids[size_t(j)] >= n_vocab || !(s.logprobs[size_t(j)] <= 0.0f)) {
        std::fprintf(stderr, "id %d, log-probability %g\n", s.ids[size_t(j)], s.logprobs[size_t(j)]);
        std::abort();
      }
  }
  if (r->prompt_tokens >= 0 && r->cached_tokens > r->prompt_tokens) std::abort();
  return 0;
}
