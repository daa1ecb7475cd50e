// The answers of served-replay requests (docs/served.md, "Over HTTP"): per generated token the token
// chosen and the top-k it was chosen from, and what the server says about its prompt cache.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "engine/http_internal.h"

namespace flipscope::http {
namespace {

using json = nlohmann::json;
using ServedCandidates = std::vector<std::pair<int64_t, double>>;  // (id, log-probability)

// A token id as a number, or as vLLM's "token_id:N" string; -1 when it is neither.
int64_t IdOf(const json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()) && std::abs(v.get<double>()) < 1e12)
    return int64_t(v.get<double>());
  if (!v.is_string()) return -1;
  std::string_view s = v.get_ref<const std::string&>();
  if (s.rfind("token_id:", 0) == 0) s.remove_prefix(9);
  int64_t id = -1;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
  return ec == std::errc() && end == s.data() + s.size() ? id : -1;
}

// The k most probable candidates into step (ties to the lower id); every id inside the vocabulary,
// every log-probability <= 0 (-DBL_MAX, ParseLenient's -Infinity, is -inf).
Status KeepTopK(ServedCandidates& c, int32_t k, int32_t n_vocab, const std::string& where, ServedStep& step) {
  for (auto& [id, lp] : c) {
    if (id < 0 || (n_vocab > 0 && id >= n_vocab))
      return Status::Error(fmt::format("{}: token id {} outside the model's vocabulary of {}", where, id, n_vocab));
    if (std::isnan(lp) || lp > 1e-3)
      return Status::Error(fmt::format("{}: log-probability {} of token {} is not <= 0", where, lp, id));
    if (lp <= -std::numeric_limits<double>::max()) lp = -INFINITY;
  }
  std::sort(c.begin(), c.end(),
            [](auto& a, auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  c.erase(std::unique(c.begin(), c.end(), [](auto& a, auto& b) { return a.first == b.first; }), c.end());
  if (c.size() < size_t(k))
    return Status::Error(fmt::format("{}: {} distinct token ids, expected at least {} (the requested k)", where,
                                     c.size(), k));
  for (int32_t j = 0; j < k; ++j) {
    step.ids.push_back(int32_t(c[size_t(j)].first));
    step.logprobs.push_back(float(std::min(c[size_t(j)].second, 0.0)));
  }
  return Status::Ok();
}

// An integer count at obj[key], or -1 when absent or not a non-negative integer.
int64_t Count(const json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) && obj[key].is_number_integer() && obj[key].get<int64_t>() >= 0
             ? obj[key].get<int64_t>()
             : -1;
}

// vLLM /v1/completions: choices[0].logprobs.tokens ("token_id:N") and top_logprobs ({"token_id:N":
// logprob}); usage.prompt_tokens and usage.prompt_tokens_details.cached_tokens.
Status ReadVllm(const json& body, int32_t k, int32_t n_vocab, ServedAnswer& out) {
  if (!body.is_object() || !body.contains("choices") || !body["choices"].is_array() || body["choices"].empty() ||
      !body["choices"][0].is_object())
    return Status::Error("no choices[0] in the response");
  const json& lp = body["choices"][0].value("logprobs", json());
  if (!lp.is_object() || !lp.contains("tokens") || !lp["tokens"].is_array() || !lp.contains("top_logprobs") ||
      !lp["top_logprobs"].is_array() || lp["tokens"].size() != lp["top_logprobs"].size())
    return Status::Error("choices[0].logprobs needs tokens and top_logprobs of one length (logprobs refused?)");
  for (size_t i = 0; i < lp["tokens"].size(); ++i) {
    const std::string where = fmt::format("choices[0].logprobs.top_logprobs[{}]", i);
    const json& top = lp["top_logprobs"][i];
    if (!top.is_object()) return Status::Error(where + " is not an object {\"token_id:N\": logprob}");
    ServedStep step;
    step.token = int32_t(std::clamp<int64_t>(IdOf(lp["tokens"][i]), -1, std::numeric_limits<int32_t>::max()));
    ServedCandidates c;
    for (auto it = top.begin(); it != top.end(); ++it) {
      const int64_t id = IdOf(json(it.key()));
      if (id < 0 || !it.value().is_number())
        return Status::Error(fmt::format("{}: '{}' is not a token id with a numeric log-probability", where, it.key()));
      c.emplace_back(id, it.value().get<double>());
    }
    FS_RETURN_IF_ERROR(KeepTopK(c, k, n_vocab, where, step));
    out.steps.push_back(std::move(step));
  }
  const json& usage = body.value("usage", json());
  out.prompt_tokens = Count(usage, "prompt_tokens");
  if (usage.is_object() && usage.contains("prompt_tokens_details"))
    out.cached_tokens = Count(usage["prompt_tokens_details"], "cached_tokens");
  return Status::Ok();
}

// SGLang /generate: meta_info.output_token_logprobs ([logprob, id, text]) and output_top_logprobs
// (per token a list of them); meta_info.prompt_tokens and cached_tokens.
Status ReadSglang(const json& body, int32_t k, int32_t n_vocab, ServedAnswer& out) {
  const json& b = body.is_array() && body.size() == 1 ? body[0] : body;
  if (!b.is_object() || !b.contains("meta_info") || !b["meta_info"].is_object())
    return Status::Error("meta_info is missing (is this an SGLang server?)");
  const json& meta = b["meta_info"];
  const json& chosen = meta.value("output_token_logprobs", json());
  const json& tops = meta.value("output_top_logprobs", json());
  if (!chosen.is_array() || !tops.is_array() || chosen.size() != tops.size())
    return Status::Error("meta_info needs output_token_logprobs and output_top_logprobs of one length");
  for (size_t i = 0; i < chosen.size(); ++i) {
    const std::string where = fmt::format("meta_info.output_top_logprobs[{}]", i);
    ServedStep step;
    const bool triple = chosen[i].is_array() && chosen[i].size() >= 2;
    step.token = triple ? int32_t(std::clamp<int64_t>(IdOf(chosen[i][1]), -1, std::numeric_limits<int32_t>::max())) : -1;
    if (!tops[i].is_array()) return Status::Error(where + " is not a list of [logprob, token_id, text]");
    ServedCandidates c;
    for (const json& t : tops[i]) {
      if (!t.is_array() || t.size() < 2 || !t[0].is_number() || IdOf(t[1]) < 0)
        return Status::Error(where + ": an entry is not [logprob, token_id, text]");
      c.emplace_back(IdOf(t[1]), t[0].get<double>());
    }
    FS_RETURN_IF_ERROR(KeepTopK(c, k, n_vocab, where, step));
    out.steps.push_back(std::move(step));
  }
  out.prompt_tokens = Count(meta, "prompt_tokens");
  out.cached_tokens = Count(meta, "cached_tokens");
  return Status::Ok();
}

// llama-server /completion: tokens, completion_probabilities[i].top_logprobs ([{"id", "logprob"}]),
// timings.cache_n (prompt tokens reused) and timings.prompt_n (prompt tokens computed).
Status ReadLlamaServer(const json& body, int32_t k, int32_t n_vocab, ServedAnswer& out) {
  if (!body.is_object()) return Status::Error("the answer is not a JSON object");
  const json& probs = body.value("completion_probabilities", json());
  if (!probs.is_array()) return Status::Error("completion_probabilities is missing (n_probs refused?)");
  for (size_t i = 0; i < probs.size(); ++i) {
    const std::string where = fmt::format("completion_probabilities[{}]", i);
    const json& e = probs[i];
    if (!e.is_object() || !e.contains("id") || !e.contains("top_logprobs") || !e["top_logprobs"].is_array())
      return Status::Error(where + " needs id and top_logprobs (post_sampling_probs must be false)");
    ServedStep step;
    step.token = int32_t(std::clamp<int64_t>(IdOf(e["id"]), -1, std::numeric_limits<int32_t>::max()));
    ServedCandidates c;
    for (const json& t : e["top_logprobs"]) {
      if (!t.is_object() || !t.contains("id") || IdOf(t["id"]) < 0 || !t.contains("logprob") || !t["logprob"].is_number())
        return Status::Error(where + ": a top_logprobs entry is not {\"id\", \"logprob\"}");
      c.emplace_back(IdOf(t["id"]), t["logprob"].get<double>());
    }
    FS_RETURN_IF_ERROR(KeepTopK(c, k, n_vocab, where, step));
    out.steps.push_back(std::move(step));
  }
  const json& timings = body.value("timings", json());
  out.prompt_tokens = Count(body, "tokens_evaluated");
  out.cached_tokens = Count(timings, "cache_n");
  out.computed_tokens = Count(timings, "prompt_n");
  return Status::Ok();
}

}  // namespace

Result<ServedAnswer> ParseServedAnswer(const json& body, HttpApi api, int32_t k, int32_t n_vocab) {
  if (k < 1) return Status::Error("served replay needs k >= 1 log-probabilities per token");
  ServedAnswer out;
  FS_RETURN_IF_ERROR(api == HttpApi::kVllm     ? ReadVllm(body, k, n_vocab, out)
                     : api == HttpApi::kSglang ? ReadSglang(body, k, n_vocab, out)
                                               : ReadLlamaServer(body, k, n_vocab, out));
  if (out.steps.empty()) return Status::Error("no generated token in the answer");
  for (size_t i = 0; i < out.steps.size(); ++i)
    if (out.steps[i].token < 0 || (n_vocab > 0 && out.steps[i].token >= n_vocab))
      return Status::Error(fmt::format("generated token {}: its id is missing or outside the model's vocabulary of {}",
                                       i, n_vocab));
  if (out.computed_tokens < 0 && out.prompt_tokens >= 0 && out.cached_tokens >= 0)
    out.computed_tokens = out.prompt_tokens - out.cached_tokens;
  if (out.cached_tokens > out.prompt_tokens && out.prompt_tokens >= 0)
    return Status::Error(fmt::format("the server reports {} cached tokens of a {}-token prompt", out.cached_tokens,
                                     out.prompt_tokens));
  return out;
}

}  // namespace flipscope::http
