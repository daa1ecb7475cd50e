// llama-server's /completion with n_probs: the token it chose and the top log-probabilities of the
// distribution it chose from (tools/server/server-task.cpp, probs_vector_to_json).
#include <fmt/format.h>

#include <cmath>

#include "engine/http_internal.h"

namespace flipscope::http {
namespace {

using json = nlohmann::json;

// An id inside the vocabulary at key, or an error naming where.
Result<int32_t> TokenId(const json& j, const std::string& where, int32_t n_vocab) {
  if (!j.is_object() || !j.contains("id") || !j["id"].is_number_integer())
    return Status::Error(where + ": no integer \"id\"");
  const int64_t id = j["id"].get<int64_t>();
  if (id < 0 || (n_vocab > 0 && id >= n_vocab))
    return Status::Error(fmt::format("{}: token id {} outside the model's vocabulary of {}", where, id, n_vocab));
  return int32_t(id);
}

}  // namespace

Result<ServedChoice> ParseLlamaServerCompletion(const json& body, int32_t n_vocab) {
  if (!body.is_object()) return Status::Error("the answer is not a JSON object");
  ServedChoice out;
  // "tokens" (return_tokens) holds the chosen token even when its piece is an incomplete UTF-8
  // character, for which llama-server leaves out completion_probabilities.
  const bool has_tokens = body.contains("tokens") && body["tokens"].is_array() && !body["tokens"].empty();
  if (has_tokens) {
    const json first_token = {{"id", body["tokens"][0]}};
    FS_ASSIGN_OR_RETURN(out.token, TokenId(first_token, "tokens[0]", n_vocab));
  }
  if (!body.contains("completion_probabilities") || !body["completion_probabilities"].is_array() ||
      body["completion_probabilities"].empty()) {
    if (has_tokens) return out;
    return Status::Error("neither tokens nor completion_probabilities in the answer (are return_tokens and n_probs set, "
                         "and is it llama-server?)");
  }
  const json& first = body["completion_probabilities"][0];
  FS_ASSIGN_OR_RETURN(int32_t id, TokenId(first, "completion_probabilities[0]", n_vocab));
  if (has_tokens && id != out.token)
    return Status::Error(fmt::format("tokens[0] is {} but completion_probabilities[0] is {}", out.token, id));
  out.token = id;
  if (!first.contains("top_logprobs") || !first["top_logprobs"].is_array())
    return Status::Error("completion_probabilities[0]: no top_logprobs array (post_sampling_probs must be false)");
  const json& top = first["top_logprobs"];
  for (size_t i = 0; i < top.size(); ++i) {
    const std::string where = fmt::format("completion_probabilities[0].top_logprobs[{}]", i);
    FS_ASSIGN_OR_RETURN(int32_t top_id, TokenId(top[i], where, n_vocab));
    if (!top[i].contains("logprob") || !top[i]["logprob"].is_number())
      return Status::Error(where + ": no numeric \"logprob\"");
    const double lp = top[i]["logprob"].get<double>();
    if (std::isnan(lp) || lp > 1e-3) return Status::Error(fmt::format("{}: log-probability {} is not <= 0", where, lp));
    out.ids.push_back(top_id);
    out.logprobs.push_back(lp);
  }
  return out;
}

}  // namespace flipscope::http

namespace flipscope {

Result<ServedChoice> LlamaServerChoice(const HttpOptions& opts, std::span<const int32_t> prompt, int k,
                                       int32_t n_vocab) {
  http::Client client(opts, "");
  const nlohmann::json request = {{"prompt", std::vector<int32_t>(prompt.begin(), prompt.end())},
                                  {"n_predict", 1},
                                  {"n_probs", k},
                                  {"post_sampling_probs", false},
                                  {"return_tokens", true},
                                  {"temperature", 0},
                                  {"cache_prompt", true}};
  FS_ASSIGN_OR_RETURN(http::Response r, client.Post("/completion", request.dump()));
  if (r.status < 200 || r.status >= 300)
    return Status::Error(fmt::format("{}: HTTP {}: {}", client.Where("/completion"), r.status, http::ErrorText(r.body)));
  nlohmann::json body = nlohmann::json::parse(r.body, nullptr, false);
  if (body.is_discarded()) return Status::Error(client.Where("/completion") + ": the answer is not JSON");
  auto choice = http::ParseLlamaServerCompletion(body, n_vocab);
  if (!choice.ok()) return choice.status().Prefixed(client.Where("/completion"));
  return std::move(*choice);
}

}  // namespace flipscope
