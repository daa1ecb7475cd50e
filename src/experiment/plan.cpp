// A run planned before it computes (`flipscope run --dry-run`): per configuration the captures
// still to make, the served decode steps, the forks, and a time estimate from the timings that
// captures already made recorded (never a guessed rate).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "capture/capture.h"
#include "experiment/experiment.h"
#include "experiment/steps.h"
#include "results/results.h"
#include "util/util.h"
#include "workload/workload.h"

namespace flipscope {

namespace fs = std::filesystem;

std::string ConfigLine(const ConfigSpec& c, const ConfigSpec& baseline, const std::string& server_flags) {
  std::string line = fmt::format("{} [{}]", c.name, c.knobs.replay == Replay::kServed ? "served replay" : "prefill");
  if (c.engine == EngineKind::kExact)
    return line + fmt::format(" --engine exact -t {}", c.knobs.n_threads) +
           (c.knobs.devices.empty() ? "" : " -dev " + c.knobs.devices);
  if (c.engine == EngineKind::kOpenai) return line + " server " + server_flags;
  if (c.name == baseline.name) {
    const std::string flags = c.knobs.ToFlags();
    return line + (flags.empty() ? "" : " " + flags) + " (the baseline)";
  }
  std::string changes = c.knobs.FlagsChangedFrom(baseline.knobs);
  auto add = [&](const std::string& part) { changes += (changes.empty() ? "" : " ") + part; };
  if (!c.requantize.empty())
    add("weights requantized to " + c.requantize);
  else if (c.model_path != baseline.model_path)
    add("model " + fs::path(c.model_path).filename().string());
  return line + " " + (changes.empty() ? "(same knobs as baseline)" : changes);
}

namespace {

// What a capture already made recorded about its own speed (its manifest's timings).
struct RecordedTiming {
  std::string path, config;  // config: NAME of NAME-rR.safetensors
  std::string engine, replay;
  int64_t tokens = 0;
  double rows_s = 0;  // the rows' seconds, served decode steps included, forks excluded
  int64_t forks = 0;
  double fork_s = 0;
};

std::vector<RecordedTiming> RecordedTimings(const std::string& outdir) {
  std::vector<RecordedTiming> out;
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fs::path(outdir) / "captures", ec))
    if (e.path().extension() == ".safetensors") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    auto r = CaptureReader::Open(f.string());
    if (!r.ok()) continue;
    const CaptureManifest& m = (*r)->manifest();
    RecordedTiming t;
    t.path = f.string();
    const std::string stem = f.stem().string();
    t.config = stem.substr(0, stem.rfind("-r"));
    t.engine = m.engine.name, t.replay = NameOf(m.replay), t.tokens = m.NTokens();
    if (m.timings) t.rows_s = m.timings->prefill_s, t.forks = m.timings->forks, t.fork_s = m.timings->fork_decode_s;
    if (t.tokens > 0 && t.rows_s > 0) out.push_back(std::move(t));
  }
  return out;
}

// The timing a configuration's captures are estimated from: its own capture, else the
// baseline's, else any capture of the same engine and replay; nullptr when there is none.
const RecordedTiming* RateFor(const std::vector<RecordedTiming>& all, const ConfigSpec& c,
                              const std::string& baseline) {
  const std::string engine(NameOf(c.engine)), replay(ToString(c.knobs.replay));
  const RecordedTiming* best = nullptr;
  int best_rank = 3;
  for (const RecordedTiming& t : all) {
    if (t.engine != engine || t.replay != replay) continue;
    const int rank = t.config == c.name ? 0 : t.config == baseline ? 1 : 2;
    if (rank < best_rank) best = &t, best_rank = rank;
  }
  return best;
}

// Seconds per fork decoded while capturing, over every capture that forked; none without one.
std::optional<double> ForkSeconds(const std::vector<RecordedTiming>& all) {
  int64_t forks = 0;
  double secs = 0;
  for (const RecordedTiming& t : all) forks += t.forks, secs += t.fork_s;
  if (forks == 0) return std::nullopt;
  return secs / double(forks);
}

struct Planner {
  const Experiment& exp;
  const std::string& outdir;
  std::vector<RecordedTiming> timings;
  std::optional<double> fork_s;
  std::map<std::string, std::string> shas;

  Result<std::string> Sha(const std::string& path) {
    if (auto it = shas.find(path); it != shas.end()) return it->second;
    FS_ASSIGN_OR_RETURN(std::string h, Sha256File(path));
    shas[path] = h;
    return h;
  }

  // Whether repeat r of c is on disk for an equal request (the run would reuse it).
  Result<bool> Cached(const ConfigSpec& c, int r) {
    const std::string model = ConfigModelPath(c, outdir), path = CaptureFilePath(outdir, c, r);
    if (!fs::exists(path) || !fs::exists(model)) return false;
    std::optional<ServerSession> server;
    if (c.engine == EngineKind::kOpenai) server.emplace(c, "", Log::Quiet());
    const CaptureRequest req = ConfigRequest(exp, c, r, model, outdir, server ? &server->Asked() : nullptr);
    FS_ASSIGN_OR_RETURN(std::string model_sha, Sha(model));
    FS_ASSIGN_OR_RETURN(std::string workload_sha, Sha(exp.workload));
    auto reader = CaptureReader::Open(path);
    return reader.ok() && (*reader)->manifest().request == CaptureRequestOf(req, model_sha, workload_sha);
  }

  // The forks c's captures follow at most: a branched variant's first repeat at its flips, the
  // baseline's second (or a server baseline's first) at every branched variant's.
  std::optional<int> Forks(const ConfigSpec& c) const {
    if (!exp.branch.enabled || c.engine == EngineKind::kExact) return std::nullopt;
    const int per = exp.branch.options.max_branches;
    if (&c != &exp.baseline) {
      if (!Branched(exp, c.name) || fs::exists(CaptureFilePath(outdir, c, 0))) return std::nullopt;
      return per;
    }
    int variants = 0;
    for (const ConfigSpec& v : exp.variants)
      variants += Branched(exp, v.name) && (v.engine != EngineKind::kLlama || v.knobs.Validate().ok());
    const int repeat = c.repeats > 1 ? 1 : 0;
    if (variants == 0 || fs::exists(CaptureFilePath(outdir, c, repeat))) return std::nullopt;
    return per * variants;
  }

  Result<ConfigPlan> Plan(const ConfigSpec& c, const ConfigSpec& baseline, int64_t n_tokens, int64_t steps) {
    ConfigPlan p;
    std::optional<ServerSession> server;
    if (c.engine == EngineKind::kOpenai) server.emplace(c, "", Log::Quiet());
    p.line = ConfigLine(c, baseline, server ? server->Asked().ToFlags() : "");
    p.repeats = c.repeats;
    if (Status v = c.knobs.Validate(); c.engine == EngineKind::kLlama && !v.ok()) {
      p.refused = v.message();  // as the run records it, and goes on
      return p;
    }
    for (int r = 0; r < c.repeats; ++r) {
      FS_ASSIGN_OR_RETURN(bool cached, Cached(c, r));
      p.cached += cached;
    }
    if (c.knobs.replay == Replay::kServed) p.decode_steps = steps;
    p.forks = Forks(c);
    p.fork_tokens = exp.branch.options.max_tokens;
    if (p.ToMake() == 0) {
      p.seconds = 0, p.basis = "every capture is cached";
      return p;
    }
    const RecordedTiming* t = RateFor(timings, c, baseline.name);
    if (!t) {
      p.basis = c.knobs.replay == Replay::kServed ? "unknown until the first served capture"
                                                  : "unknown until the first capture";
      return p;
    }
    const double per_capture = t->rows_s * double(n_tokens) / double(t->tokens);
    p.seconds = per_capture * p.ToMake();
    p.basis = fmt::format("{} tok at {} tok/s, recorded by {}", n_tokens, RateText(double(t->tokens) / t->rows_s),
                          fs::path(t->path).filename().string());
    // Forks at the recorded seconds per fork; "every flip" (max_branches 0) cannot be counted.
    if (p.forks && *p.forks > 0) {
      if (fork_s) {
        *p.seconds += *fork_s * *p.forks;
        p.basis += fmt::format(", forks at {:.1f} s each", *fork_s);
      } else {
        p.basis += ", forks unknown until the first capture that forks";
      }
    }
    return p;
  }
};

}  // namespace

Result<RunPlan> PlanRun(const Experiment& exp, const std::string& outdir) {
  RunPlan plan;
  plan.experiment = exp.path, plan.outdir = outdir;
  if (exp.history.enabled && exp.history.configs.empty()) {
    const size_t n = exp.history.releases.size() + exp.history.commits.size();
    plan.notes.push_back(fmt::format(
        "[history]: {} versions, each its capture worker built (once, about 10 minutes on 2 cores) and run; "
        "not estimated",
        n));
    return plan;
  }
  FS_ASSIGN_OR_RETURN(Workload w, LoadWorkload(exp.workload, exp.model, exp.workload_options));
  plan.n_tokens = int64_t(w.tokens.size());
  std::vector<ServedSkip> skipped;
  const Experiment served = ServedTwin(exp, &skipped);
  const bool any_served = exp.replay_both || exp.baseline.knobs.replay == Replay::kServed ||
                          std::any_of(exp.variants.begin(), exp.variants.end(),
                                      [](const ConfigSpec& v) { return v.knobs.replay == Replay::kServed; });
  int64_t steps = 0;
  if (any_served) {
    FS_ASSIGN_OR_RETURN(std::vector<uint8_t> written, ServedWritten(w, exp.workload));
    steps = ServedDecodeSteps(written, plan.n_tokens);
  }
  Planner planner{exp, outdir, RecordedTimings(outdir), std::nullopt, {}};
  planner.fork_s = ForkSeconds(planner.timings);
  auto plan_all = [&](const Experiment& e) -> Status {
    Planner p{e, outdir, planner.timings, planner.fork_s, std::move(planner.shas)};
    std::vector<const ConfigSpec*> all = {&e.baseline};
    for (const ConfigSpec& v : e.variants) all.push_back(&v);
    for (const ConfigSpec* c : all) {
      FS_ASSIGN_OR_RETURN(ConfigPlan cp, p.Plan(*c, e.baseline, plan.n_tokens, steps));
      plan.configs.push_back(std::move(cp));
    }
    planner.shas = std::move(p.shas);
    return Status::Ok();
  };
  FS_RETURN_IF_ERROR(plan_all(exp));
  if (exp.reference_exact) {
    ConfigSpec ref;  // as CaptureAll's reference
    ref.name = "exact", ref.model_path = exp.model, ref.engine = EngineKind::kExact;
    ref.knobs.n_threads = exp.baseline.knobs.n_threads;
    ref.knobs.devices = exp.reference_device;
    FS_ASSIGN_OR_RETURN(ConfigPlan cp, planner.Plan(ref, exp.baseline, plan.n_tokens, steps));
    plan.configs.push_back(std::move(cp));
  }
  if (exp.replay_both) {
    FS_RETURN_IF_ERROR(plan_all(served));
    for (const ServedSkip& s : skipped)
      plan.notes.push_back(fmt::format("{} has no served twin: {}", s.config, s.reason));
  }
  return plan;
}

namespace {
// "about 2 min 10 s" style duration.
std::string DurationText(double s) {
  if (s < 90) return fmt::format("{:.0f} s", s);
  if (s < 5400) return fmt::format("{:.0f} min {:.0f} s", std::floor(s / 60), std::fmod(s, 60));
  return fmt::format("{:.1f} h", s / 3600);
}
}  // namespace

std::string PlanText(const RunPlan& plan) {
  std::string out = fmt::format("{}: {} tokens per capture, results in {} (dry run: nothing is computed)\n",
                                plan.experiment, plan.n_tokens, plan.outdir);
  int captures = 0, unknown = 0;
  int64_t steps = 0, forks = 0;
  double seconds = 0;
  int known = 0;  // configurations with captures to make and a recorded rate
  bool every_flip = false;
  for (const ConfigPlan& c : plan.configs) {
    std::string what = fmt::format("{} of {} capture{} to make", c.ToMake(), c.repeats, c.repeats == 1 ? "" : "s");
    if (c.cached > 0) what += fmt::format(" ({} cached)", c.cached);
    if (c.decode_steps > 0)
      what += fmt::format("; {} served decode steps ({} per capture)", c.decode_steps * c.ToMake(), c.decode_steps);
    if (c.forks)
      what += *c.forks > 0 ? fmt::format("; up to {} forks of {} tokens", *c.forks, c.fork_tokens)
                           : fmt::format("; a fork at every flip, {} tokens each", c.fork_tokens);
    const std::string when = c.ToMake() == 0 ? "none, " + c.basis
                             : c.seconds     ? fmt::format("about {} ({})", DurationText(*c.seconds), c.basis)
                                             : c.basis;
    if (!c.refused.empty()) {
      out += fmt::format("  {}\n    refused, nothing to make: {}\n", c.line, c.refused);
      continue;
    }
    out += fmt::format("  {}\n    {}; time: {}\n", c.line, what, when);
    captures += c.ToMake(), steps += c.decode_steps * c.ToMake();
    if (c.forks) forks += *c.forks, every_flip = every_flip || *c.forks == 0;
    if (!c.seconds)
      ++unknown;
    else if (c.ToMake() > 0)
      seconds += *c.seconds, ++known;
  }
  for (const std::string& n : plan.notes) out += "  " + n + "\n";
  if (plan.configs.empty()) return out;
  out += fmt::format("total: {} capture{} to make, {} served decode steps", captures, captures == 1 ? "" : "s", steps);
  if (forks > 0 || every_flip)
    out += fmt::format(", {}{} forks", every_flip ? "a fork at every flip and " : "up to ", forks);
  if (unknown == 0)
    out += fmt::format("; about {} on this machine\n", DurationText(seconds));
  else if (known == 0)
    out += "; time unknown until the first capture\n";
  else
    out += fmt::format("; about {} on this machine, and {} configuration{} unknown until its first capture\n",
                       DurationText(seconds), unknown, unknown == 1 ? "" : "s");
  return out;
}

}  // namespace flipscope
