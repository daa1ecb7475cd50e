// engine/http_engine.h: servers over HTTP (vLLM, SGLang, llama-server): HttpEngine and the one
// llama-server request. Part of the engine stage (engine/engine.h is its interface).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "engine/engine_base.h"
#include "util/names.h"
#include "util/status.h"

namespace flipscope {

// ---- Servers over HTTP: vLLM and SGLang (docs/engines.md) ---------------------------------------

// A server's API: kVllm POST /v1/completions; kSglang POST /generate; kLlamaServer POST
// /completion (served replay only: it returns no prompt log-probabilities).
enum class HttpApi { kVllm, kSglang, kLlamaServer };
template <>
struct Names<HttpApi> {
  static constexpr std::pair<HttpApi, const char*> v[] = {
      {HttpApi::kVllm, "vllm"}, {HttpApi::kSglang, "sglang"}, {HttpApi::kLlamaServer, "llama-server"}};
};

// How to reach a server that returns prompt log-probabilities, and what to ask it for.
struct HttpOptions {
  std::string url;  // base URL, e.g. http://gpu-host:8000 (no path)
  HttpApi api = HttpApi::kVllm;
  std::string served_model;  // vLLM's request "model"; empty = the first id of GET /v1/models
  int logprobs = 20;         // k per position; -1 (vLLM) = the whole vocabulary
  std::string api_key_env;   // env var holding a Bearer key; the key itself is never recorded
  double timeout_s = 600;    // per request (a long prompt is one request)
  int retries = 4;           // extra attempts after 5xx, 429, timeouts and refused connections
  double backoff_s = 1;      // delay before the first retry, doubled before each next one
  std::string server_note;   // free text for the manifest, e.g. the server's launch flags
  int load = 0;              // concurrent filler requests while the measured one runs (knob load)
  int load_seed = 0;         // knob load_seed
  // A server flipscope started (flipscope run's `launch`): what was asked ({"command", "env",
  // "health", "port"}; part of a capture's identity) and what happened ({"command" as run, "pid",
  // "log", "startup_s"}); both null otherwise. Recorded in the manifest under engine.launch.
  nlohmann::json launch, launched;
  // Called before every retry; an error ends the retries with it (a launched server that exited).
  std::function<Status()> alive;
  // Checks the values; errors name the field.
  Status Validate() const;
  // The flags that reproduce these options on `flipscope capture` (no key, URL redacted).
  std::string ToFlags() const;
};

// Top-k rows at chosen positions (a served replay over HTTP keeps only the rows it can show were
// computed as served): row i is ids / logprobs [i*k, (i+1)*k), most probable first.
struct TopKRows {
  int32_t k = 0;
  std::vector<int32_t> positions, ids, argmax;
  std::vector<float> logprobs;
};
// The probes a served replay over HTTP can hand over: the decode steps (the model wrote p and
// p+1) and each message's generation prompt's last row (it did not write p but wrote p+1).
std::vector<int32_t> ServedHttpPositions(std::span<const int32_t> probes, std::span<const uint8_t> written);

// A server over HTTP. Rows are truncated: the top-k ids and log-probabilities the server returns,
// argmax = its top-1 id. The whole token sequence is sent as one request, because every
// position's distribution depends on its whole prefix.
class HttpEngine : public Engine {
 public:
  // Reads the key from opts.api_key_env, asks the server for its model id, version and context
  // limit (recorded in Describe()); n_vocab is the local model's, to check returned ids.
  static Result<std::unique_ptr<HttpEngine>> Create(const HttpOptions& opts, int32_t n_vocab);
  ~HttpEngine() override;
  int32_t n_vocab() const override;
  // k of every row (n_vocab when logprobs == -1).
  int32_t topk() const;
  // Sends tokens as one request and hands over the top-k rows at probes; errors name the URL.
  Status Prefill(std::span<const int32_t> tokens, std::span<const int32_t> probes, const RowSink& sink,
                 const ProgressFn& progress) override;
  // Engine "openai", the API, the redacted URL, the server's model id / version / limits as
  // reported, the note, the request parameters and "flags".
  EngineDescription Describe() const override;
  void SetLoadPool(std::vector<FillerSource> pool) override;
  // The filler requests sent during the last Prefill (load > 0), and how many overlapped it.
  std::optional<EngineLoadRecord> LoadRecord() const override;
  // Served replay (docs/served.md, "Over HTTP"; api vllm, sglang or llama-server): for each run of
  // written tokens, a greedy generation from its generation prompt, then one request per decode step
  // (position p fed alone over the server's cached prefix [0, p)). Returns the rows at the probes
  // ServedHttpPositions keeps: a decode step's row when the server reports 1 token computed over p
  // cached; else the generation's row when it had followed the transcript up to p (a decode step
  // too); else none (listed in ServedRecord as recomputed). Errors name the URL, or the server flag
  // that its prefix cache or cache counts need.
  Result<TopKRows> ServedReplay(std::span<const int32_t> tokens, std::span<const int32_t> probes,
                                std::span<const uint8_t> written, const ProgressFn& progress);
  // What the last ServedReplay sent and what the server reported: requests, per row its source and
  // cached / computed counts, the rows not kept, and the proof (one-token rows against the
  // generation's); none before the first.
  std::optional<ServerServedRecord> ServedRecord() const;
  // Greedy continuation of prompt at temperature 0: up to max_new_tokens generated tokens (fewer
  // when the server stops at end of generation), each with its probability; errors name the URL.
  Result<Future> Complete(std::span<const int32_t> prompt, int max_new_tokens);
  struct Impl;

 private:
  explicit HttpEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// llama-server's greedy choice after a prompt, and the top log-probabilities of the raw (pre-
// sampling) distribution it chose from, most probable first (none when the chosen token's piece is
// an incomplete UTF-8 character: llama-server leaves them out then).
struct ServedChoice {
  int32_t token = -1;
  std::vector<int32_t> ids;
  std::vector<double> logprobs;
};
// POST opts.url/completion to llama-server with the prompt as token ids, n_predict 1, n_probs k,
// post_sampling_probs false, return_tokens and temperature 0, keeping its prompt cache (so prompts that extend
// the previous one cost only their new tokens); errors name the URL or the field that is wrong.
Result<ServedChoice> LlamaServerChoice(const HttpOptions& opts, std::span<const int32_t> prompt, int k,
                                       int32_t n_vocab);

// url with any "user:password@" removed, for manifests and messages.
std::string RedactUrl(const std::string& url);

}  // namespace flipscope
