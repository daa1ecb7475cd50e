// `flipscope capture -m MODEL -w WORKLOAD -o OUT.safetensors [knobs]`
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "capture/capture.h"
#include "cli/commands.h"
#include "results/results.h"
#include "util/util.h"

namespace flipscope::cli {

namespace {
// Registers the server flags of --engine openai (docs/engines.md).
void AddServerFlags(CLI::App* cmd, HttpOptions& h, std::string& api) {
  cmd->add_option("--url", h.url, "--engine openai: the server's base URL, e.g. http://gpu-host:8000");
  cmd->add_option("--api", api,
                  "--engine openai: vllm (POST /v1/completions), sglang (POST /generate) or llama-server "
                  "(POST /completion; --replay served only)")
      ->capture_default_str();
  cmd->add_option("--logprobs", h.logprobs,
                  "--engine openai: top-k log-probabilities per position (-1: vLLM's full vocabulary)")
      ->capture_default_str();
  cmd->add_option("--served-model-name", h.served_model,
                  "--engine openai: the request's model (default: the server's first)");
  cmd->add_option("--api-key-env", h.api_key_env,
                  "--engine openai: environment variable holding the API key (sent as Bearer)");
  cmd->add_option("--server-note", h.server_note,
                  "--engine openai: text recorded in the manifest, e.g. the server's flags");
  cmd->add_option("--timeout", h.timeout_s, "--engine openai: seconds per request")->capture_default_str();
  cmd->add_option("--retries", h.retries, "--engine openai: retries after 5xx, 429 and timeouts")
      ->capture_default_str();
}

// The capture stage's errors name the fields of its options (the server's, a device, the
// knobs); these are the flags that set them.
Status WithCaptureFlags(const Status& st) {
  return FieldsAsFlags(st, {{"url", "--url"},
                            {"api", "--api"},
                            {"load", "--load"},
                            {"engine", "--engine"},
                            {"replay", "--replay"},
                            {"store", "--store"},
                            {"logprobs", "--logprobs"},
                            {"timeout", "--timeout"},
                            {"retries", "--retries"},
                            {"api_key_env", "--api-key-env"},
                            {"device", "-dev"},
                            {"chat_template", "--chat-template"}});
}

// --load-repeats: the alone capture, the loaded repeats, and one line on how many match it.
int LoadFloor(const CaptureRequest& req, int repeats) {
  auto f = RunLoadFloor(req, repeats);
  if (!f.ok())
    return Fail(FieldsAsFlags(WithCaptureFlags(f.status()),
                              {{"repeats", "--load-repeats"}}));
  fmt::print(stderr, "--load {}: {} of {} loaded repeats bit-identical to the alone capture {}\n", req.knobs.load,
             f->bit_identical_repeats, repeats, req.out_path);
  for (const LoadComparison& r : f->repeats)
    if (!r.bit_identical)
      fmt::print(stderr, "  {}: {} of {} rows identical, {} flips\n", r.capture, r.identical_rows, r.probes, r.flips);
  fmt::print(stderr, "wrote {}\n", f->summary_path);
  return 0;
}

// Reads the named values of the flags into req: --engine (and the --url it needs), --api (read
// only where it is used: --engine openai) and --format.
Status ReadNames(const std::string& engine_name, const std::string& api_name, const std::string& format_name,
                 CaptureRequest& req) {
  FS_ASSIGN_OR_RETURN(req.engine, ParseName<EngineKind>(engine_name, "--engine"));
  if (req.engine == EngineKind::kOpenai && req.http.url.empty()) return Status::Error("--engine openai needs --url");
  if (req.engine != EngineKind::kOpenai && !req.http.url.empty()) return Status::Error("--url needs --engine openai");
  if (req.engine == EngineKind::kOpenai) {
    auto api = ParseName<HttpApi>(api_name, "api");
    if (!api.ok()) return WithCaptureFlags(api.status());
    req.http.api = *api;
  }
  FS_ASSIGN_OR_RETURN(req.workload.format, ParseWorkloadFormat(format_name, "--format"));
  return Status::Ok();
}

}  // namespace

namespace {

// --fork-at's positions (none without it), with req's forks set to decode them into *out.
Result<std::set<int32_t>> ForkPoints(const std::string& fork_at, int fork_tokens, CaptureRequest& req,
                                     std::shared_ptr<DecodedFutures> out) {
  if (fork_at.empty()) return std::set<int32_t>();
  if (req.engine != EngineKind::kLlama) return Status::InvalidArgument("--fork-at needs --engine llama");
  if (fork_tokens < 1) return Status::InvalidArgument("--fork-tokens must be >= 1");
  // Positions past the workload are no probes: refused after the capture, by name.
  FS_ASSIGN_OR_RETURN(auto list, SelectPositions(fork_at, std::numeric_limits<int32_t>::max() - 1, {}, "--fork-at"));
  std::set<int32_t> points(list.begin(), list.end());
  req.forks = OwnForks(points, fork_tokens, std::move(out));
  return points;
}

// Writes the futures of --fork-at beside the capture; an error names the positions that were no probes.
Status KeepFutures(const std::string& capture, const std::set<int32_t>& points, const DecodedFutures& d) {
  if (points.empty()) return Status::Ok();
  std::vector<int32_t> missing;
  for (int32_t p : points)
    if (!d.at.count(p)) missing.push_back(p);
  if (!missing.empty()) {
    const size_t shown = std::min<size_t>(missing.size(), 5);
    const std::string list =
        fmt::format("{}{}", fmt::join(missing.begin(), missing.begin() + long(shown), ", "),
                    missing.size() > shown ? fmt::format(" and {} more", missing.size() - shown) : "");
    return Status::InvalidArgument(
        fmt::format("--fork-at: {} {} of {}, which is written without futures (fork "
                    "where rows are stored: --stride, --full)",
                    list, missing.size() == 1 ? "is not a probe position" : "are not probe positions", capture));
  }
  FS_RETURN_IF_ERROR(WriteDecoded(capture, capture, d));
  fmt::print(stderr, "wrote {}.forks.json: {} futures of up to {} tokens\n", capture, d.at.size(), d.max_tokens);
  return Status::Ok();
}

// The capture's terminal line: what was written and what ran.
void SayCaptured(const std::string& path, const CaptureManifest& m) {
  // The engine's flags leave the replay out (they are what a launch command would take), so a
  // served capture says so here.
  std::string replay;
  if (m.replay == Replay::kServed && m.FedSingly())
    replay = fmt::format(", --replay served ({} of {} tokens fed alone)", *m.FedSingly(), m.NTokens());
  else if (m.replay == Replay::kServed)
    replay = ", --replay served";
  fmt::print(stderr, "wrote {}: {} tokens, {} probes, {:.1f} tok/s, {}{}\n", path,
             m.NTokens(), m.NProbes(), m.TokensPerSecond(), m.engine.flags, replay);
  // The flags above are what ran; where llama.cpp decided a setting itself, say what and why.
  for (const std::string& note : ResolvedNotes(m.engine)) fmt::print(stderr, "  {}\n", note);
}

}  // namespace

Action DefineCapture(CLI::App* cmd) {
  struct Opts {
    CaptureRequest req;
    std::string engine{NameOf(CaptureRequest().engine)};
    std::string store = StoreName(CaptureRequest().store);
    std::string api{NameOf(HttpOptions().api)};
    std::string format{NameOf(WorkloadOptions().format)};
    std::map<std::string, std::string> knob_texts;
    bool quiet = false;
    int load_repeats = 0;
    std::string fork_at;  // probe positions to fork at, from the capture's own greedy token
    int fork_tokens = CaptureForks().max_tokens;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("-m,--model", o->req.model_path, "GGUF model file (with --engine openai: its tokenizer only)")
      ->required();
  cmd->add_option("--engine", o->engine,
                  "llama (linked llama.cpp), exact (the FP64 reference, docs/exact.md) or openai (a vLLM / SGLang "
                  "server, --url)")
      ->capture_default_str();
  cmd->add_option("-w,--workload", o->req.workload_path, "Chat JSON/JSONL, plain text or token ids")->required();
  cmd->add_option("-o,--output", o->req.out_path, "Capture file to write (.safetensors)")->required();
  cmd->add_option("--format", o->format, "Workload format: auto, chat, jsonl, text, tokens")->capture_default_str();
  cmd->add_option("--chat-template", o->req.workload.chat_template,
                  "Jinja template FILE or llama.cpp template NAME (default: the model's embedded one)");
  cmd->add_option("--stride", o->req.plan.stride, "Store every N-th position")->capture_default_str();
  cmd->add_option("--full", o->req.plan.full, "Also store every position of: tool_calls and/or ranges A-B,...");
  cmd->add_option("--store", o->store, "Stored logits dtype: f32 (native) or bf16")->capture_default_str();
  cmd->add_flag("-q,--quiet", o->quiet, "No progress bar");
  cmd->add_option("--load-text", o->req.load_text,
                  "--load: transcripts or text the fillers are cut from (repeatable; default: the workload itself)");
  cmd->add_option("--load-repeats", o->load_repeats,
                  "--load: capture alone to -o, then R times under load, and count the repeats bit-identical to it");
  cmd->add_option(
      "--fork-at", o->fork_at,
      "Also decode a greedy future at these probe positions (ranges A-B,C-D as --full), each from this capture's own "
      "top-1 token; written to OUTPUT.forks.json for flipscope branch");
  cmd->add_option("--fork-tokens", o->fork_tokens, "--fork-at: each future's length in tokens")->capture_default_str();
  AddKnobFlags(cmd, o->knob_texts);
  AddServerFlags(cmd, o->req.http, o->api);
  return [o, cmd]() -> int {
    auto store = ParseStore(o->store);
    if (!store.ok()) return Fail(store.status());
    o->req.store = *store;
    if (Status st = ApplyKnobFlags(cmd, o->knob_texts, o->req.knobs); !st.ok()) return Fail(st);
    o->req.log.bars = !o->quiet;
    if (Status st = ReadNames(o->engine, o->api, o->format, o->req); !st.ok()) return Fail(st);
    if (o->load_repeats > 0) return LoadFloor(o->req, o->load_repeats);
    auto forks = std::make_shared<DecodedFutures>();
    auto points = ForkPoints(o->fork_at, o->fork_tokens, o->req, forks);
    if (!points.ok()) return Fail(points.status());
    auto m = RunCapture(o->req);
    if (!m.ok()) return Fail(WithCaptureFlags(m.status()));
    SayCaptured(o->req.out_path, *m);
    if (Status st = KeepFutures(o->req.out_path, *points, *forks); !st.ok()) return Fail(st);
    return 0;
  };
}

}  // namespace flipscope::cli
