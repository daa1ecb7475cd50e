// `flipscope capture -m MODEL -w WORKLOAD -o OUT.safetensors [knobs]`
#include <fmt/format.h>

#include "capture/capture.h"
#include "cli/commands.h"
#include "util/util.h"

namespace flipscope::cli {

namespace {
// Registers the numerics knobs under llama.cpp's flag names.
void AddKnobFlags(CLI::App* cmd, Knobs& k, std::string& ts) {
  cmd->add_option("--flash-attn", k.flash_attn, "Flash attention: on, off or auto")->default_val("auto");
  cmd->add_option("--cache-type-k", k.cache_type_k, "K cache type (f32 f16 bf16 q8_0 q4_0 q4_1 iq4_nl q5_0 q5_1)")
      ->default_val("f16");
  cmd->add_option("--cache-type-v", k.cache_type_v, "V cache type (as -ctk)")->default_val("f16");
  cmd->add_option("-c,--ctx-size", k.n_ctx, "Context size; 0 = the model's training context")->default_val(0);
  cmd->add_option("-b,--batch-size", k.n_batch, "Logical batch size (prefill chunk)")->default_val(2048);
  cmd->add_option("--ubatch-size", k.n_ubatch, "Physical batch size")->default_val(512);
  cmd->add_option("-t,--threads", k.n_threads, "Threads; 0 = all hardware threads")->default_val(0);
  cmd->add_option("--n-gpu-layers", k.n_gpu_layers, "Layers on the GPU; -1 = all")->default_val(-1);
  cmd->add_option("--split-mode", k.split_mode, "Multi-GPU split: none, layer, row or tensor")->default_val("layer");
  cmd->add_option("--tensor-split", ts, "Fractions per GPU, e.g. 3,1");
  cmd->add_option("--device", k.devices, "Devices, comma separated (see --version)");
}

// Registers the server flags of --engine openai (docs/engines.md).
void AddServerFlags(CLI::App* cmd, HttpOptions& h) {
  cmd->add_option("--url", h.url, "--engine openai: the server's base URL, e.g. http://gpu-host:8000");
  cmd->add_option("--api", h.api, "--engine openai: vllm (POST /v1/completions) or sglang (POST /generate)")
      ->default_val("vllm");
  cmd->add_option("--logprobs", h.logprobs, "--engine openai: top-k log-probabilities per position (-1: vLLM's full vocabulary)")
      ->default_val(20);
  cmd->add_option("--served-model-name", h.served_model, "--engine openai: the request's model (default: the server's first)");
  cmd->add_option("--api-key-env", h.api_key_env, "--engine openai: environment variable holding the API key (sent as Bearer)");
  cmd->add_option("--server-note", h.server_note, "--engine openai: text recorded in the manifest, e.g. the server's flags");
  cmd->add_option("--timeout", h.timeout_s, "--engine openai: seconds per request")->default_val(600);
  cmd->add_option("--retries", h.retries, "--engine openai: retries after 5xx, 429 and timeouts")->default_val(4);
}

Result<std::vector<float>> ParseSplit(const std::string& s) {
  std::vector<float> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t comma = s.find_first_of(",/", start);
    std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    try {
      out.push_back(std::stof(item));
    } catch (...) {
      return Status::Error("-ts: '" + item + "' is not a number");
    }
    start = comma == std::string::npos ? s.size() : comma + 1;
  }
  return out;
}
}  // namespace

void AddCaptureCommand(CLI::App& app) {
  struct Opts {
    CaptureRequest req;
    std::string store = "f32", ts;
    bool quiet = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("capture", "Run a workload teacher-forced and store the logits at probe positions");
  cmd->add_option("-m,--model", o->req.model_path, "GGUF model file (with --engine openai: its tokenizer only)")->required();
  cmd->add_option("--engine", o->req.engine, "llama (linked llama.cpp) or openai (a vLLM / SGLang server, --url)")
      ->default_val("llama");
  cmd->add_option("-w,--workload", o->req.workload_path, "Chat JSON/JSONL, plain text or token ids")->required();
  cmd->add_option("-o,--output", o->req.out_path, "Capture file to write (.safetensors)")->required();
  cmd->add_option("--format", o->req.workload.format, "Workload format: auto, chat, jsonl, text, tokens")
      ->default_val("auto");
  cmd->add_option("--chat-template", o->req.workload.chat_template,
                  "Jinja template FILE or llama.cpp template NAME (default: the model's embedded one)");
  cmd->add_option("--stride", o->req.plan.stride, "Store every N-th position")->default_val(32);
  cmd->add_option("--full", o->req.plan.full, "Also store every position of: tool_calls and/or ranges A-B,...");
  cmd->add_option("--store", o->store, "Stored logits dtype: f32 (native) or bf16")->default_val("f32");
  cmd->add_flag("-q,--quiet", o->quiet, "No progress bar");
  AddKnobFlags(cmd, o->req.knobs, o->ts);
  AddServerFlags(cmd, o->req.http);
  cmd->callback([o] {
    auto store = ParseStore(o->store);
    if (!store.ok()) return void(ExitCode() = Fail(store.status()));
    o->req.store = *store;
    auto split = ParseSplit(o->ts);
    if (!split.ok()) return void(ExitCode() = Fail(split.status()));
    o->req.knobs.tensor_split = *split;
    o->req.progress = !o->quiet;
    if (o->req.engine == "openai" && o->req.http.url.empty()) return void(ExitCode() = Fail(Status::Error("--engine openai needs --url")));
    if (o->req.engine != "openai" && !o->req.http.url.empty())
      return void(ExitCode() = Fail(Status::Error("--url needs --engine openai")));
    auto m = RunCapture(o->req);
    if (!m.ok()) return void(ExitCode() = Fail(m.status()));
    const auto& t = (*m)["timings"];
    fmt::print(stderr, "wrote {}: {} tokens, {} probes, {:.1f} tok/s, {}\n", o->req.out_path,
               (*m)["workload"].value("n_tokens", 0), (*m)["probe_plan"]["n_probes"].get<int64_t>(),
               t["tokens_per_s"].get<double>(), (*m)["engine"]["flags"].get<std::string>());
  });
}

}  // namespace flipscope::cli
