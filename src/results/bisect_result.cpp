// bisect.json to JSON and back (bisect_result.h).
#include "results/bisect_result.h"

#include "util/read.h"

namespace flipscope {

using nlohmann::json;

namespace {

constexpr std::initializer_list<const char*> kHeaderKeys = {
    "llama_src",       "good",          "bad",        "criterion", "model", "model_sha256", "workload",
    "workload_sha256", "tokens_sha256", "max_tokens", "n_tokens",  "flags", "cpu",          "probe_plan"};

BisectHeader HeaderFromJson(const json& j) {
  BisectHeader h;
  h.extra = read::Without(j, kHeaderKeys);
  h.llama_src = read::Str(j, "llama_src"), h.good = read::Str(j, "good"), h.bad = read::Str(j, "bad");
  h.criterion = read::Str(j, "criterion"), h.model = read::Str(j, "model");
  h.model_sha256 = read::Str(j, "model_sha256"), h.workload = read::Str(j, "workload");
  h.workload_sha256 = read::Str(j, "workload_sha256"), h.tokens_sha256 = read::Str(j, "tokens_sha256");
  h.max_tokens = read::Get<int64_t>(j, "max_tokens", 0), h.n_tokens = read::Get<int64_t>(j, "n_tokens", 0);
  h.flags = read::Str(j, "flags"), h.cpu = read::Str(j, "cpu");
  const json& p = read::Sub(j, "probe_plan");
  h.probe_plan = {read::Get<int64_t>(p, "stride", 0), read::Str(p, "full")};
  return h;
}

// A comparison as bisect.json keeps it: without its kind, names and windows.
json FiguresJson(const HistoryComparison& c) {
  json j = ToJson(c);
  for (const char* key : {"kind", "base", "cand", "windows"}) j.erase(key);
  return j;
}

constexpr std::initializer_list<const char*> kStepKeys = {
    "index",           "commit",    "subject", "capture",    "reused", "build_seconds", "llama_build_seconds",
    "capture_seconds", "build_log", "error",   "comparison", "mark"};

json StepToJson(const BisectStep& s) {
  json j = s.extra;
  read::PutIf(j, "index", s.index);
  j["commit"] = s.commit;
  read::PutIf(j, "subject", s.subject);
  j["capture"] = s.capture;
  read::PutIf(j, "reused", s.reused), read::PutIf(j, "build_seconds", s.build_seconds);
  read::PutIf(j, "llama_build_seconds", s.llama_build_seconds), read::PutIf(j, "capture_seconds", s.capture_seconds);
  read::PutIf(j, "build_log", s.build_log), read::PutIf(j, "error", s.error);
  if (s.comparison) j["comparison"] = FiguresJson(*s.comparison);
  read::PutIf(j, "mark", s.mark);
  return j;
}

BisectStep StepFromJson(const json& j) {
  BisectStep s;
  s.extra = read::Without(j, kStepKeys);
  s.index = read::Opt<int64_t>(j, "index"), s.commit = read::Str(j, "commit");
  s.subject = read::Opt<std::string>(j, "subject"), s.capture = read::Str(j, "capture");
  s.reused = read::Opt<bool>(j, "reused"), s.build_seconds = read::Opt<double>(j, "build_seconds");
  s.llama_build_seconds = read::Opt<double>(j, "llama_build_seconds");
  s.capture_seconds = read::Opt<double>(j, "capture_seconds");
  s.build_log = read::Opt<std::string>(j, "build_log"), s.error = read::Opt<std::string>(j, "error");
  if (const json& c = read::Sub(j, "comparison"); c.is_object()) s.comparison = HistoryComparisonFromJson(c);
  s.mark = read::Opt<std::string>(j, "mark");
  return s;
}

json OutcomeToJson(const BisectOutcome& o) {
  json j = {{"candidates", read::ArrayOf(o.candidates,
                                         [](const BisectCandidate& c) {
                                           return json{{"commit", c.commit}, {"subject", c.subject}, {"mark", c.mark}};
                                         })},
            {"steps", o.steps},
            {"builds", o.builds},
            {"step_seconds", o.step_seconds}};
  if (const auto& f = o.first_bad) {
    j["first_bad"] = {{"commit", f->commit}, {"subject", f->subject}, {"files", f->files}, {"stat", f->stat}};
    if (f->comparison) j["first_bad"]["comparison"] = FiguresJson(*f->comparison);
  }
  return j;
}

BisectOutcome OutcomeFromJson(const json& j) {
  BisectOutcome o;
  o.candidates = read::Each<BisectCandidate>(read::Sub(j, "candidates"), [](const json& c) {
    return BisectCandidate{read::Str(c, "commit"), read::Str(c, "subject"), read::Str(c, "mark")};
  });
  if (const json& f = read::Sub(j, "first_bad"); f.is_object()) {
    BisectFirstBad b{read::Str(f, "commit"), read::Str(f, "subject"), read::Values<std::string>(f, "files"),
                     read::Str(f, "stat"), std::nullopt};
    if (const json& c = read::Sub(f, "comparison"); c.is_object()) b.comparison = HistoryComparisonFromJson(c);
    o.first_bad = std::move(b);
  }
  o.steps = read::Get<int64_t>(j, "steps", 0), o.builds = read::Get<int64_t>(j, "builds", 0);
  o.step_seconds = read::Get<double>(j, "step_seconds", 0);
  return o;
}

}  // namespace

json ToJson(const BisectHeader& h) {
  json j = h.extra;
  j.update({{"llama_src", h.llama_src},
            {"good", h.good},
            {"bad", h.bad},
            {"criterion", h.criterion},
            {"model", h.model},
            {"model_sha256", h.model_sha256},
            {"workload", h.workload},
            {"workload_sha256", h.workload_sha256},
            {"max_tokens", h.max_tokens},
            {"n_tokens", h.n_tokens},
            {"tokens_sha256", h.tokens_sha256},
            {"flags", h.flags},
            {"probe_plan", {{"stride", h.probe_plan.stride}, {"full", h.probe_plan.full}}},
            {"cpu", h.cpu}});
  return j;
}

const BisectStep* BisectResult::StepOf(const std::string& commit) const {
  for (const BisectStep& s : steps)
    if (s.commit == commit) return &s;
  return nullptr;
}

json BisectResult::ToJson() const {
  json j = extra;
  j["header"] = flipscope::ToJson(header);
  j["commits"] = read::ArrayOf(commits, [](const Commit& c) {
    return json{{"commit", c.commit}, {"subject", c.subject}};
  });
  if (good_capture) j["good_capture"] = StepToJson(*good_capture);
  j["steps"] = read::ArrayOf(steps, StepToJson);
  if (result) j["result"] = OutcomeToJson(*result);
  return j;
}

BisectResult BisectResult::FromJson(const json& j) {
  BisectResult b;
  b.extra = read::Without(j, {"header", "commits", "good_capture", "steps", "result"});
  b.header = HeaderFromJson(read::Sub(j, "header"));
  b.commits = read::Each<Commit>(read::Sub(j, "commits"), [](const json& c) {
    return Commit{read::Str(c, "commit"), read::Str(c, "subject")};
  });
  if (const json& g = read::Sub(j, "good_capture"); g.is_object()) b.good_capture = StepFromJson(g);
  b.steps = read::Each<BisectStep>(read::Sub(j, "steps"), StepFromJson);
  if (const json& r = read::Sub(j, "result"); r.is_object()) b.result = OutcomeFromJson(r);
  return b;
}

}  // namespace flipscope
