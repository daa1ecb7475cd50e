// Served replay over HTTP (docs/served.md, "Over HTTP"): the server computes what the model wrote on
// its own decode path, one token per request over the prefix it has cached, and every row says what
// the server reported about it. A greedy generation from each message's generation prompt is the
// proof: where it follows the transcript, its rows are the decode path's by construction, and the
// one-token rows must equal them bit for bit.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "engine/http_internal.h"
#include "util/util.h"

namespace flipscope {

using json = nlohmann::json;

namespace {

// Prompts this long fill at least one cache block of every server (vLLM: 16 tokens by default).
constexpr int32_t kCacheCheckTokens = 64;

// The server flag a refusal names when the prefix cache is off or its counts are not reported.
std::string CacheHint(HttpApi api) {
  if (api == HttpApi::kVllm)
    return "start vLLM with prefix caching on and its counts reported: --enable-prefix-caching "
           "--enable-prompt-tokens-details";
  if (api == HttpApi::kSglang) return "start SGLang without --disable-radix-cache";
  return "start llama-server with one slot (-np 1) and do not turn prompt caching off";
}

// One request: prompt tokens, then n greedy tokens with k log-probabilities each, the server's
// prompt cache kept. Errors name the URL.
Result<http::ServedAnswer> Ask(const HttpEngine::Impl& e, std::span<const int32_t> prompt, int n) {
  const HttpApi api = e.opts.api;
  const std::vector<int32_t> ids(prompt.begin(), prompt.end());
  json req;
  std::string path;
  if (api == HttpApi::kVllm) {
    path = "/v1/completions";
    req = {{"model", e.opts.served_model}, {"prompt", ids},   {"max_tokens", n},
           {"temperature", 0.0},           {"logprobs", e.k}, {"return_tokens_as_token_ids", true}};
  } else if (api == HttpApi::kSglang) {
    path = "/generate";
    req = {{"input_ids", ids},        {"sampling_params", {{"max_new_tokens", n}, {"temperature", 0.0}}},
           {"return_logprob", true},  {"logprob_start_len", int64_t(ids.size()) - 1},
           {"top_logprobs_num", e.k}, {"return_text_in_logprobs", false}};
  } else {
    path = "/completion";
    req = {{"prompt", ids},         {"n_predict", n},     {"n_probs", e.k},       {"post_sampling_probs", false},
           {"return_tokens", true}, {"temperature", 0.0}, {"cache_prompt", true}, {"id_slot", 0}};
  }
  FS_ASSIGN_OR_RETURN(json body, e.PostJson(path, req));
  const std::string where = e.client.Where(path);
  auto answer = http::ParseServedAnswer(body, api, e.k, e.n_vocab);
  if (!answer.ok()) return Status::Error(e.client.Scrub(where + ": " + answer.status().message()));
  if (answer->prompt_tokens >= 0 && answer->prompt_tokens != int64_t(ids.size()))
    return Status::Error(
        fmt::format("{}: the server counted {} prompt tokens, {} were sent", where, answer->prompt_tokens, ids.size()));
  if (answer->cached_tokens < 0 || answer->computed_tokens < 0)
    return Status::Refused(
        fmt::format("{}: the answer does not say how many prompt tokens came from the cache, so "
                    "no row can be shown to be a decode step: {}",
                    where, CacheHint(api)));
  return answer;
}

// The tallies of one pass, and its manifest record.
struct Pass {
  TopKRows rows;
  std::vector<std::string> source;  // per kept row: "decode", "generation" or "prompt"
  std::vector<int64_t> cached, computed;
  std::vector<ServerServedRecord::Recomputed> recomputed;  // computed with other tokens in one batch: not kept
  int64_t requests = 0, generations = 0, generated = 0, matched = 0;
  int64_t proof_compared = 0, proof_identical = 0;
  std::vector<int64_t> proof_differs;  // the first positions where they differ
  double seconds = 0;

  void Keep(int32_t p, const http::ServedStep& s, const char* from, const http::ServedAnswer& a) {
    rows.positions.push_back(p);
    rows.ids.insert(rows.ids.end(), s.ids.begin(), s.ids.end());
    rows.logprobs.insert(rows.logprobs.end(), s.logprobs.begin(), s.logprobs.end());
    source.push_back(from);
    cached.push_back(a.cached_tokens);
    computed.push_back(a.computed_tokens);
  }
};

bool SameStep(const http::ServedStep& a, const http::ServedStep& b) {
  return a.token == b.token && a.ids == b.ids &&
         std::equal(a.logprobs.begin(), a.logprobs.end(), b.logprobs.begin(), b.logprobs.end(),
                    [](float x, float y) { return std::memcmp(&x, &y, sizeof x) == 0; });
}

// One written run [s, e]: the generation from its prompt, then one request per decode step.
Status ServeRun(const HttpEngine::Impl& eng, std::span<const int32_t> tokens, int32_t s, int32_t e,
                const std::map<int32_t, bool>& wanted, Pass& pass) {
  FS_ASSIGN_OR_RETURN(http::ServedAnswer gen, Ask(eng, tokens.subspan(0, size_t(s)), e - s + 1));
  ++pass.requests, ++pass.generations;
  pass.generated += int64_t(gen.steps.size());
  // Step j is the row at s-1+j; it is the transcript's row while the tokens before it were the transcript's.
  size_t valid = 1;
  while (valid < gen.steps.size() && gen.steps[valid - 1].token == tokens[size_t(s) + valid - 1]) ++valid;
  pass.matched += int64_t(valid - 1);
  if (wanted.count(s - 1)) pass.Keep(s - 1, gen.steps[0], "prompt", gen);
  for (int32_t p = s; p < e; ++p) {
    FS_ASSIGN_OR_RETURN(http::ServedAnswer one, Ask(eng, tokens.subspan(0, size_t(p) + 1), 1));
    ++pass.requests;
    // The first decode step follows a prompt the server has just computed: a server that reused none
    // of it has no prefix cache (a short prompt may fit no cache block yet).
    if (pass.requests == 2 && one.cached_tokens == 0 && p >= kCacheCheckTokens)
      return Status::Refused(fmt::format("{}: the server reused none of a {}-token prompt it had just computed: {}",
                                         eng.client.Where(""), p + 1, CacheHint(eng.opts.api)));
    const size_t j = size_t(p - s + 1);
    const bool alone = one.computed_tokens == 1 && one.cached_tokens == p;
    if (alone && j < valid) {
      ++pass.proof_compared;
      if (SameStep(one.steps[0], gen.steps[j]))
        ++pass.proof_identical;
      else if (pass.proof_differs.size() < 20)
        pass.proof_differs.push_back(p);
    }
    if (!wanted.count(p)) continue;
    if (alone) {
      pass.Keep(p, one.steps[0], "decode", one);
    } else if (j < valid) {
      pass.Keep(p, gen.steps[j], "generation",
                one);  // the one-token row was a batch; the generation's is a decode step
    } else {
      pass.recomputed.push_back({.position = p, .cached = one.cached_tokens, .computed = one.computed_tokens});
    }
  }
  return Status::Ok();
}

}  // namespace

std::vector<int32_t> ServedHttpPositions(std::span<const int32_t> probes, std::span<const uint8_t> written) {
  auto wrote = [&](int32_t p) { return p >= 0 && size_t(p) < written.size() && written[size_t(p)] != 0; };
  std::vector<int32_t> out;
  for (int32_t p : probes)
    if ((wrote(p) && wrote(p + 1)) || (!wrote(p) && wrote(p + 1))) out.push_back(p);
  return out;
}

Result<TopKRows> HttpEngine::ServedReplay(std::span<const int32_t> tokens, std::span<const int32_t> probes,
                                          std::span<const uint8_t> written, const ProgressFn& progress) {
  Impl& e = *impl_;
  const int32_t n = int32_t(tokens.size());
  if (int64_t(written.size()) < n)
    return Status::Error(fmt::format("{} served: which tokens the model wrote is known for {} tokens, not {}",
                                     OptionName("replay"), written.size(), n));
  if (e.context > 0 && n + 1 > e.context)
    return Status::Error(fmt::format("{}: {} tokens (+1 generated) do not fit the server's context of {}",
                                     e.client.Where(""), n, e.context));
  std::map<int32_t, bool> wanted;
  for (int32_t p : ServedHttpPositions(probes, written)) wanted[p] = true;
  Pass pass;
  pass.rows.k = e.k;
  const double t0 = NowSeconds();
  int64_t runs = 0;
  for (int32_t s = 1; s < n; ++s) {
    if (!written[size_t(s)] || written[size_t(s) - 1]) continue;
    int32_t end = s;
    while (end + 1 < n && written[size_t(end) + 1]) ++end;
    FS_RETURN_IF_ERROR(ServeRun(e, tokens, s, end, wanted, pass));
    ++runs;
    if (progress) progress(end + 1);
  }
  pass.seconds = NowSeconds() - t0;
  for (size_t i = 0; i < pass.rows.positions.size(); ++i) pass.rows.argmax.push_back(pass.rows.ids[i * size_t(e.k)]);
  e.served_record = ServerServedRecord{
      .mechanism =
          "one request per decode step over the server's cached prefix; a greedy generation from each "
          "message's generation prompt as the proof",
      .api = std::string(NameOf(e.opts.api)),
      .requests = pass.requests,
      .generations = pass.generations,
      .generated_tokens = pass.generated,
      .generation_matched = pass.matched,
      .not_served = int64_t(probes.size() - wanted.size()),
      .recomputed = std::move(pass.recomputed),
      .proof_compared = pass.proof_compared,
      .proof_identical = pass.proof_identical,
      .proof_differs = std::move(pass.proof_differs),
      .positions = std::vector<int64_t>(pass.rows.positions.begin(), pass.rows.positions.end()),
      .source = std::move(pass.source),
      .cached = std::move(pass.cached),
      .computed = std::move(pass.computed),
      .seconds = pass.seconds,
      .requests_per_s = pass.seconds > 0 ? double(pass.requests) / pass.seconds : 0.0};
  return std::move(pass.rows);
}

std::optional<ServerServedRecord> HttpEngine::ServedRecord() const { return impl_->served_record; }

}  // namespace flipscope
