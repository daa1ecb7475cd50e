// Response bodies of vLLM and SGLang, parsed into one top-k table. Both put the distribution that
// predicts prompt token i at entry i, with null at entry 0 (token 0 has no prefix).
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "engine/http_internal.h"

namespace flipscope::http {
namespace {

using json = nlohmann::json;
using Candidates = std::vector<std::pair<int32_t, double>>;  // (id, log-probability)
constexpr const char* kHugeText = "1.7976931348623157e308";  // DBL_MAX

// Keeps the k most probable candidates of entry i (ties to the lower id) in out; `where` names
// the entry in messages.
Status FillEntry(Candidates& c, size_t i, int32_t n_vocab, PromptTopK& out, const std::string& where) {
  for (auto& [id, lp] : c) {
    if (lp <= -std::numeric_limits<double>::max()) lp = -INFINITY;  // -Infinity, as ParseLenient reads it
    if (id < 0 || (n_vocab > 0 && id >= n_vocab))
      return Status::Error(fmt::format("{}: token id {} outside the model's vocabulary of {}", where, id, n_vocab));
    if (std::isnan(lp) || lp > 1e-3)
      return Status::Error(fmt::format("{}: log-probability {} of token {} is not <= 0", where, lp, id));
  }
  std::sort(c.begin(), c.end(),
            [](auto& a, auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  c.erase(std::unique(c.begin(), c.end(), [](auto& a, auto& b) { return a.first == b.first; }), c.end());
  if (c.size() < size_t(out.k))
    return Status::Error(
        fmt::format("{}: {} distinct token ids, expected at least {} (the requested k)", where, c.size(), out.k));
  for (int32_t j = 0; j < out.k; ++j) {
    out.ids[i * size_t(out.k) + size_t(j)] = c[size_t(j)].first;
    out.logprobs[i * size_t(out.k) + size_t(j)] = float(std::min(c[size_t(j)].second, 0.0));
  }
  return Status::Ok();
}

// A number that JSON may hold as a float, an integer, or (for ids) a numeric string.
bool AsNumber(const json& v, double& out) {
  if (!v.is_number()) return false;
  out = v.get<double>();
  return true;
}

// Walks a list of per-position entries (null first), calling read(entry, candidates) for each.
template <typename ReadEntry>
Result<PromptTopK> ParseEntries(const json& list, const std::string& name, int32_t k, int32_t n_vocab, ReadEntry read) {
  if (!list.is_array()) return Status::Error(name + " is missing or not a list");
  if (list.empty()) return Status::Error(name + " is empty");
  if (!list[0].is_null() && !(list[0].is_array() && list[0].empty()) && !(list[0].is_object() && list[0].empty()))
    return Status::Error(name + "[0] is not null: expected no distribution before the first token");
  PromptTopK out;
  out.k = k;
  out.n_entries = list.size();
  out.ids.assign(out.n_entries * size_t(k), -1);
  out.logprobs.assign(out.n_entries * size_t(k), 0.0f);
  Candidates c;
  for (size_t i = 1; i < list.size(); ++i) {
    const std::string where = fmt::format("{}[{}]", name, i);
    c.clear();
    FS_RETURN_IF_ERROR(read(list[i], c, where));
    FS_RETURN_IF_ERROR(FillEntry(c, i, n_vocab, out, where));
  }
  return out;
}

}  // namespace

Result<json> ParseLenient(std::string_view body) {
  std::string text;
  text.reserve(body.size());
  bool in_string = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char ch = body[i];
    if (in_string) {
      text += ch;
      if (ch == '\\' && i + 1 < body.size())
        text += body[++i];
      else if (ch == '"')
        in_string = false;
      continue;
    }
    if (ch == '"') in_string = true;
    if (body.substr(i, 8) == "Infinity") {
      text += kHugeText;  // JSON has no infinity: the largest double stands for it (see FillEntry)
      i += 7;
    } else if (body.substr(i, 3) == "NaN") {
      text += "null";
      i += 2;
    } else {
      text += ch;
    }
  }
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return Status::Error("the body is not JSON");
  return j;
}

Result<PromptTopK> ParseVllm(const json& body, int32_t k, int32_t n_vocab) {
  if (!body.is_object() || !body.contains("choices") || !body["choices"].is_array() || body["choices"].empty())
    return Status::Error("no choices[0] in the response");
  const json& choice = body["choices"][0];
  if (!choice.is_object() || !choice.contains("prompt_logprobs") || choice["prompt_logprobs"].is_null())
    return Status::Error("choices[0].prompt_logprobs is missing (is this a vLLM server?)");
  return ParseEntries(
      choice["prompt_logprobs"], "choices[0].prompt_logprobs", k, n_vocab,
      [](const json& e, Candidates& c, const std::string& where) {
        if (!e.is_object()) return Status::Error(where + " is not an object {token_id: {logprob}}");
        for (auto it = e.begin(); it != e.end(); ++it) {
          int32_t id = 0;
          auto [end, ec] = std::from_chars(it.key().data(), it.key().data() + it.key().size(), id);
          double lp = 0;
          if (ec != std::errc() || end != it.key().data() + it.key().size())
            return Status::Error(fmt::format("{}: key '{}' is not a token id", where, it.key()));
          const json& v = it.value();
          if (!v.is_object() || !v.contains("logprob") || !AsNumber(v["logprob"], lp))
            return Status::Error(fmt::format("{}[\"{}\"].logprob is missing or not a number", where, id));
          c.emplace_back(id, lp);
        }
        return Status::Ok();
      });
}

Result<PromptTopK> ParseSglang(const json& body, int32_t k, int32_t n_vocab) {
  const json* b = &body;
  if (body.is_array() && body.size() == 1) b = &body[0];  // a batch of one
  if (!b->is_object() || !b->contains("meta_info") || !(*b)["meta_info"].is_object())
    return Status::Error("meta_info is missing (is this an SGLang server?)");
  const json& meta = (*b)["meta_info"];
  if (!meta.contains("input_top_logprobs"))
    return Status::Error("meta_info.input_top_logprobs is missing (return_logprob / top_logprobs_num refused?)");
  return ParseEntries(
      meta["input_top_logprobs"], "meta_info.input_top_logprobs", k, n_vocab,
      [n_vocab](const json& e, Candidates& c, const std::string& where) {
        if (!e.is_array()) return Status::Error(where + " is not a list of [logprob, token_id, text]");
        for (size_t j = 0; j < e.size(); ++j) {
          const json& t = e[j];
          double lp = 0, id = 0;
          if (!t.is_array() || t.size() < 2 || !AsNumber(t[0], lp) || !AsNumber(t[1], id) || id != std::floor(id))
            return Status::Error(fmt::format("{}[{}] is not [logprob, token_id, text]", where, j));
          // Range first: converting a double outside int32_t is undefined behaviour.
          if (id < 0 || id > double(std::numeric_limits<int32_t>::max()))
            return Status::Error(
                fmt::format("{}: token id {:.17g} outside the model's vocabulary of {}", where, id, n_vocab));
          c.emplace_back(int32_t(id), lp);
        }
        return Status::Ok();
      });
}

namespace {

// A generated token's log-probability as a probability (the -Infinity stand-in becomes 0).
float Prob(double lp) { return lp <= -std::numeric_limits<double>::max() ? 0.0f : float(std::exp(std::min(lp, 0.0))); }

// Checks a generated id against the vocabulary; `where` names it in the message.
Status CheckId(double id, int32_t n_vocab, const std::string& where) {
  if (id != std::floor(id) || id < 0 || (n_vocab > 0 && id >= double(n_vocab)) ||
      id > double(std::numeric_limits<int32_t>::max()))
    return Status::Error(fmt::format("{}: token id {:.17g} outside the model's vocabulary of {}", where, id, n_vocab));
  return Status::Ok();
}

}  // namespace

Result<Future> ParseVllmCompletion(const json& body, int32_t n_vocab) {
  if (!body.is_object() || !body.contains("choices") || !body["choices"].is_array() || body["choices"].empty())
    return Status::Error("no choices[0] in the response");
  const json& choice = body["choices"][0];
  const json* lp = choice.is_object() && choice.contains("logprobs") ? &choice["logprobs"] : nullptr;
  if (!lp || !lp->is_object() || !lp->contains("tokens") || !lp->contains("token_logprobs") ||
      !(*lp)["tokens"].is_array() || !(*lp)["token_logprobs"].is_array())
    return Status::Error("choices[0].logprobs.tokens / token_logprobs are missing (logprobs refused?)");
  const json& tokens = (*lp)["tokens"];
  const json& lps = (*lp)["token_logprobs"];
  if (tokens.size() != lps.size())
    return Status::Error(
        fmt::format("choices[0].logprobs: {} tokens but {} token_logprobs", tokens.size(), lps.size()));
  Future f;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string where = fmt::format("choices[0].logprobs.tokens[{}]", i);
    // return_tokens_as_token_ids: "token_id:123", so that no text has to be tokenized again.
    const std::string t = tokens[i].is_string() ? tokens[i].get<std::string>() : "";
    int64_t id = -1;
    if (t.rfind("token_id:", 0) == 0) std::from_chars(t.data() + 9, t.data() + t.size(), id);
    if (id < 0)
      return Status::Error(where + ": '" + t + "' is not \"token_id:N\" (return_tokens_as_token_ids refused?)");
    FS_RETURN_IF_ERROR(CheckId(double(id), n_vocab, where));
    double v = 0;
    if (!AsNumber(lps[i], v))
      return Status::Error(fmt::format("choices[0].logprobs.token_logprobs[{}] is not a number", i));
    f.tokens.push_back(int32_t(id));
    f.probs.push_back(Prob(v));
  }
  return f;
}

Result<Future> ParseSglangCompletion(const json& body, int32_t n_vocab) {
  const json* b = &body;
  if (body.is_array() && body.size() == 1) b = &body[0];
  if (!b->is_object() || !b->contains("meta_info") || !(*b)["meta_info"].is_object())
    return Status::Error("meta_info is missing (is this an SGLang server?)");
  const json& out = (*b)["meta_info"].value("output_token_logprobs", json());
  if (!out.is_array()) return Status::Error("meta_info.output_token_logprobs is missing (return_logprob refused?)");
  Future f;
  for (size_t i = 0; i < out.size(); ++i) {
    const std::string where = fmt::format("meta_info.output_token_logprobs[{}]", i);
    double lp = 0, id = 0;
    if (!out[i].is_array() || out[i].size() < 2 || !AsNumber(out[i][0], lp) || !AsNumber(out[i][1], id))
      return Status::Error(where + " is not [logprob, token_id, text]");
    FS_RETURN_IF_ERROR(CheckId(id, n_vocab, where));
    f.tokens.push_back(int32_t(id));
    f.probs.push_back(Prob(lp));
  }
  return f;
}

}  // namespace flipscope::http
