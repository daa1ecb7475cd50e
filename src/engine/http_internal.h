// engine internals for servers over HTTP, shared by http_*.cpp and their tests; not part of the
// stage's interface (engine.h is).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "util/status.h"

namespace flipscope::http {

// ---- Transport --------------------------------------------------------------------------------

struct Response {
  long status = 0;
  std::string body;
};

// Requests to one server with retries and backoff. Every message names the redacted URL and
// path, and never holds the key.
class Client {
 public:
  Client(const HttpOptions& opts, std::string api_key);
  // GET base + path.
  Result<Response> Get(const std::string& path) const;
  // POST base + path with a JSON body.
  Result<Response> Post(const std::string& path, const std::string& json_body) const;
  // "URL/path" with credentials removed, for messages.
  std::string Where(const std::string& path) const;
  // text with every occurrence of the key replaced by "***" (for anything the server echoes).
  std::string Scrub(std::string text) const;

 private:
  Result<Response> Send(const std::string& path, const std::string* body) const;
  HttpOptions opts_;
  std::string base_, key_;
};

// The server's error text from a non-2xx body: its "message" / "error" / "detail" field when the
// body is JSON, else the body itself, on one line and at most 300 characters.
std::string ErrorText(std::string_view body);

// Runs `measured` while o.load filler threads send completion requests (PlanFillerJob's jobs cut
// from pool, at most max_cells tokens each) one after another; the measured request starts 250 ms
// after every filler has sent its first. *record receives every filler request with its timing and how
// many overlapped the measured one. A failed filler request is an error: the load did not happen.
Result<Response> WithFillers(const Client& client, const HttpOptions& o, const std::vector<FillerSource>& pool,
                             int max_cells, const std::function<Result<Response>()>& measured,
                             ServerLoadRecord* record);

// ---- Response bodies ---------------------------------------------------------------------------

// Prompt log-probabilities as parsed: entry i (1 <= i < n_entries) is the top-k of the
// distribution that predicts prompt token i, by descending log-probability (ties: lower id).
struct PromptTopK {
  int32_t k = 0;
  size_t n_entries = 0;
  std::vector<int32_t> ids;     // n_entries * k; entry 0 is unused
  std::vector<float> logprobs;  // n_entries * k
};

// Parses JSON that may hold the non-standard -Infinity / Infinity / NaN literals Python's json
// writes (a -inf log-probability); they become -DBL_MAX / DBL_MAX / null (the parsers read a
// log-probability of -DBL_MAX as -inf).
Result<nlohmann::json> ParseLenient(std::string_view body);

// vLLM /v1/completions: choices[0].prompt_logprobs = [null, {"id": {"logprob", "rank",
// "decoded_token"}}, ...]. Each entry keeps its k most probable ids (vLLM adds the prompt token
// itself when it is outside the top-k). Errors say which entry is wrong and how.
Result<PromptTopK> ParseVllm(const nlohmann::json& body, int32_t k, int32_t n_vocab);
// SGLang /generate: meta_info.input_top_logprobs = [null, [[logprob, id, text], ...], ...].
Result<PromptTopK> ParseSglang(const nlohmann::json& body, int32_t k, int32_t n_vocab);

// vLLM /v1/completions with logprobs and return_tokens_as_token_ids: the generated tokens
// (choices[0].logprobs.tokens = ["token_id:N", ...]) and their probabilities (token_logprobs).
Result<Future> ParseVllmCompletion(const nlohmann::json& body, int32_t n_vocab);
// SGLang /generate with return_logprob: meta_info.output_token_logprobs = [[logprob, id, text], ...].
Result<Future> ParseSglangCompletion(const nlohmann::json& body, int32_t n_vocab);

// llama-server /completion with return_tokens, n_probs > 0 and post_sampling_probs false: the token
// it chose (tokens[0], or completion_probabilities[0].id) and its top_logprobs ([{"id", "logprob"},
// ...]; empty when the server left them out, as it does for an incomplete UTF-8 piece). Errors name the field that is
// missing or wrong; ids outside n_vocab (when > 0) are errors.
Result<ServedChoice> ParseLlamaServerCompletion(const nlohmann::json& body, int32_t n_vocab);

// ---- Served replay over HTTP (http_served.cpp, docs/served.md "Over HTTP") ----------------------

// One generated token: the token chosen and the top-k of the distribution it was chosen from, most
// probable first (ties: lower id).
struct ServedStep {
  int32_t token = -1;
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
};
// A served-replay answer: its generated tokens, and what the server reported about the prompt:
// its length, the tokens it reused from its prefix cache and the ones it computed; -1 = not reported.
struct ServedAnswer {
  std::vector<ServedStep> steps;
  int64_t prompt_tokens = -1, cached_tokens = -1, computed_tokens = -1;
};
// Parses an answer of api "vllm" (/v1/completions with logprobs and return_tokens_as_token_ids),
// "sglang" (/generate with top_logprobs_num) or "llama-server" (/completion with n_probs): at least
// one step, k ids each inside n_vocab (when > 0), log-probabilities <= 0; computed = prompt - cached
// where the server reports no count of its own. Errors name the field.
Result<ServedAnswer> ParseServedAnswer(const nlohmann::json& body, HttpApi api, int32_t k, int32_t n_vocab);

}  // namespace flipscope::http

namespace flipscope {

// The engine's state, shared by http_engine.cpp (prefill, futures) and http_served.cpp.
struct HttpEngine::Impl {
  HttpOptions opts;
  int32_t n_vocab = 0, k = 0;
  http::Client client;
  nlohmann::json server = nlohmann::json::object();  // what the server reported about itself
  int64_t context = 0;                               // the server's context limit in tokens; 0 = not reported
  std::vector<FillerSource> load_pool;               // empty: fillers are cut from the measured tokens
  std::optional<ServerLoadRecord> load_record;       // the last Prefill's filler requests; none when alone
  std::optional<ServerServedRecord> served_record;   // the last served replay's requests and proof
  Impl(const HttpOptions& o, std::string key) : opts(o), client(o, std::move(key)) {}

  // GET path as JSON; error names the URL and what is wrong.
  Result<nlohmann::json> GetJson(const std::string& path) const;
  // POST body to path and read the answer as JSON; a non-200 status or an unreadable body is an
  // error naming the URL (the key scrubbed from anything the server echoed).
  Result<nlohmann::json> PostJson(const std::string& path, const nlohmann::json& body) const;
};

}  // namespace flipscope
