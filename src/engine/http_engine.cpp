// HttpEngine: one teacher-forced request to a vLLM or SGLang server, its prompt log-probabilities
// handed over as truncated rows. What the server says about itself goes into Describe().
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "engine/http_internal.h"
#include "util/util.h"

namespace flipscope {

using json = nlohmann::json;

Status HttpOptions::Validate() const {
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
    return Status::Error(OptionName("url") + " must start with http:// or https://, not '" + RedactUrl(url) + "'");
  if (logprobs == 0 || logprobs < -1)
    return Status::Error(OptionName("logprobs") + " must be >= 1 (or -1 for vLLM's full vocabulary)");
  if (logprobs == -1 && api != HttpApi::kVllm)
    return Status::Error(OptionName("logprobs") + ": -1 (the full vocabulary) needs the " + OptionName("api") +
                         " vllm");
  if (timeout_s <= 0) return Status::Error(OptionName("timeout") + " must be > 0 seconds");
  if (retries < 0) return Status::Error(OptionName("retries") + " must be >= 0");
  return Status::Ok();
}

std::string HttpOptions::ToFlags() const {
  std::string f = fmt::format("--engine openai --api {} --url {} --logprobs {}", NameOf(api), RedactUrl(url), logprobs);
  if (!served_model.empty()) f += " --served-model-name " + served_model;
  if (!api_key_env.empty()) f += " --api-key-env " + api_key_env;
  if (load > 0) f += fmt::format(" --load {} --load-seed {}", load, load_seed);
  return f;
}

namespace {
// The answer r to a request for path, as JSON.
Result<json> AnswerJson(const http::Client& client, const std::string& path, const http::Response& r) {
  const std::string where = client.Where(path);
  if (r.status != 200)
    return Status::Error(client.Scrub(fmt::format("{}: HTTP {}: {}", where, r.status, http::ErrorText(r.body))));
  auto j = http::ParseLenient(r.body);
  if (!j.ok()) return Status::Error(client.Scrub(where + ": " + j.status().message()));
  return j;
}
}  // namespace

Result<json> HttpEngine::Impl::GetJson(const std::string& path) const {
  FS_ASSIGN_OR_RETURN(http::Response r, client.Get(path));
  return AnswerJson(client, path, r);
}

Result<json> HttpEngine::Impl::PostJson(const std::string& path, const json& body) const {
  FS_ASSIGN_OR_RETURN(http::Response r, client.Post(path, body.dump()));
  return AnswerJson(client, path, r);
}

namespace {

// Copies the keys of src that decide numerics or limits (a whitelist: SGLang's server info also
// holds its own --api-key, which must never reach a manifest).
json Pick(const json& src, std::initializer_list<const char*> keys) {
  json out = json::object();
  if (!src.is_object()) return out;
  for (const char* key : keys)
    if (src.contains(key) && !src[key].is_object() && !src[key].is_array()) out[key] = src[key];
  return out;
}

int64_t PositiveInt(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number_integer() && j[key].get<int64_t>() > 0
             ? j[key].get<int64_t>()
             : 0;
}

// vLLM: the model id and context from /v1/models (required: it is also the request's "model"),
// the version from /version (optional: older servers lack it).
Status DescribeVllm(HttpEngine::Impl& e) {
  FS_ASSIGN_OR_RETURN(json models, e.GetJson("/v1/models"));
  if (!models.contains("data") || !models["data"].is_array() || models["data"].empty() ||
      !models["data"][0].is_object())
    return Status::Error(e.client.Where("/v1/models") + ": no model listed under data[0]");
  const json& m = models["data"][0];
  e.server["model"] = Pick(m, {"id", "root", "owned_by", "max_model_len"});
  if (e.opts.served_model.empty()) {
    if (!m.contains("id") || !m["id"].is_string())
      return Status::Error(e.client.Where("/v1/models") + ": data[0].id is missing");
    e.opts.served_model = m["id"].get<std::string>();
  }
  e.context = PositiveInt(m, "max_model_len");
  auto version = e.GetJson("/version");
  e.server["version"] = version.ok() && version->contains("version") ? (*version)["version"] : json(nullptr);
  // The engine configuration the server reports (attention backend, KV dtype, chunking, parallelism):
  // vLLM serves it at /server_info when started with VLLM_SERVER_DEV_MODE=1; optional.
  auto info = e.GetJson("/server_info");
  if (info.ok() && info->is_object() && info->contains("vllm_config") && (*info)["vllm_config"].is_string()) {
    std::string config = (*info)["vllm_config"].get<std::string>();
    if (config.size() > 65536) config = config.substr(0, 65536) + "...";
    e.server["vllm_config"] = config;
  }
  return Status::Ok();
}

// SGLang: /get_model_info (required) and /get_server_info (optional; its key set varies by version).
Status DescribeSglang(HttpEngine::Impl& e) {
  FS_ASSIGN_OR_RETURN(json model, e.GetJson("/get_model_info"));
  e.server["model"] = Pick(model, {"model_path", "tokenizer_path", "is_generation", "weight_version"});
  auto info = e.GetJson("/get_server_info");
  if (!info.ok()) return Status::Ok();
  const json& args = info->contains("server_args") ? (*info)["server_args"] : *info;
  e.server["version"] = info->contains("version") ? (*info)["version"] : json(nullptr);
  e.server["args"] = Pick(
      args, {"model_path", "served_model_name", "dtype", "kv_cache_dtype", "quantization", "context_length", "tp_size",
             "pp_size", "dp_size", "ep_size", "attention_backend", "sampling_backend", "chunked_prefill_size",
             "max_prefill_tokens", "disable_radix_cache", "enable_deterministic_inference", "random_seed"});
  e.context = PositiveInt(args, "context_length");
  return Status::Ok();
}

// llama-server: /props (required): the model file, the build, the slots and the slot context.
Status DescribeLlamaServer(HttpEngine::Impl& e) {
  FS_ASSIGN_OR_RETURN(json props, e.GetJson("/props"));
  e.server["model"] = Pick(props, {"model_path", "model_alias", "total_slots"});
  e.server["version"] = props.contains("build_info") ? props["build_info"] : json(nullptr);
  if (props.contains("default_generation_settings"))
    e.context = PositiveInt(props["default_generation_settings"], "n_ctx");
  return Status::Ok();
}

// The prompt length the server reports (vLLM usage.prompt_tokens, SGLang meta_info.prompt_tokens);
// -1 when absent.
int64_t ReportedPromptTokens(const json& body, bool vllm) {
  const json& b = !vllm && body.is_array() && body.size() == 1 ? body[0] : body;
  const char* section = vllm ? "usage" : "meta_info";
  if (!b.is_object() || !b.contains(section) || !b[section].is_object()) return -1;
  const json& s = b[section];
  return s.contains("prompt_tokens") && s["prompt_tokens"].is_number_integer() ? s["prompt_tokens"].get<int64_t>() : -1;
}

// The body of a prompt-logprob request for ids: vLLM /v1/completions (prompt_logprobs) or SGLang
// /generate (input top log-probabilities from position 0); both generate one token.
json PromptLogprobsRequest(const HttpOptions& o, bool vllm, const std::vector<int32_t>& ids) {
  if (vllm)
    return {{"model", o.served_model},
            {"prompt", ids},
            {"max_tokens", 1},
            {"temperature", 0.0},
            {"prompt_logprobs", o.logprobs}};
  return {{"input_ids", ids},
          {"sampling_params", {{"max_new_tokens", 1}, {"temperature", 0.0}}},
          {"return_logprob", true},
          {"logprob_start_len", 0},
          {"top_logprobs_num", o.logprobs},
          {"return_text_in_logprobs", false}};
}

// The prompt top-k table of a server's answer r at where, checked to cover the n tokens sent;
// errors name where and what the server said (secrets scrubbed).
Result<http::PromptTopK> ReadPromptTable(const HttpEngine::Impl& e, const http::Response& r, const std::string& where,
                                         bool vllm, int64_t n) {
  if (r.status != 200) {
    std::string hint = vllm && r.status == 400 && r.body.find("logprobs") != std::string::npos
                           ? " (lower --logprobs, or start vLLM with a larger --max-logprobs)"
                           : "";
    return Status::Error(
        e.client.Scrub(fmt::format("{}: HTTP {}: {}{}", where, r.status, http::ErrorText(r.body), hint)));
  }
  auto body = http::ParseLenient(r.body);
  if (!body.ok()) return Status::Error(e.client.Scrub(where + ": " + body.status().message()));
  auto table = vllm ? http::ParseVllm(*body, e.k, e.n_vocab) : http::ParseSglang(*body, e.k, e.n_vocab);
  if (!table.ok()) return Status::Error(e.client.Scrub(where + ": " + table.status().message()));
  if (int64_t(table->n_entries) != n)
    return Status::Error(
        fmt::format("{}: the server returned {} prompt positions for the {} tokens sent", where, table->n_entries, n));
  const int64_t counted = ReportedPromptTokens(*body, vllm);
  if (counted >= 0 && counted != n)
    return Status::Error(fmt::format("{}: the server counted {} prompt tokens, {} were sent", where, counted, n));
  return table;
}

}  // namespace

HttpEngine::HttpEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpEngine::~HttpEngine() = default;
int32_t HttpEngine::n_vocab() const { return impl_->n_vocab; }
int32_t HttpEngine::topk() const { return impl_->k; }

Result<std::unique_ptr<HttpEngine>> HttpEngine::Create(const HttpOptions& opts, int32_t n_vocab) {
  FS_RETURN_IF_ERROR(opts.Validate());
  std::string key;
  if (!opts.api_key_env.empty()) {
    const char* v = std::getenv(opts.api_key_env.c_str());
    if (v == nullptr || *v == '\0')
      return Status::Error(OptionName("api_key_env") + " " + opts.api_key_env +
                           ": the environment variable is not set or empty");
    key = v;
  }
  auto impl = std::make_unique<Impl>(opts, key);
  impl->n_vocab = n_vocab;
  impl->k = opts.logprobs == -1 ? n_vocab : opts.logprobs;
  FS_RETURN_IF_ERROR(opts.api == HttpApi::kVllm     ? DescribeVllm(*impl)
                     : opts.api == HttpApi::kSglang ? DescribeSglang(*impl)
                                                    : DescribeLlamaServer(*impl));
  return std::unique_ptr<HttpEngine>(new HttpEngine(std::move(impl)));
}

Status HttpEngine::Prefill(std::span<const int32_t> tokens, std::span<const int32_t> probes, const RowSink& sink,
                           const ProgressFn& progress) {
  Impl& e = *impl_;
  if (e.opts.api == HttpApi::kLlamaServer)
    return Status::InvalidArgument(OptionName("api") +
                                   " llama-server returns no prompt log-probabilities: it captures only with " +
                                   OptionName("replay") + " served");
  const bool vllm = e.opts.api == HttpApi::kVllm;
  const std::string path = vllm ? "/v1/completions" : "/generate";
  const int64_t n = int64_t(tokens.size());
  // One more position than the prompt: both servers generate a token after it.
  if (e.context > 0 && n + 1 > e.context)
    return Status::Error(
        fmt::format("{}: {} tokens (+1 generated) do not fit the server's context of {}; the whole "
                    "transcript must be one request, since every position depends on its whole prefix",
                    e.client.Where(path), n, e.context));
  const std::vector<int32_t> ids(tokens.begin(), tokens.end());
  const json req = PromptLogprobsRequest(e.opts, vllm, ids);
  const std::string request = req.dump();
  auto send = [&] { return e.client.Post(path, request); };
  e.load_record.reset();
  auto loaded = [&]() -> Result<http::Response> {
    std::vector<FillerSource> pool = e.load_pool;
    if (pool.empty()) pool.push_back({"workload", ids});
    // Fillers as long as the measured request at most, and bounded, so a test server stays quick.
    const int cells = int(std::clamp<int64_t>(n, 16, 2048));
    ServerLoadRecord record;
    auto answer = http::WithFillers(e.client, e.opts, pool, cells, send, &record);
    if (answer.ok()) e.load_record = std::move(record);
    return answer;
  };
  FS_ASSIGN_OR_RETURN(http::Response r, e.opts.load > 0 ? loaded() : send());
  FS_ASSIGN_OR_RETURN(const http::PromptTopK table, ReadPromptTable(e, r, e.client.Where(path), vllm, n));
  const size_t k = size_t(e.k);
  for (size_t i = 0; i < probes.size(); ++i) {
    // Probe p's distribution predicts token p+1: entry p+1.
    const size_t at = (size_t(probes[i]) + 1) * k;
    Row row;
    row.index = int64_t(i);
    row.position = probes[i];
    row.topk_ids = std::span<const int32_t>(table.ids).subspan(at, k);
    row.topk_logprobs = std::span<const float>(table.logprobs).subspan(at, k);
    row.argmax = row.topk_ids[0];
    FS_RETURN_IF_ERROR(sink(row));
  }
  if (progress) progress(n);
  return Status::Ok();
}

void HttpEngine::SetLoadPool(std::vector<FillerSource> pool) { impl_->load_pool = std::move(pool); }
std::optional<EngineLoadRecord> HttpEngine::LoadRecord() const {
  if (!impl_->load_record) return std::nullopt;
  return EngineLoadRecord(*impl_->load_record);
}

Result<Future> HttpEngine::Complete(std::span<const int32_t> prompt, int max_new_tokens) {
  Impl& e = *impl_;
  if (e.opts.api == HttpApi::kLlamaServer)
    return Status::InvalidArgument(OptionName("api") +
                                   " llama-server: futures at forks go through vLLM or SGLang only");
  const bool vllm = e.opts.api == HttpApi::kVllm;
  const std::string path = vllm ? "/v1/completions" : "/generate";
  const std::vector<int32_t> ids(prompt.begin(), prompt.end());
  json req;
  if (vllm) {
    req = {{"model", e.opts.served_model}, {"prompt", ids}, {"max_tokens", max_new_tokens},
           {"temperature", 0.0},           {"logprobs", 1}, {"return_tokens_as_token_ids", true}};
  } else {
    req = {{"input_ids", ids},       {"sampling_params", {{"max_new_tokens", max_new_tokens}, {"temperature", 0.0}}},
           {"return_logprob", true}, {"logprob_start_len", std::max<int64_t>(0, int64_t(ids.size()) - 1)},
           {"top_logprobs_num", 0},  {"return_text_in_logprobs", false}};
  }
  const double t0 = NowSeconds();
  FS_ASSIGN_OR_RETURN(json body, e.PostJson(path, req));
  const std::string where = e.client.Where(path);
  auto f = vllm ? http::ParseVllmCompletion(body, e.n_vocab) : http::ParseSglangCompletion(body, e.n_vocab);
  if (!f.ok()) return Status::Error(e.client.Scrub(where + ": " + f.status().message()));
  if (int(f->tokens.size()) > max_new_tokens)
    return Status::Error(
        fmt::format("{}: {} tokens generated, {} were asked for", where, f->tokens.size(), max_new_tokens));
  f->seconds = NowSeconds() - t0;
  return f;
}

EngineDescription HttpEngine::Describe() const {
  const Impl& e = *impl_;
  const HttpApi api = e.opts.api;
  // The server's own flags decide numerics (see server / server_note); the knobs are flipscope's:
  // the load, and a served replay (ServedReplay), recorded as the llama engine records it.
  KnobValues knobs;
  if (e.opts.load > 0) knobs = {{"load", int64_t(e.opts.load)}, {"load_seed", int64_t(e.opts.load_seed)}};
  if (e.served_record) knobs["replay"] = std::string(NameOf(Replay::kServed));
  ServerEngineFacts f{.api = std::string(NameOf(api)),
                      .url = RedactUrl(e.opts.url),
                      .endpoint = api == HttpApi::kVllm     ? "/v1/completions"
                                  : api == HttpApi::kSglang ? "/generate"
                                                            : "/completion",
                      .served_model = e.opts.served_model,
                      .server = OpaqueJson(e.server),
                      .server_context = e.context,
                      .server_note = e.opts.server_note,
                      .logprobs = e.opts.logprobs,
                      .topk = e.k,
                      .api_key_env = e.opts.api_key_env,  // the variable's name only
                      .timeout_s = e.opts.timeout_s,
                      .retries = e.opts.retries};
  if (!e.opts.launch.is_null())
    f.launch = ServerEngineFacts::Launch{OpaqueJson(e.opts.launch), OpaqueJson(e.opts.launched)};
  return {.flags = e.opts.ToFlags(), .knobs = std::move(knobs), .env = {}, .facts = std::move(f)};
}

}  // namespace flipscope
