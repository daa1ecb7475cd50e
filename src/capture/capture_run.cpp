// The capture stage: workload -> engine -> capture file, with the manifest that discloses it.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>

#include "capture/capture.h"
#include "capture/row_pipeline.h"
#include "capture/rows_progress.h"
#include "checkpoint/model_info.h"
#include "exact/exact.h"
#include "records/records.h"
#include "util/util.h"

namespace flipscope {
namespace {

// Hash of the vocabulary as rendered: two captures with equal hashes tokenize alike.
std::string TokenizerHash(int32_t n_vocab, const std::function<std::string(int32_t)>& text) {
  Sha256 h;
  for (int32_t t = 0; t < n_vocab; ++t) {
    std::string piece = text(t);
    h.Update(piece.data(), piece.size() + 1);  // include the NUL as a separator
  }
  return h.HexDigest();
}

// The engine a request names, with the tokenizer hash of the model that tokenized the workload.
struct MadeEngine {
  std::unique_ptr<Engine> engine;
  LlamaEngine* llama = nullptr;  // the same engine when it is llama.cpp's (it can fork)
  HttpEngine* http = nullptr;    // the same engine when it is a server's
  std::string tokenizer_sha256;
  int32_t topk = 0;                            // > 0: the engine gives truncated rows
  std::vector<LoadSourceRecord> load_sources;  // the fillers' sources under load (none: the workload)
  double load_s = 0;                           // making the engine and its load pool
};

Result<MadeEngine> MakeEngine(const CaptureRequest& req, const ModelInfo& model, int32_t n_tokens) {
  MadeEngine m;
  if (req.engine == EngineKind::kLlama) {
    if (req.knobs.n_ctx > 0 && n_tokens > req.knobs.n_ctx)
      return Status::Error(fmt::format("{}: {} tokens do not fit the context of {} (ctx_size, -c)", req.workload_path,
                                       n_tokens, req.knobs.n_ctx));
    if (req.knobs.n_ctx == 0 && n_tokens > model.n_ctx_train)
      return Status::Error(
          fmt::format("{}: {} tokens are longer than the model's training context of {}; set ctx_size (-c) "
                      "to run past it",
                      req.workload_path, n_tokens, model.n_ctx_train));
    FS_ASSIGN_OR_RETURN(auto llama, LlamaEngine::Create(req.model_path, req.knobs, req.forks.plan ? 2 : 1));
    m.tokenizer_sha256 = TokenizerHash(llama->n_vocab(), [&](int32_t t) { return llama->TokenText(t); });
    m.llama = llama.get();
    m.engine = std::move(llama);
    return m;
  }
  if (req.engine == EngineKind::kExact) {
    if (req.knobs.load > 0)
      return Status::InvalidArgument(OptionName("load") + " needs " + OptionName("engine") +
                                     " llama or openai (the exact engine runs alone)");
    // The FP64 reference has no context to run out of; past the training context it computes the
    // file's function all the same, which is no longer the model's trained regime: said, not refused.
    if (model.n_ctx_train > 0 && n_tokens > model.n_ctx_train)
      req.log.Info(
          fmt::format("warning: {} tokens are past the model's training context of {}: the exact engine "
                      "computes the file's function there too, outside the model's trained regime",
                      n_tokens, model.n_ctx_train));
    // The FP64 reference: only the thread count and the device (-dev CUDA0) of the knobs apply;
    // neither changes the function computed.
    ExactOptions o;
    o.n_threads = req.knobs.n_threads;
    o.device = req.knobs.devices;
    FS_ASSIGN_OR_RETURN(auto exact, ExactEngine::Create(req.model_path, o));
    FS_ASSIGN_OR_RETURN(auto detok, LoadDetokenizer(req.model_path));
    m.tokenizer_sha256 = TokenizerHash(exact->n_vocab(), detok);
    m.engine = std::move(exact);
    return m;
  }
  FS_ASSIGN_OR_RETURN(auto detok, LoadDetokenizer(req.model_path));
  HttpOptions http = req.http;
  http.load = req.knobs.load;
  http.load_seed = req.knobs.load_seed;
  FS_ASSIGN_OR_RETURN(auto server, HttpEngine::Create(http, int32_t(model.n_vocab)));
  m.tokenizer_sha256 = TokenizerHash(int32_t(model.n_vocab), detok);
  m.topk = server->topk();
  m.http = server.get();
  m.engine = std::move(server);
  return m;
}

// The fillers' sources (req.load_text, each rendered and tokenized like the workload) and their
// manifest entries; no sources when the fillers are cut from the workload itself.
Result<std::vector<FillerSource>> LoadPool(const CaptureRequest& req, std::vector<LoadSourceRecord>& sources) {
  std::vector<FillerSource> pool;
  sources.clear();
  for (const std::string& path : req.load_text) {
    WorkloadOptions o;
    o.chat_template = req.workload.chat_template;
    FS_ASSIGN_OR_RETURN(Workload w, LoadWorkload(path, req.model_path, o));
    if (w.tokens.size() < 2) return Status::InvalidArgument(path + ": a filler text needs at least 2 tokens");
    FS_ASSIGN_OR_RETURN(std::string sha, Sha256File(path));
    std::string name = std::filesystem::path(path).filename().string();
    sources.push_back({name, path, sha, int64_t(w.tokens.size())});
    pool.push_back({name, std::move(w.tokens)});
  }
  return pool;
}

// The source a capture reads; the fillers' sources only when asked for (a request that runs
// alone must not fail on a load text it never reads).
Result<CaptureSource> Prepare(const CaptureRequest& req, bool with_load) {
  CaptureSource s;
  FS_ASSIGN_OR_RETURN(s.model, ReadModelInfo(req.model_path));
  FS_ASSIGN_OR_RETURN(s.workload, LoadWorkload(req.workload_path, req.model_path, req.workload));
  // Once per source, not per capture: the captures that share it read the same transcript.
  for (const std::string& w : s.workload.warnings) req.log.Info("warning: " + w);
  FS_ASSIGN_OR_RETURN(s.workload_sha256, Sha256File(req.workload_path));
  s.workload_path = req.workload_path;
  s.workload_options = req.workload;
  if (with_load) {
    s.load_text = req.load_text;
    s.load_sources.emplace();
    FS_ASSIGN_OR_RETURN(s.load_pool, LoadPool(req, *s.load_sources));
  }
  return s;
}

// A source serves only requests of its own files: anything else would record one model's hash
// beside another model's rows.
Status CheckSource(const CaptureRequest& req, const CaptureSource& src) {
  if (req.model_path == src.model.path && req.workload_path == src.workload_path &&
      req.workload.format == src.workload_options.format &&
      req.workload.chat_template == src.workload_options.chat_template)
    return Status::Ok();
  return Status::InvalidArgument(fmt::format("{}: the capture source was prepared for {} over {}, not {} over {}",
                                             req.out_path, src.model.path, src.workload_path, req.model_path,
                                             req.workload_path));
}

// The engine with its load pool in place; the pool comes from the source when it was prepared
// from the same load texts, else it is read now.
Result<MadeEngine> OpenEngine(const CaptureRequest& req, const CaptureSource& src) {
  const double t0 = NowSeconds();
  FS_ASSIGN_OR_RETURN(MadeEngine made, MakeEngine(req, src.model, int32_t(src.workload.tokens.size())));
  if (req.forks.plan && !made.llama) return Status::Error("following forks needs the llama engine");
  if (req.knobs.load > 0) {
    std::vector<FillerSource> pool;
    if (src.load_sources && src.load_text == req.load_text) {
      pool = src.load_pool;
      made.load_sources = *src.load_sources;
    } else {
      FS_ASSIGN_OR_RETURN(pool, LoadPool(req, made.load_sources));
    }
    if (!pool.empty()) made.engine->SetLoadPool(std::move(pool));
  }
  made.load_s = NowSeconds() - t0;
  return made;
}

// The manifest the writer starts with: everything that decides or describes the rows; what is
// known only after them (timings, the load record) is added by AddRunRecord.
CaptureManifest StartManifest(const CaptureRequest& req, const CaptureSource& src, const MadeEngine& made,
                              size_t n_probes) {
  CaptureManifest m;
  m.tool_version = FlipscopeVersion();
  m.created = UtcNowIso();
  m.model = src.model;
  m.tokenizer_sha256 = made.tokenizer_sha256;
  m.workload.record = src.workload.info;
  m.workload.record["tools"] = src.workload.tools;  // the branch stage judges tool calls against these
  m.workload.spans = src.workload.spans;
  const EngineDescription described = made.engine->Describe();
  m.engine = EngineRecord::Of(ToJson(described));
  m.knobs = ManifestKnobs{described.knobs, {}};
  m.probe_plan = ManifestProbePlan{req.plan.stride, req.plan.full, int64_t(n_probes), {}};
  m.store = StoreName(req.store);
  m.truncated = made.topk > 0;
  m.topk = made.topk;
  m.request = CaptureRequestOf(req, src.model.sha256, src.workload_sha256);
  return m;
}

// How the rows were made: prefill time without the forks' decoding, so that tokens/s stays the
// prefill's own rate.
struct RowsRun {
  double prefill_s = 0;
  int64_t n_forks = 0;
  double fork_s = 0;
};

// Feeds every token and hands each probe row to the writer, following the planned forks when
// the request has them; errors of the llama engine name the model file.
Result<RowsRun> WriteRows(const CaptureRequest& req, const std::vector<int32_t>& tokens,
                          const std::vector<int32_t>& probes, const MadeEngine& made, CaptureWriter& writer,
                          RowsProgress& bar) {
  const double t0 = NowSeconds();
  // Full rows are copied out and written by the pipeline's workers while the engine computes on;
  // a server's top-k rows are small and written here.
  std::optional<RowPipeline> rows;
  if (made.topk == 0) {
    FS_ASSIGN_OR_RETURN(const int in_flight, RowsInFlightFromEnv());
    rows.emplace(writer, made.engine->n_vocab(), DefaultRowPipelineShape(made.engine->n_vocab(), in_flight));
  }
  // The llama engine says when a decode's rows may be overwritten (the next decode, a fork's):
  // until then they are only lent, and copied out by the workers and this thread together.
  const bool lend = rows && made.llama;
  RowSink write = [&](const Row& r) {
    if (!rows) return writer.WriteTopK(r.index, r.topk_ids, r.topk_logprobs, r.argmax);
    return lend ? rows->Lend(r.index, r.logits) : rows->Submit(r.index, r.logits);
  };
  ProgressFn on_tokens = [&](int64_t done) { bar.Tokens(done); };
  RowsRun run;
  auto on_fork = [&](const ForkRequest& fr, const Future& f) {
    ++run.n_forks;
    run.fork_s += f.seconds;
    bar.Forked(f.seconds);
    return req.forks.sink(fr, f);
  };
  if (req.forks.plan) FS_RETURN_IF_ERROR(made.llama->SetGrammar(req.forks.grammar));
  std::function<Status()> taken_back;
  if (lend) taken_back = [&] { return rows->TakeBack(); };
  Status st = made.llama ? made.llama->Prefill({.tokens = tokens,
                                                .probes = probes,
                                                .sink = write,
                                                .rows_handed = taken_back,
                                                .plan = req.forks.plan,
                                                .max_tokens = req.forks.max_tokens,
                                                .planned_sink = on_fork,
                                                .progress = on_tokens,
                                                .extend = req.forks.extend})
                         : made.engine->Prefill(tokens, probes, write, on_tokens);
  // Every queued row is on file before the rows count as done (and before Commit).
  if (rows) {
    Status written = rows->Finish();
    if (st.ok()) st = written;
  }
  std::optional<double> decode_s;
  if (made.llama && made.llama->ServedRecord()) decode_s = made.llama->ServedRecord()->decode_s;
  bar.Finish(st.ok(), decode_s);
  if (!st.ok()) return req.engine == EngineKind::kLlama ? st.Prefixed(req.model_path) : st;
  run.prefill_s = NowSeconds() - t0 - run.fork_s;
  return run;
}

// What is known once the rows are in: the timings (total since t0) and the engine's load record.
void AddRunRecord(const CaptureRequest& req, const MadeEngine& made, const RowsRun& run, int32_t n, double t0,
                  CaptureManifest& manifest) {
  const double t_run = run.prefill_s;
  manifest.timings = CaptureTimings{.load_s = made.load_s,
                                    .prefill_s = t_run,
                                    .tokens_per_s = t_run > 0 ? n / t_run : 0.0,
                                    .fork_decode_s = run.fork_s,
                                    .total_s = NowSeconds() - t0,
                                    .forks = run.n_forks,
                                    .parts = made.engine->PartTimes()};
  if (const auto plan = made.llama ? made.llama->ServedRecord() : std::nullopt) {
    ManifestServed served{.record = *plan,
                          .rule =
                              "position p fed alone (one llama_decode call) when the model wrote tokens p and "
                              "p+1; every other run of positions prefilled in -b chunks from its start",
                          .note = "",
                          .planned_probes = std::nullopt,
                          .as_read = {}};
    if (plan->written_tokens == 0)
      served.note = "the workload has no assistant message: nothing was decoded, served replay equals prefill";
    manifest.served = served;
  }
  if (const auto record = made.engine->LoadRecord()) {
    manifest.load = ManifestLoad{.record = *record,
                                 .sources = made.load_sources.empty()
                                                ? std::vector<LoadSourceRecord>{{"workload", req.workload_path, {}, {}}}
                                                : made.load_sources,
                                 .as_read = {}};
  }
}

// A server whose one-token rows differ from its own greedy generation's at the same positions
// computes a decode step differently depending on how its cache was filled: its served rows are
// decode steps, but not bit for bit those one agent loop computed. Said on the terminal, not only
// in the manifest (served.proof), since it changes what the capture can be trusted for.
void WarnIfProofFails(const CaptureRequest& req, const ServerServedRecord& served) {
  const int64_t compared = served.proof_compared, identical = served.proof_identical;
  if (identical >= compared) return;
  req.log.Info(
      fmt::format("warning: {}: {} of {} decode-step rows differ from the server's own greedy generation at "
                  "the same position (served.proof): this server's decode steps depend on how its cache "
                  "was filled, so the served rows are decode steps, not bit for bit the ones one agent "
                  "loop computed",
                  req.out_path, compared - identical, compared));
}

// A served replay over HTTP: the rows are gathered first, because which probes the server computed
// as served is known only from its answers; only those are written (docs/served.md, "Over HTTP").
Result<CaptureManifest> CaptureServedHttp(const CaptureRequest& req, const CaptureSource& src, MadeEngine& made,
                                          const std::vector<int32_t>& probes, const std::vector<uint8_t>& written,
                                          double t0) {
  const Workload& w = src.workload;
  if (std::find(written.begin(), written.end(), 1) == written.end())
    return Status::InvalidArgument(fmt::format(
        "{}: no assistant message: nothing for the server to decode, so served equals prefill (capture it with "
        "--replay prefill)",
        req.workload_path));
  RowsProgress bar(req.log, int64_t(w.tokens.size()), written, 0);
  const double t1 = NowSeconds();
  auto rows = made.http->ServedReplay(w.tokens, probes, written, [&](int64_t done) { bar.Tokens(done); });
  bar.Finish(rows.ok(), std::nullopt);
  FS_RETURN_IF_ERROR(rows.status());
  if (rows->positions.empty())
    return Status::Error(
        fmt::format("{}: replay served over HTTP kept no probe: none of the {} probes is a decode "
                    "step the server computed alone (see the served record)",
                    req.workload_path, probes.size()));
  CaptureManifest manifest = StartManifest(req, src, made, rows->positions.size());
  // The engine's record (and so the manifest's knobs) says the replay was served; compare reads it here.
  manifest.replay = Replay::kServed;
  CaptureLayout layout;
  layout.tokens = w.tokens;
  layout.positions = rows->positions;
  layout.topk = made.topk;
  layout.store = req.store;
  FS_ASSIGN_OR_RETURN(auto writer, CaptureWriter::Create(req.out_path, layout, manifest.ToJson()));
  const size_t k = size_t(rows->k);
  for (size_t i = 0; i < rows->positions.size(); ++i)
    FS_RETURN_IF_ERROR(writer->WriteTopK(int64_t(i), std::span<const int32_t>(rows->ids).subspan(i * k, k),
                                         std::span<const float>(rows->logprobs).subspan(i * k, k), rows->argmax[i]));
  RowsRun run;
  run.prefill_s = NowSeconds() - t1;
  AddRunRecord(req, made, run, int32_t(w.tokens.size()), t0, manifest);
  const auto served_record = made.http->ServedRecord();
  if (!served_record) return Status::Error(req.workload_path + ": the served replay left no record");
  manifest.served = ManifestServed{
      .record = *served_record, .rule = "", .note = "", .planned_probes = int64_t(probes.size()), .as_read = {}};
  const nlohmann::json final_manifest = manifest.ToJson();
  writer->SetManifest(final_manifest);
  FS_RETURN_IF_ERROR(writer->Commit());
  WarnIfProofFails(req, *served_record);
  return CaptureManifest::FromJson(final_manifest);
}

// The capture over a source; t0 is when the caller's capture began (the manifest's total_s).
Result<CaptureManifest> CaptureFrom(const CaptureRequest& req, const CaptureSource& src, double t0) {
  FS_RETURN_IF_ERROR(CheckKnobs(req.engine, req.knobs));
  FS_RETURN_IF_ERROR(CheckSource(req, src));
  const Workload& w = src.workload;
  const int32_t n = int32_t(w.tokens.size());
  FS_ASSIGN_OR_RETURN(std::vector<int32_t> probes, PlanProbes(req.plan, n, w.spans));
  if (req.engine == EngineKind::kOpenai && req.store != StoreDtype::kF32)
    return Status::Error(OptionName("store") +
                         " bf16 applies to full logits; a server's top-k log-probabilities are stored as f32");
  std::vector<uint8_t> written;  // served replay: which tokens the model wrote
  if (req.knobs.replay == Replay::kServed) {
    FS_ASSIGN_OR_RETURN(written, ServedWritten(w, req.workload_path));
    if (std::find(written.begin(), written.end(), 1) == written.end())
      req.log.Info(
          fmt::format("warning: {}: no assistant message: --replay served equals prefill here (nothing the "
                      "model wrote to decode)",
                      req.workload_path));
  }
  FS_ASSIGN_OR_RETURN(MadeEngine made, OpenEngine(req, src));
  if (made.http && req.knobs.replay == Replay::kServed) return CaptureServedHttp(req, src, made, probes, written, t0);
  RowsProgress bar(req.log, n, written, req.engine == EngineKind::kExact ? src.model.n_layer : 0);
  if (!written.empty()) made.llama->SetWritten(std::move(written));
  CaptureManifest manifest = StartManifest(req, src, made, probes.size());
  CaptureLayout layout;
  layout.tokens = w.tokens;
  layout.positions = probes;
  layout.n_vocab = made.topk > 0 ? 0 : made.engine->n_vocab();
  layout.topk = made.topk;
  layout.store = req.store;
  FS_ASSIGN_OR_RETURN(auto writer, CaptureWriter::Create(req.out_path, layout, manifest.ToJson()));
  FS_ASSIGN_OR_RETURN(RowsRun run, WriteRows(req, w.tokens, probes, made, *writer, bar));
  AddRunRecord(req, made, run, n, t0, manifest);
  const nlohmann::json final_manifest = manifest.ToJson();
  writer->SetManifest(final_manifest);
  FS_RETURN_IF_ERROR(writer->Commit());
  return CaptureManifest::FromJson(final_manifest);  // as a reader of the file sees it
}

}  // namespace

Result<CaptureSource> PrepareCapture(const CaptureRequest& req) { return Prepare(req, req.knobs.load > 0); }

Result<CaptureManifest> RunCapture(const CaptureRequest& req, const CaptureSource& source) {
  return CaptureFrom(req, source, NowSeconds());
}

Result<CaptureManifest> RunCapture(const CaptureRequest& req) {
  const double t0 = NowSeconds();
  FS_RETURN_IF_ERROR(CheckKnobs(req.engine, req.knobs));
  // Said before the model is read and the workload rendered, not after (the writer checks it too).
  FS_RETURN_IF_ERROR(CheckFolderOf(req.out_path));
  // Without the fillers' sources: OpenEngine reads them after the engine, as a single capture always has.
  FS_ASSIGN_OR_RETURN(CaptureSource src, Prepare(req, false));
  return CaptureFrom(req, src, t0);
}

}  // namespace flipscope
