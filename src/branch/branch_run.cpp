// The branch stage: two captures -> their engines re-created from the manifests -> a future per
// side at every branch point -> judged records and counts.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "branch/internal.h"
#include "capture/capture.h"
#include "util/util.h"

namespace flipscope {
namespace {

using branch::Point;
using branch::Transcript;
using json = nlohmann::json;

Status ValidateOptions(const BranchOptions& o) {
  if (o.at == BranchAt::kRanges && o.ranges.empty())
    return Status::Error(OptionName("at") + " ranges needs " + OptionName("ranges") + " A-B,... or tool_calls");
  if (o.max_tokens < 1) return Status::Error(OptionName("max_tokens") + " must be >= 1");
  if (o.max_call_tokens < 0) return Status::Error(OptionName("max_call_tokens") + " must be >= 0");
  if (o.max_branches < 0) return Status::Error(OptionName("max_branches") + " must be >= 0");
  if (o.reconverge < 1) return Status::Error(OptionName("reconverge") + " must be >= 1");
  return Status::Ok();
}

// One capture and the configuration that re-creates it.
struct Side {
  const char* name = "";
  std::unique_ptr<CaptureReader> cap;
  std::string model_path, model_sha256;
  Knobs knobs;
  std::string served_flags;  // non-empty: captured from a server (its futures come with the request)
  std::vector<int32_t> firsts;
  SidePass pass;
};

// Opens a capture and checks its model file is the one it was captured with.
Status OpenSide(const std::string& path, std::map<std::string, std::string>* hashes, Side* s) {
  FS_ASSIGN_OR_RETURN(s->cap, CaptureReader::Open(path));
  const EngineRecord& engine = s->cap->manifest().engine;
  if (FromName<EngineKind>(engine.name) == EngineKind::kOpenai) {
    // A server's capture: its futures are decoded over HTTP while its server runs (flipscope run).
    s->served_flags = engine.flags.empty() ? std::string("--engine openai") : engine.flags;
    FS_ASSIGN_OR_RETURN(CaptureReplay model, ModelOf(*s->cap, hashes));
    s->model_path = model.model_path;
    s->model_sha256 = model.model_sha256;
    return Status::Ok();
  }
  FS_ASSIGN_OR_RETURN(CaptureReplay replay, ReplayOf(*s->cap, "branch", hashes));
  s->model_path = replay.model_path;
  s->model_sha256 = replay.model_sha256;
  s->knobs = replay.knobs;
  return Status::Ok();
}

}  // namespace

namespace {

// The branch points: probes of both captures where the stored argmax differ (flips), or every
// probe of both inside the ranges, each where fork_where allows; *available counts them before
// --max-branches, *elsewhere gets the others (teacher-forced only: the model reads them).
Result<std::vector<Point>> PlanPoints(const Side& b, const Side& c, const BranchOptions& o, const Transcript& t,
                                      int64_t* available, std::vector<int32_t>* elsewhere,
                                      std::vector<std::string>* warnings) {
  std::vector<bool> in_range;
  if (o.at == BranchAt::kRanges) {
    // The same rule as capture's full rows (SelectPositions): a spec means the same positions in both.
    FS_ASSIGN_OR_RETURN(auto selected, SelectPositions(o.ranges, int32_t(t.tokens.size()) - 2, t.spans, "ranges"));
    in_range.assign(t.tokens.size(), false);
    for (int32_t p : selected) in_range[size_t(p)] = true;
  }
  // Where the model writes, by the transcript's spans (the manifest's, or those the request gave).
  const ForkFilter where = ForkWhere(t.spans, o.fork_where);
  auto pb = b.cap->positions(), pc = c.cap->positions();
  auto ab = b.cap->argmax(), ac = c.cap->argmax();
  std::vector<Point> points;
  if (o.at == BranchAt::kFlips) {
    // The first-N rule of every fork follower (the experiment's forks take the same points).
    FirstFlips rule(o.max_branches, where, o.pick, int64_t(b.cap->tokens().size()));
    for (const Flip& f : Flips(pb, ab, pc, ac)) {
      if (rule.Take(f.position, f.base_token, f.cand_token))
        points.push_back({f.position, f.base_token, f.cand_token});
      else if (where && !where(f.position))
        elsewhere->push_back(f.position);
    }
    *available = rule.forkable();
    return points;
  }
  int64_t probed_in_range = 0;
  const ProbePairs pairs = PairProbes(pb, pc);
  for (size_t k = 0; k < pairs.base.size(); ++k) {
    const size_t i = size_t(pairs.base[k]), j = size_t(pairs.cand[k]);
    if (!in_range[size_t(pb[i])]) continue;
    ++probed_in_range;
    if (where && !where(pb[i]))
      elsewhere->push_back(pb[i]);
    else
      points.push_back({pb[i], ab[i], ac[j]});
  }
  int64_t wanted = std::count(in_range.begin(), in_range.end(), true);
  if (wanted > probed_in_range)
    warnings->push_back(
        fmt::format("{} of the {} positions in --ranges {} are not probed by both captures and are "
                    "skipped (capture them with --full)",
                    wanted - probed_in_range, wanted, o.ranges));
  *available = int64_t(points.size());
  if (o.max_branches > 0 && points.size() > size_t(o.max_branches)) points.resize(size_t(o.max_branches));
  return points;
}

// The tool definitions (for function names and required arguments) and the tool-call markers.
void ResolveTools(const CaptureReader& cap, const ManifestWorkload& w, const std::string& model_path, Transcript* t,
                  std::vector<std::string>* warnings) {
  const CaptureManifest& m = cap.manifest();
  if (!w.tools.is_null()) {
    auto tools = ParseToolSpecs(w.tools);
    if (tools.ok())
      t->tools = *tools;
    else
      warnings->push_back(cap.path() + ": workload tools: " + tools.status().message() +
                          "; function names are not checked");
  } else if (!w.path.empty()) {
    // Older manifests: read the tool definitions from the workload file itself.
    auto loaded = LoadWorkload(w.path, model_path, m.workload_options);
    auto tools = loaded.ok() ? ParseToolSpecs(loaded->tools) : Result<std::vector<ToolSpec>>(loaded.status());
    if (tools.ok() && loaded->tokens == t->tokens)
      t->tools = *tools;
    else
      warnings->push_back("the workload's tool definitions are unavailable (" +
                          (tools.ok() ? std::string("the workload file no longer gives the captured tokens")
                                      : tools.status().message()) +
                          "); function names are not checked");
  }
  // The envelope: the <tool_call> convention, or the template's own markers around the JSON.
  // (null for workloads without tool calls, such as plain text)
  if (w.tool_call_form != "template") return;
  for (const Span& sp : t->spans) {
    if (sp.kind != SpanKind::kToolCall) continue;
    std::string text =
        t->text.substr(t->offsets[size_t(sp.begin)], t->offsets[size_t(sp.end)] - t->offsets[size_t(sp.begin)]);
    size_t lb = text.find('{'), rb = text.rfind('}');
    auto trim = [](std::string x) {
      x.erase(0, x.find_first_not_of(" \t\r\n"));
      x.erase(x.find_last_not_of(" \t\r\n") + 1);
      return x;
    };
    std::string open = lb == std::string::npos ? "" : trim(text.substr(0, lb));
    std::string close = rb == std::string::npos ? "" : trim(text.substr(rb + 1));
    if (open.empty() || close.empty()) {
      warnings->push_back(
          "the chat template's tool calls have no markers around their JSON; tool calls are not checked");
      t->envelope = {"", ""};
    } else {
      t->envelope = {open, close};
    }
    return;
  }
}

ForkSideInfo SideInfo(const Side& s) {
  const bool served = !s.served_flags.empty();
  ForkSideInfo out;
  out.capture = s.cap->path(), out.model = s.model_path, out.model_sha256 = s.model_sha256;
  out.knobs = served ? json(nullptr) : s.knobs.ToJson();
  out.flags = served ? s.served_flags : s.knobs.ToFlags();
  out.engine = served ? "openai" : "llama";
  out.forked = s.pass.forked, out.seconds = s.pass.seconds;
  out.rows_checked = s.pass.rows_checked, out.rows_reproduced = s.pass.rows_reproduced;
  out.branches_reproduced = std::count(s.pass.reproduced.begin(), s.pass.reproduced.end(), true);
  if (!s.pass.decoded_during.empty()) out.decoded_during_capture = s.pass.decoded_during;
  return out;
}

std::vector<int32_t> PointPositions(const std::vector<Point>& points) {
  std::vector<int32_t> out;
  for (const Point& p : points) out.push_back(p.position);
  return out;
}

}  // namespace

namespace branch {

Status ReadTranscript(const CaptureReader& cap, const std::string& model_path, Transcript* t,
                      std::vector<std::string>* warnings, const ManifestWorkload* given) {
  auto tok = cap.tokens();
  t->tokens.assign(tok.begin(), tok.end());
  const ManifestWorkload& w = given ? *given : cap.manifest().workload;
  if (!w.spans_status.ok()) return w.spans_status.Prefixed(cap.path() + ": manifest spans");
  t->spans = w.spans;
  // The vocabulary's texts, read without the weights (a side may have no engine of its own).
  FS_ASSIGN_OR_RETURN(auto text_of, LoadDetokenizer(model_path));
  t->vocab.clear();
  for (int32_t id = 0; id < VocabSize(cap); ++id) t->vocab.push_back(text_of(id));
  t->Index();
  ResolveTools(cap, w, model_path, t, warnings);
  return Status::Ok();
}

}  // namespace branch

namespace {

// Both captures, each with its model file checked, fed the same transcript.
Status OpenSides(const BranchRequest& req, std::map<std::string, std::string>* hashes, Side (&sides)[2]) {
  sides[0].name = "base";
  sides[1].name = "cand";
  FS_RETURN_IF_ERROR(OpenSide(req.base_path, hashes, &sides[0]));
  FS_RETURN_IF_ERROR(OpenSide(req.cand_path, hashes, &sides[1]));
  return CheckSameWorkload(*sides[0].cap, *sides[1].cap);
}

// A side's own pass on a fresh engine of its configuration (two sequences: the transcript and
// the fork), since no capture decoded its futures already.
Status FreshPass(const Transcript& t, const std::vector<Point>& points, const branch::CallBudget& budget,
                 const BranchOptions& o, const ForkDecoding& decoding, Side* s, std::vector<std::string>* warnings) {
  auto engine = LlamaEngine::Create(s->model_path, s->knobs, 2);
  if (!engine.ok()) return engine.status().Prefixed(s->cap->path());
  if (s->knobs.replay == Replay::kServed) {
    // The capture's own schedule: what the model wrote is fed one token per decode step again,
    // so the rows are checked against the served ones and the forks start from the served cache.
    if (!(*engine)->CanFork())
      return Status::Error(s->cap->path() +
                           ": a served-replay capture of a model whose memory cannot be forked "
                           "cannot be followed: each branch would re-prefill its prefix, which is not served");
    std::vector<uint8_t> written(t.tokens.size());
    for (size_t p = 0; p < written.size(); ++p) written[p] = ModelWrites(t.spans, int32_t(p)) ? 1 : 0;
    (*engine)->SetWritten(std::move(written));
  }
  if (!(*engine)->CanFork() && o.allow_fork)
    warnings->push_back(s->model_path +
                        ": the model's memory (recurrent or hybrid) cannot be forked; every branch "
                        "re-prefills its prefix instead (slower, same futures)");
  SideInputs in;
  in.tokens = t.tokens;
  in.probes = s->cap->positions();
  in.probe_digests = s->cap->digest();
  in.points = PointPositions(points);
  in.firsts = s->firsts;
  in.max_tokens = o.max_tokens;
  in.extend = [&budget](int32_t position, std::span<const int32_t> future) { return budget.Extend(position, future); };
  in.allow_fork = o.allow_fork;
  in.grammar = decoding.grammar;
  if (o.log.bars) in.progress_label = std::string("branch ") + s->name;
  auto pass = RunSide(**engine, in);
  if (!pass.ok()) return pass.status().Prefixed(s->cap->path());
  s->pass = std::move(*pass);
  return Status::Ok();
}

// A side's futures: those decoded during a capture when they cover every point, else its own
// pass (which a server's capture cannot have here: its server is not running; nor, with decoded_only,
// a capture of another llama.cpp version).
Status PassSide(const std::optional<DecodedFutures>& decoded, bool decoded_only, const Transcript& t,
                const std::vector<Point>& points, const branch::CallBudget& budget, const BranchOptions& o,
                const ForkDecoding& decoding, Side* s, std::vector<std::string>* warnings) {
  if (!decoded && decoded_only) return Status::Error(s->cap->path() + ": no futures decoded by its own version");
  if (decoded) {
    // A server's futures are its completions, whatever this run would decode with.
    const FutureDecoding used = s->served_flags.empty() ? decoding.used : decoded->decoding;
    auto known = SideFromDecoded(*decoded, PointPositions(points), s->firsts, o.max_tokens, o.max_call_tokens, used);
    if (known) {
      s->pass = std::move(*known);
      return Status::Ok();
    }
    if (decoded_only)
      return Status::Error(
          fmt::format("{}: the futures decoded by its own version ({}) do not cover every branch point", s->cap->path(),
                      decoded->source));
    if (s->served_flags.empty())
      warnings->push_back(
          fmt::format("{}: the futures decoded during {} do not cover every branch point; its pass "
                      "is run again",
                      s->cap->path(), decoded->source));
  }
  if (!s->served_flags.empty())
    return Status::Error(s->cap->path() +
                         ": captured from a server, whose futures are decoded over HTTP while it "
                         "runs: follow its forks with flipscope run and [branch] (docs/experiment.md)");
  return FreshPass(t, points, budget, o, decoding, s, warnings);
}

// The output's config (docs/branch.md): both sides, the options, what was found and warned.
BranchRunInfo RunInfo(const Side (&sides)[2], const BranchOptions& o, const ForkDecodingInfo& decoding,
                      const Transcript& t, int64_t available, const std::vector<int32_t>& elsewhere, size_t n_branches,
                      std::vector<std::string> warnings, double seconds) {
  BranchRunInfo c;
  c.base = SideInfo(sides[0]), c.cand = SideInfo(sides[1]);
  c.at = std::string(NameOf(o.at)), c.ranges = o.ranges, c.max_tokens = o.max_tokens,
  c.max_call_tokens = o.max_call_tokens;
  c.max_branches = o.max_branches, c.pick = std::string(NameOf(o.pick)), c.reconverge = o.reconverge;
  c.fork_where = std::string(NameOf(o.fork_where)), c.decoding = decoding;
  c.n_tokens = int64_t(t.tokens.size()), c.branch_points = available, c.n_branches = int64_t(n_branches);
  auto& teacher_forced = c.teacher_forced_only.emplace();
  for (int32_t p : elsewhere) {
    std::string span = SpanLabelAt(t.spans, p + 1);
    teacher_forced.push_back({p, span.empty() ? std::nullopt : std::optional<std::string>(std::move(span))});
  }
  c.envelope = {{t.envelope.open, t.envelope.close}};
  if (!t.tools.empty()) {
    auto& names = c.tools.emplace();
    for (const ToolSpec& ts : t.tools) names.push_back(ts.name);
  }
  c.warnings = std::move(warnings), c.seconds = seconds;
  return c;
}

}  // namespace

Result<BranchResult> RunBranches(const BranchRequest& req) {
  const double t0 = NowSeconds();
  const BranchOptions& o = req.options;
  FS_RETURN_IF_ERROR(ValidateOptions(o));
  std::map<std::string, std::string> own_hashes;  // model path -> sha256, so a shared model is hashed once
  Side sides[2];
  FS_RETURN_IF_ERROR(OpenSides(req, req.model_hashes ? req.model_hashes : &own_hashes, sides));

  // A server's capture decodes nothing here; its futures say how the server decoded them.
  const bool served = !sides[0].served_flags.empty() || !sides[1].served_flags.empty();
  FS_ASSIGN_OR_RETURN(ForkDecoding decoding,
                      ResolveDecoding(sides[0].cap->path(), served ? DecodingMode::kFree : o.decoding));
  if (served) decoding.info = ServedDecodingInfo();
  std::vector<std::string> warnings;
  Transcript t;
  FS_RETURN_IF_ERROR(branch::ReadTranscript(*sides[0].cap, sides[0].model_path, &t, &warnings,
                                            req.transcript ? &*req.transcript : nullptr));
  const branch::CallBudget budget(t, o.max_tokens, o.max_call_tokens, decoding.used == FutureDecoding::kGrammar);
  int64_t available = 0;
  std::vector<int32_t> elsewhere;
  FS_ASSIGN_OR_RETURN(std::vector<Point> points,
                      PlanPoints(sides[0], sides[1], o, t, &available, &elsewhere, &warnings));
  for (const Point& p : points) {
    sides[0].firsts.push_back(p.base_token);
    sides[1].firsts.push_back(p.cand_token);
  }
  for (int si = 0; si < 2 && !points.empty(); ++si)  // no points: nothing to decode
    FS_RETURN_IF_ERROR(
        PassSide(req.decoded[si], req.decoded_only, t, points, budget, o, decoding, &sides[si], &warnings));

  BranchResult out;
  if (!points.empty()) out.records = branch::BuildRecords(t, points, sides[0].pass, sides[1].pass, o, budget);
  out.config =
      RunInfo(sides, o, decoding.info, t, available, elsewhere, points.size(), std::move(warnings), NowSeconds() - t0);
  out.counts = CountVerdicts(out.records);
  out.counts.branch_points = available;                        // before --max-branches
  out.counts.teacher_forced_only = int64_t(elsewhere.size());  // never forked, never damage or repair
  return out;
}

}  // namespace flipscope
