// Capturing an experiment's configurations: each repeat cached by its request (a capture whose
// recorded request equals the new one is reused), requantized models made once, server
// configurations' servers started for their captures, forks followed while capturing.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "branch/branch.h"
#include "checkpoint/model_info.h"
#include "experiment/experiment.h"
#include "experiment/steps.h"
#include "util/util.h"

namespace flipscope {
namespace {

namespace fs = std::filesystem;

// The model file a configuration runs: requantized weights are made once and kept in OUTDIR/models.
Result<std::string> ConfigModel(const ConfigSpec& c, const std::string& outdir) {
  if (c.requantize.empty()) return c.model_path;
  fs::create_directories(fs::path(outdir) / "models");
  std::string out = ConfigModelPath(c, outdir);
  if (fs::exists(out)) return out;
  FS_RETURN_IF_ERROR(Requantize(c.model_path, c.requantize, out));
  return out;
}

struct Runner {
  const Experiment& exp;
  const RunOptions& opts;
  std::map<std::string, std::string> sha_cache;  // path -> SHA-256

  Result<std::string> Sha(const std::string& path) {
    auto it = sha_cache.find(path);
    if (it != sha_cache.end()) return it->second;
    FS_ASSIGN_OR_RETURN(std::string h, Sha256File(path));
    sha_cache[path] = h;
    return h;
  }

  // Every repeat and configuration of one model file shares its hash and the rendered workload.
  std::map<std::string, CaptureSource> sources;  // model path -> its prepared source
  Result<CaptureManifest> Capture(const CaptureRequest& req) {
    auto it = sources.find(req.model_path);
    if (it == sources.end()) {
      FS_ASSIGN_OR_RETURN(CaptureSource s, PrepareCapture(req));
      it = sources.emplace(req.model_path, std::move(s)).first;
    }
    return RunCapture(req, it->second);
  }

  // A capture at `out` whose recorded request equals this one is reused.
  bool Reusable(const std::string& out, const ManifestRequest& request) {
    if (!fs::exists(out)) return false;
    auto r = CaptureReader::Open(out);
    return r.ok() && (*r)->manifest().request == request;
  }

  // Forks a capture follows while it runs (none when branch following is off for it); the
  // futures land in *decoded. Repeat 0 of a branched variant forks at its flips against
  // baseline r0; the baseline's repeat 1 forks at every branched variant's points.
  std::optional<CaptureForks> ForksFor(const ConfigSpec& c, int r, std::shared_ptr<DecodedFutures> decoded) {
    if (!exp.branch.enabled || base0.empty()) return std::nullopt;
    Result<CaptureForks> f = Status::Error("");
    if (&c == &exp.baseline && r == 1) {
      std::set<int32_t> points;
      for (const auto& v : exp.variants)
        if (Branched(exp, v.name))
          if (auto d = ReadDecoded(CapturePath(v, 0), base0))
            for (const auto& [p, fut] : d->at) points.insert(p);
      if (points.empty()) return std::nullopt;
      f = BaselineForks(base0, points, exp.branch, decoded);
    } else if (&c != &exp.baseline && r == 0 && Branched(exp, c.name)) {
      f = VariantForks(base0, exp.branch, decoded);
    }
    if (!f.ok()) return std::nullopt;  // the branch stage runs its own pass instead
    return *f;
  }

  // Once the baseline's first capture is on disk: its size times the captures still to make
  // against the space left there, said now rather than when the later ones fail. A server's
  // captures (top-k rows, another size) are not counted, nor weighed by.
  void WarnOfSpace() const {
    if (exp.baseline.engine == EngineKind::kOpenai) return;
    std::error_code ec;
    const uint64_t bytes = fs::file_size(base0, ec);
    const fs::space_info space = fs::space(fs::path(base0).parent_path(), ec);
    if (ec) return;
    int left = 0;
    auto count = [&](const ConfigSpec& c, int from) {
      if (c.engine == EngineKind::kOpenai) return;
      for (int r = from; r < c.repeats; ++r) left += !fs::exists(CapturePath(c, r));
    };
    count(exp.baseline, 1);
    for (const ConfigSpec& v : exp.variants) count(v, 0);
    if (auto line = SpaceWarning(bytes, left, space.available, exp.store == StoreDtype::kF32)) opts.log.Info(*line);
  }

  std::string CapturePath(const ConfigSpec& c, int r) const { return CaptureFilePath(opts.outdir, c, r); }

  // Captures repeats [r_begin, r_end) of one configuration into its results entry (made when it
  // has no name yet), whose status and reason say how it ended. Returns that status: a refused or failed
  // configuration is recorded and the run goes on; an error ends the run (a server
  // configuration's failure), naming the experiment file and the configuration.
  Result<ConfigStatus> CaptureConfig(const ConfigSpec& c, int r_begin, int r_end, ConfigEntry& entry) {
    if (entry.name.empty()) entry = NewEntry(c);
    auto stop = [&](ConfigStatus status, const Status& why) {
      entry.status = status;
      entry.reason = why.message();
      opts.log.Info(fmt::format("  {}: {}: {}", c.name, NameOf(status), why.message()));
      return status;
    };
    const bool served = c.engine == EngineKind::kOpenai;
    if (Status v = c.knobs.Validate(); !served && !v.ok()) return stop(ConfigStatus::kRefused, v);
    // A server configuration's server runs while its captures (and futures) are made, then stops.
    std::unique_ptr<ServerSession> server;
    if (served) server = std::make_unique<ServerSession>(c, ServerLogPath(c), opts.log);
    auto model = ConfigModel(c, opts.outdir);
    if (!model.ok()) return stop(ConfigStatus::kFailed, model.status());
    entry.model_path = *model;
    for (int r = r_begin; r < r_end; ++r) {
      Result<ConfigStatus> one = CaptureRepeat(c, r, *model, server.get(), entry);
      if (!one.ok()) return Fatal(c, one.status());
      if (*one != ConfigStatus::kOk) return stop(*one, Status::Error(entry.reason.value_or("")));
    }
    if (served && !entry.captures.empty()) {
      if (Status st = ServerFutures(c, r_begin, r_end, *server); !st.ok()) return Fatal(c, st);
    }
    auto first = CaptureReader::Open(entry.captures[0]);
    if (!first.ok()) return stop(ConfigStatus::kFailed, first.status());
    AddCaptureFacts((*first)->manifest(), entry);
    CheckRanAsAsked(c, entry);
    // A variant's lines only where they differ from the baseline's, which are printed first.
    if (r_begin == 0) {
      const bool is_base = &c == &exp.baseline;
      std::vector<std::string> notes = ResolvedNotes(*entry.engine, is_base ? std::vector<std::string>{} : base_notes);
      for (const std::string& note : notes) opts.log.Info("  " + c.name + ": " + note);
      if (is_base) base_notes = std::move(notes);
    }
    if (!entry.flags) entry.flags = c.knobs.ToFlags();
    entry.status = ConfigStatus::kOk;
    entry.model_file_size = uint64_t(fs::file_size(*model));
    return ConfigStatus::kOk;
  }

  // A configuration's results entry before its first capture.
  static ConfigEntry NewEntry(const ConfigSpec& c) {
    ConfigEntry e;
    e.name = c.name, e.description = c.description, e.repeats = c.repeats;
    e.capture_seconds.emplace(), e.reused.emplace();
    e.changes = ToJson(c.changes);
    return e;
  }

  // The request of repeat r of configuration c over model, its status lines indented under the
  // configuration's (a server configuration's asked HTTP options; its URL is set once it is up).
  CaptureRequest RequestFor(const ConfigSpec& c, int r, const std::string& model, ServerSession* server) const {
    CaptureRequest req = ConfigRequest(exp, c, r, model, opts.outdir, server ? &server->Asked() : nullptr);
    req.log = opts.log;
    if (const auto& line = opts.log.line) req.log.line = [line](std::string_view l) { line("    " + std::string(l)); };
    return req;
  }

  // Captures repeat r of c into entry (or reuses the capture of an equal request). Returns kOk,
  // or kRefused / kFailed with the entry's reason set; an error when a server configuration failed.
  Result<ConfigStatus> CaptureRepeat(const ConfigSpec& c, int r, const std::string& model, ServerSession* server,
                                     ConfigEntry& entry) {
    auto fail = [&](ConfigStatus status, const Status& why) {
      entry.reason = why.message();
      return status;
    };
    auto model_sha = Sha(model);
    auto workload_sha = Sha(exp.workload);
    if (!model_sha.ok()) return fail(ConfigStatus::kFailed, model_sha.status());
    if (!workload_sha.ok()) return fail(ConfigStatus::kFailed, workload_sha.status());
    CaptureRequest req = RequestFor(c, r, model, server);
    const bool reuse = Reusable(req.out_path, CaptureRequestOf(req, *model_sha, *workload_sha));
    const double t0 = NowSeconds();
    if (!reuse) {
      if (server) {
        auto up = server->Up();
        if (!up.ok()) return fail(ConfigStatus::kFailed, up.status());
        req.http = *up;
      }
      auto decoded = std::make_shared<DecodedFutures>();
      if (auto forks = c.engine != EngineKind::kLlama ? std::nullopt : ForksFor(c, r, decoded)) req.forks = *forks;
      opts.log.Info(fmt::format("  capturing {} (repeat {} of {}){}", ConfigLine(c, exp.baseline, req.http.ToFlags()),
                                r + 1, c.repeats, req.forks.plan ? ", following forks" : ""));
      auto m = Capture(req);
      // A server that dies or stalls mid-run stops the run; a re-run resumes from the captures made.
      // A refusal (a served replay the server cannot prove) is the configuration's, like llama's.
      if (!m.ok() && server && m.status().code() != StatusCode::kRefused) return m.status();
      if (!m.ok())
        return fail(m.status().code() == StatusCode::kRefused ? ConfigStatus::kRefused : ConfigStatus::kFailed,
                    m.status());
      if (req.forks.plan) {
        decoded->source = req.out_path;
        if (Status st = WriteDecoded(req.out_path, base0, *decoded); !st.ok())
          opts.log.Info(fmt::format("  {}: the decoded futures were not kept ({})", c.name, st.message()));
      }
    }
    if (r == 0 && &c == &exp.baseline) base0 = req.out_path;
    entry.captures.push_back(req.out_path);
    entry.capture_seconds->push_back(NowSeconds() - t0);
    entry.reused->push_back(reuse);
    return ConfigStatus::kOk;
  }

  // What llama.cpp decided itself (-fa auto, clamped sizes): the flags were the request. A knob
  // the file set must have run as written, or engine.resolved must say why not: a configuration's
  // name and changes may never describe a kernel that did not run. Each one that did not is
  // listed in the entry's "contradictions" and said.
  void CheckRanAsAsked(const ConfigSpec& c, ConfigEntry& entry) const {
    const nlohmann::json& ran = entry.knobs->record;
    const std::vector<KnobResolution>& resolved = entry.engine->resolved;
    auto explained = [&](const std::string& key) {
      return std::any_of(resolved.begin(), resolved.end(), [&](const KnobResolution& r) { return r.key == key; });
    };
    for (const auto& [key, value] : c.changes.values) {
      const nlohmann::json asked = flipscope::ToJson(value);
      if (FindKnob(key) && ran.is_object() && ran.contains(key) && ran[key] != asked && !explained(key)) {
        if (!entry.contradictions) entry.contradictions.emplace();
        entry.contradictions->push_back({key, asked, ran[key]});
        opts.log.Info(fmt::format("  {}: warning: {} was set to {} but the capture records {} with no reason", c.name,
                                  key, asked.dump(), ran[key].dump()));
      }
    }
  }

  std::string ServerLogPath(const ConfigSpec& c) const {
    return (fs::path(opts.outdir) / "captures" / (c.name + ".server.log")).string();
  }

  // The error that ends the run at a server configuration's failure: one line naming the file
  // and the configuration.
  Status Fatal(const ConfigSpec& c, const Status& why) const {
    return Status::Error(fmt::format("{}: configuration '{}': {}", exp.path, c.name, why.message()));
  }

  // Points where a server configuration decodes futures, from which capture, against what: a
  // branched variant at its first repeat's flips, from its own tokens; the baseline at every
  // branched variant's points, from r0's tokens, in its second repeat (or r0 when it has one).
  Status ServerFutures(const ConfigSpec& c, int r_begin, int r_end, ServerSession& server) {
    if (!exp.branch.enabled || base0.empty()) return Status::Ok();
    const bool is_base = &c == &exp.baseline;
    std::string capture;
    std::vector<int32_t> points;
    if (!is_base && r_begin == 0 && Branched(exp, c.name)) {
      capture = CapturePath(c, 0);
      FS_ASSIGN_OR_RETURN(points, FlipPoints(base0, capture, exp.branch));
    } else if (is_base && r_begin >= 1) {
      capture = CapturePath(c, r_end > 1 ? 1 : 0);
      std::set<int32_t> all;
      for (const auto& v : exp.variants)
        if (Branched(exp, v.name))
          if (auto d = ReadDecoded(CapturePath(v, 0), base0))
            for (const auto& [p, fut] : d->at) all.insert(p);
      points.assign(all.begin(), all.end());
    }
    if (points.empty()) return Status::Ok();
    if (auto have = ReadDecoded(capture, base0)) {
      bool covered = std::all_of(points.begin(), points.end(), [&](int32_t p) { return have->at.count(p) > 0; });
      if (covered && have->max_tokens == exp.branch.options.max_tokens &&
          have->max_call_tokens == exp.branch.options.max_call_tokens)
        return Status::Ok();  // kept from an earlier run of the same captures
    }
    FS_ASSIGN_OR_RETURN(HttpOptions up, server.Up());
    FS_ASSIGN_OR_RETURN(ForkFirst first, FirstTokens(capture, is_base ? base0 : ""));
    opts.log.Info(fmt::format("  following {} forks of {} over HTTP", points.size(), c.name));
    DecodedFutures d;
    return DecodeOverHttp(up, capture, base0, points, first, exp.branch, opts.log, &d);
  }

  std::string base0;                    // the baseline's first capture, once made
  std::vector<std::string> base_notes;  // what llama.cpp decided for the baseline (ResolvedNotes)
};

// The error that ends the run when a capture it cannot go on without was refused or failed:
// "<what> could not be captured" with the entry's reason.
Status CaptureFailed(const Experiment& exp, const std::string& what, const ConfigEntry& entry) {
  return Status::Error(exp.path + ": " + what + " could not be captured: " + entry.reason.value_or("?"));
}

// 1b. The exact reference into *reference: the FP64 engine over the same tokens and probes,
// captured once.
Status CaptureReference(Runner& runner, const Experiment& exp, std::optional<ReferenceResults>* reference) {
  ConfigSpec ref;
  ref.name = "exact";
  ref.description = "the FP64 exact engine: the weights' true function (docs/exact.md)";
  ref.model_path = exp.model;
  ref.engine = EngineKind::kExact;
  ref.knobs.n_threads = exp.baseline.knobs.n_threads;
  ref.knobs.devices = exp.reference_device;
  ConfigEntry entry;
  FS_ASSIGN_OR_RETURN(ConfigStatus status, runner.CaptureConfig(ref, 0, 1, entry));
  if (status != ConfigStatus::kOk) return CaptureFailed(exp, "the exact reference", entry);
  reference->emplace().capture = std::move(entry);
  return Status::Ok();
}

// The captures in the order CaptureAll (steps.h) states.
Status CaptureInOrder(Runner& runner, const Experiment& exp, const ModelInfo& model, Measurements& m,
                      std::optional<ReferenceResults>* reference) {
  m.configs.clear();
  ConfigEntry base_entry;
  FS_ASSIGN_OR_RETURN(ConfigStatus base_status, runner.CaptureConfig(exp.baseline, 0, 1, base_entry));
  if (base_status != ConfigStatus::kOk) return CaptureFailed(exp, "the baseline", base_entry);
  runner.WarnOfSpace();
  // A server decides its own KV cache, which the knobs do not describe: its KV bytes are unknown
  // (written as null).
  auto kv_bytes = [&](const ConfigSpec& c, ConfigEntry& e) {
    if (c.engine == EngineKind::kOpenai)
      e.kv_bytes_unknown = true;
    else
      e.kv_bytes_per_token = KvBytesPerToken(model, c.knobs);
  };
  std::vector<ConfigEntry> variant_entries;
  for (const auto& v : exp.variants) {
    ConfigEntry entry;
    FS_RETURN_IF_ERROR(runner.CaptureConfig(v, 0, v.repeats, entry).status());
    kv_bytes(v, entry);
    variant_entries.push_back(std::move(entry));
  }
  // The baseline's second call also runs when it has one repeat: a server baseline decodes its
  // futures at the variants' flips then.
  FS_ASSIGN_OR_RETURN(base_status, runner.CaptureConfig(exp.baseline, 1, exp.baseline.repeats, base_entry));
  if (base_status != ConfigStatus::kOk) return CaptureFailed(exp, "the baseline's repeats", base_entry);
  kv_bytes(exp.baseline, base_entry);
  if (exp.reference_exact) FS_RETURN_IF_ERROR(CaptureReference(runner, exp, reference));
  m.configs.push_back(std::move(base_entry));
  for (auto& e : variant_entries) m.configs.push_back(std::move(e));
  return Status::Ok();
}

}  // namespace

std::string ConfigModelPath(const ConfigSpec& c, const std::string& outdir) {
  if (c.requantize.empty()) return c.model_path;
  return (fs::path(outdir) / "models" / (fs::path(c.model_path).stem().string() + "-" + c.requantize + ".gguf"))
      .string();
}

std::string CaptureFilePath(const std::string& outdir, const ConfigSpec& c, int r) {
  return (fs::path(outdir) / "captures" / fmt::format("{}-r{}.safetensors", c.name, r)).string();
}

CaptureRequest ConfigRequest(const Experiment& exp, const ConfigSpec& c, int r, const std::string& model,
                             const std::string& outdir, const HttpOptions* server) {
  CaptureRequest req;
  req.model_path = model;
  req.workload_path = exp.workload;
  req.workload = exp.workload_options;
  req.knobs = c.knobs;
  if (server) {  // a server's own flags decide its numerics; the replay is how flipscope asks it
    req.knobs = Knobs();
    req.knobs.replay = c.knobs.replay;
    req.http = *server;
  }
  req.plan = exp.plan;
  req.store = exp.store;
  req.out_path = CaptureFilePath(outdir, c, r);
  req.engine = c.engine;
  return req;
}

std::optional<std::string> SpaceWarning(uint64_t capture_bytes, int captures_left, uint64_t free_bytes, bool f32_rows) {
  const uint64_t need = capture_bytes * uint64_t(std::max(0, captures_left));
  if (need <= free_bytes) return std::nullopt;
  return fmt::format(
      "  the {} captures still to make need about {} and the results folder's disk has {} free: those that do "
      "not fit will fail{}",
      captures_left, HumanBytes(double(need)), HumanBytes(double(free_bytes)),
      f32_rows ? " (BF16 rows, store = \"bf16\" under [probe], take half)" : "");
}

Status CaptureAll(const Experiment& exp, const RunOptions& opts, const ModelInfo& model,
                  std::map<std::string, std::string>* hashes, Measurements& m,
                  std::optional<ReferenceResults>* reference) {
  Runner runner{exp, opts, *hashes, {}, {}, {}};
  Status st = CaptureInOrder(runner, exp, model, m, reference);
  *hashes = std::move(runner.sha_cache);
  return st;
}

}  // namespace flipscope
