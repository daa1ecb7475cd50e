// What a capture request asks for, before anything runs: the storage dtype, the probe plan, the
// knobs the chosen engine uses, the request as the manifest and the cache key record it, and the
// tokens a served replay feeds as decode steps.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "capture/capture.h"
#include "records/records.h"
#include "util/util.h"

namespace flipscope {

std::string StoreName(StoreDtype d) { return std::string(NameOf(d)); }

Result<StoreDtype> ParseStore(const std::string& name) {
  if (auto d = FromName<StoreDtype>(name)) return *d;
  return Status::Error(fmt::format("{} must be {}, not '{}'", OptionName("store"), Choices<StoreDtype>(), name));
}

Result<std::vector<int32_t>> PlanProbes(const ProbePlan& plan, int32_t n, const std::vector<Span>& spans) {
  if (plan.stride < 1) return Status::Error("stride must be >= 1");
  if (n < 2) return Status::Error("the workload needs at least 2 tokens");
  // The last position predicts no token of the workload, so probes stop at n-2.
  FS_ASSIGN_OR_RETURN(std::vector<int32_t> full, SelectPositions(plan.full, n - 2, spans, "full"));
  std::set<int32_t> pos(full.begin(), full.end());
  for (int32_t p = 0; p < n - 1; p += plan.stride) pos.insert(p);
  return std::vector<int32_t>(pos.begin(), pos.end());
}

// The knobs an engine uses: llama.cpp all of them; the exact engine only the thread count (it
// computes in FP64 without llama.cpp's kernels); a server only the load (its own flags decide the
// rest). Anything else set is refused, so a manifest never lists a setting that did nothing; then
// the values and combinations themselves (Knobs::Validate).
Status CheckKnobs(EngineKind engine, const Knobs& knobs) {
  if (engine == EngineKind::kLlama) return knobs.Validate();
  if (knobs.replay == Replay::kServed && engine == EngineKind::kExact)
    return Status::InvalidArgument(
        "--replay served needs --engine llama or openai: the exact engine computes the whole transcript in one "
        "teacher-forced pass (docs/served.md)");
  if (knobs.replay == Replay::kServed && knobs.load > 0)
    return Status::InvalidArgument(OptionName("replay") + " served with " + OptionName("load") +
                                   ": the fillers are planned for one prefill request");
  const std::set<std::string> used = engine == EngineKind::kExact
                                         ? std::set<std::string>{"threads", "device"}
                                         : std::set<std::string>{"load", "load_seed", "replay"};
  static const Knobs defaults;
  std::vector<std::string> ignored;
  for (const auto& k : KnobTable()) {
    if (used.count(k.key) || k.get(knobs) == k.get(defaults)) continue;
    ignored.push_back(k.ShownFlag() + " " + KnobText(k.get(knobs)));
  }
  if (ignored.empty()) return knobs.Validate();
  return Status::InvalidArgument(fmt::format(
      "--engine {} does not use {} ({}); {}", NameOf(engine), ignored.size() == 1 ? "this knob" : "these knobs",
      fmt::join(ignored, ", "),
      engine == EngineKind::kExact
          ? "the exact engine computes in FP64 without llama.cpp's kernels and takes only -t and -dev"
          : "a server's numerics are its own launch flags (--server-note records them); only --load applies"));
}

namespace {
// The exact engine's knobs in a request: its threads, and its device only when one is named, so
// that a CPU capture keeps the identity it had before devices existed.
KnobValues ExactKnobs(const Knobs& k) {
  KnobValues v = {{"threads", int64_t(k.n_threads)}};
  if (!k.devices.empty() && k.devices != "none") v["device"] = k.devices;
  return v;
}
}  // namespace

ManifestRequest CaptureRequestOf(const CaptureRequest& req, const std::string& model_sha256,
                                 const std::string& workload_sha256) {
  ManifestRequest r;
  r.model_sha256 = model_sha256;
  r.workload_sha256 = workload_sha256;
  r.workload = req.workload;
  r.knobs = req.engine == EngineKind::kExact ? ExactKnobs(req.knobs) : req.knobs.Values();
  // Every capture before the replay knob was a prefill: a prefill request keeps that identity, so
  // the captures of an earlier run are still reused.
  if (req.knobs.replay == Replay::kPrefill) r.knobs.erase("replay");
  r.stride = req.plan.stride;
  r.full = req.plan.full;
  r.store = req.store;
  r.tool_version = FlipscopeVersion();
  r.engine = req.engine;
  // ggml's variables (e.g. GGML_CUDA_DISABLE_FUSION) change its kernels: a capture made under
  // others is not reused. Absent when none is set, so earlier captures keep their identity.
  if (req.engine == EngineKind::kLlama) r.env = NumericsEnvironment();
  r.load_text = req.load_text;
  if (req.engine == EngineKind::kOpenai) {
    HttpOptions h = req.http;
    // A launched server's port may be chosen afresh by every run: its command identifies it instead.
    if (!h.launch.is_null()) h.url = "http://launched";
    r.http = ManifestRequest::Http{h.ToFlags(), h.server_note, OpaqueJson(h.launch)};
  }
  return r;
}

Result<std::vector<uint8_t>> ServedWritten(const Workload& w, const std::string& workload_path) {
  const bool chat =
      std::any_of(w.spans.begin(), w.spans.end(), [](const Span& s) { return s.kind == SpanKind::kMessage; });
  if (!chat)
    return Status::InvalidArgument(fmt::format(
        "{}: replay served needs a chat workload: a {} workload has no roles, so no assistant turns to serve",
        workload_path, w.format == WorkloadFormat::kTokens ? "token-id" : "plain-text"));
  std::vector<uint8_t> written(w.tokens.size());
  for (size_t p = 0; p < written.size(); ++p) written[p] = ModelWrites(w.spans, int32_t(p)) ? 1 : 0;
  return written;
}

}  // namespace flipscope
