// The branch stage's JSON document (docs/branch.md): written from a BranchResult, read back tolerantly.
#include "results/branch_result.h"

#include <algorithm>

#include "util/read.h"

namespace flipscope {
namespace {
using nlohmann::json;
using read::As;
using read::Get;
using read::Opt;
using read::OrNull;
using read::PutIf;
using read::Str;
using read::Sub;
using read::Values;

json FutureJson(const ForkFuture& f) {
  json j = {{"text", f.text}, {"tokens", f.tokens}, {"probs", f.probs}, {"pieces", f.pieces}};
  if (f.decoding) j["decoding"] = *f.decoding, j["first_masked"] = f.first_masked;
  read::KeepExtra(j, f.extra);
  return j;
}
ForkFuture FutureFrom(const json& j) {
  ForkFuture f;
  f.text = Str(j, "text"), f.tokens = Values<int64_t>(j, "tokens"), f.probs = Values<double>(j, "probs");
  f.pieces = Values<std::string>(j, "pieces");
  f.decoding = Opt<std::string>(j, "decoding"), f.first_masked = Get(j, "first_masked", false);
  f.extra = read::Without(j, {"text", "tokens", "probs", "pieces", "decoding", "first_masked"});
  return f;
}

json ToolCallJson(const ForkToolCall& c) {
  json j = {{"closed", c.closed},
            {"problem", OrNull(c.problem)},
            {"call", c.call},
            {"matches_reference", OrNull(c.matches_reference)}};
  read::KeepExtra(j, c.extra);
  return j;
}
ForkToolCall ToolCallFrom(const json& j) {
  return {Get(j, "closed", false), Opt<std::string>(j, "problem"), Sub(j, "call"), Opt<bool>(j, "matches_reference"),
          read::Without(j, {"closed", "problem", "call", "matches_reference"})};
}

json SideJson(const ForkSideJudgement& s) {
  json j = {
      {"failure", s.failure},
      {"reason", s.reason},
      {"tool_call", s.tool_call ? ToolCallJson(*s.tool_call) : json(nullptr)},
      {"literal_mutation", s.literal_mutation
                               ? json{{"literal", s.literal_mutation->literal}, {"copy", s.literal_mutation->copy}}
                               : json(nullptr)},
      {"follows_reference", s.follows_reference},
      {"rejoins_at",
       s.rejoins_at ? json{{"future", s.rejoins_at->future}, {"transcript", s.rejoins_at->transcript}} : json(nullptr)},
      {"ended", s.ended},
      {"stop", OrNull(s.stop)},
      {"call_cap_hit", s.call_cap_hit}};
  PutIf(j, "grade", s.grade);
  read::KeepExtra(j, s.extra);
  return j;
}
ForkSideJudgement SideFrom(const json& j) {
  ForkSideJudgement s;
  s.failure = Str(j, "failure", "none"), s.reason = Str(j, "reason"), s.grade = Opt<std::string>(j, "grade");
  if (Sub(j, "tool_call").is_object()) s.tool_call = ToolCallFrom(j["tool_call"]);
  if (const json& m = Sub(j, "literal_mutation"); m.is_object())
    s.literal_mutation = ForkSideJudgement::Mutation{Str(m, "literal"), Str(m, "copy")};
  s.follows_reference = Get(j, "follows_reference", false);
  if (const json& r = Sub(j, "rejoins_at"); r.is_object())
    s.rejoins_at = ForkSideJudgement::Rejoin{Get<int64_t>(r, "future", 0), Get<int64_t>(r, "transcript", 0)};
  s.ended = Get(j, "ended", false), s.stop = Opt<std::string>(j, "stop"),
  s.call_cap_hit = Get(j, "call_cap_hit", false);
  s.extra = read::Without(j, {"failure", "grade", "reason", "tool_call", "literal_mutation", "follows_reference",
                              "rejoins_at", "ended", "stop", "call_cap_hit"});
  return s;
}

constexpr std::initializer_list<const char*> kRecordKeys = {"position",
                                                            "span",
                                                            "base_token",
                                                            "base_text",
                                                            "cand_token",
                                                            "cand_text",
                                                            "base_future",
                                                            "cand_future",
                                                            "reference",
                                                            "prefix_tail",
                                                            "reconverge_at",
                                                            "reconverge_cand_at",
                                                            "first_difference",
                                                            "first_difference_cand",
                                                            "first_difference_byte",
                                                            "verdict",
                                                            "reason",
                                                            "base",
                                                            "cand",
                                                            "outcome",
                                                            "outcome_kind",
                                                            "outcome_reason",
                                                            "call_cap_hit",
                                                            "reproduced"};

// The graded kinds, written when counted (FailureTally).
constexpr const char* kGradedKinds[] = {"harmless_call", "invented_fact", "runaway"};

json FailureTallyJson(const FailureTally& t) {
  json j = {{"total", t.total},
            {"invalid_tool_call", t.invalid_tool_call},
            {"literal_mutated", t.literal_mutated},
            {"wrong_command", t.wrong_command}};
  for (const char* kind : kGradedKinds)
    if (const int64_t n = *t.Of(kind); n > 0) j[kind] = n;
  return j;
}
FailureTally FailureTallyFrom(const json& j) {
  FailureTally t{Get<int64_t>(j, "total", 0), Get<int64_t>(j, "invalid_tool_call", 0),
                 Get<int64_t>(j, "literal_mutated", 0), Get<int64_t>(j, "wrong_command", 0)};
  for (const char* kind : kGradedKinds) *t.Of(kind) = Get<int64_t>(j, kind, 0);
  return t;
}

json DecodingJson(const ForkDecodingInfo& d) {
  json j = {{"asked", d.asked}, {"used", d.used}};
  PutIf(j, "why", d.why), PutIf(j, "source", d.source), PutIf(j, "lazy", d.lazy);
  PutIf(j, "triggers", d.triggers);
  PutIf(j, "gbnf_sha256", d.gbnf_sha256), PutIf(j, "key_order", d.key_order);
  read::KeepExtra(j, d.extra);
  return j;
}
ForkDecodingInfo DecodingFrom(const json& j) {
  ForkDecodingInfo d{Str(j, "asked"), Str(j, "used"), Opt<std::string>(j, "why"), Opt<std::string>(j, "source"),
                     Opt<bool>(j, "lazy")};
  if (Sub(j, "triggers").is_array()) d.triggers = Values<std::string>(j, "triggers");
  d.gbnf_sha256 = Opt<std::string>(j, "gbnf_sha256"), d.key_order = Opt<std::string>(j, "key_order");
  d.extra = read::Without(j, {"asked", "used", "why", "source", "lazy", "triggers", "gbnf_sha256", "key_order"});
  return d;
}

json SideInfoJson(const ForkSideInfo& s) {
  json j = {{"capture", s.capture},
            {"model", s.model},
            {"model_sha256", s.model_sha256},
            {"knobs", s.knobs},
            {"flags", s.flags},
            {"forked", s.forked},
            {"seconds", s.seconds},
            {"rows_checked", s.rows_checked},
            {"rows_reproduced", s.rows_reproduced},
            {"branches_reproduced", s.branches_reproduced},
            {"decoded_during_capture", OrNull(s.decoded_during_capture)}};
  PutIf(j, "engine", s.engine);
  read::KeepExtra(j, s.extra);
  return j;
}
ForkSideInfo SideInfoFrom(const json& j) {
  ForkSideInfo s;
  s.capture = Str(j, "capture"), s.model = Str(j, "model"), s.model_sha256 = Str(j, "model_sha256");
  s.knobs = Sub(j, "knobs"), s.flags = Str(j, "flags"), s.engine = Opt<std::string>(j, "engine");
  s.forked = Get(j, "forked", false), s.seconds = Get(j, "seconds", 0.0);
  s.rows_checked = Get<int64_t>(j, "rows_checked", 0), s.rows_reproduced = Get<int64_t>(j, "rows_reproduced", 0);
  s.branches_reproduced = Get<int64_t>(j, "branches_reproduced", 0);
  s.decoded_during_capture = Opt<std::string>(j, "decoded_during_capture");
  s.extra = read::Without(j, {"capture", "model", "model_sha256", "knobs", "flags", "engine", "forked", "seconds",
                              "rows_checked", "rows_reproduced", "branches_reproduced", "decoded_during_capture"});
  return s;
}

constexpr std::initializer_list<const char*> kRunInfoKeys = {"base",          "cand",       "at",
                                                             "ranges",        "max_tokens", "max_call_tokens",
                                                             "max_branches",  "pick",       "reconverge",
                                                             "fork_where",    "decoding",   "n_tokens",
                                                             "branch_points", "n_branches", "teacher_forced_only",
                                                             "envelope",      "tools",      "warnings",
                                                             "seconds"};

}  // namespace

json ToJson(const ForkRecord& r) {
  json j = {{"position", r.position},
            {"span", OrNull(r.span)},
            {"base_token", r.base_token},
            {"base_text", r.base_text},
            {"cand_token", r.cand_token},
            {"cand_text", r.cand_text},
            {"base_future", FutureJson(r.base_future)},
            {"cand_future", FutureJson(r.cand_future)},
            {"reference", {{"text", r.reference_text}, {"tokens", r.reference_tokens}}},
            {"prefix_tail", r.prefix_tail},
            {"reconverge_at", OrNull(r.reconverge_at)},
            {"reconverge_cand_at", OrNull(r.reconverge_cand_at)},
            {"first_difference", OrNull(r.first_difference)},
            {"first_difference_cand", OrNull(r.first_difference_cand)},
            {"first_difference_byte", OrNull(r.first_difference_byte)},
            {"verdict", r.verdict},
            {"reason", r.reason},
            {"reproduced", r.reproduced}};
  if (const auto& a = r.attribution) {
    j["base"] = SideJson(a->base), j["cand"] = SideJson(a->cand);
    j["outcome"] = a->outcome, j["outcome_kind"] = OrNull(a->kind), j["outcome_reason"] = a->reason;
    j["call_cap_hit"] = a->call_cap_hit;
  }
  read::KeepExtra(j, r.extra);
  return j;
}

ForkRecord ForkRecordFromJson(const json& j) {
  ForkRecord r;
  r.position = Get<int64_t>(j, "position", 0), r.span = Opt<std::string>(j, "span");
  r.base_token = Get<int64_t>(j, "base_token", 0), r.base_text = Str(j, "base_text");
  r.cand_token = Get<int64_t>(j, "cand_token", 0), r.cand_text = Str(j, "cand_text");
  r.base_future = FutureFrom(Sub(j, "base_future")), r.cand_future = FutureFrom(Sub(j, "cand_future"));
  r.reference_text = Str(Sub(j, "reference"), "text"),
  r.reference_tokens = Values<int64_t>(Sub(j, "reference"), "tokens");
  r.prefix_tail = Str(j, "prefix_tail");
  r.reconverge_at = Opt<int64_t>(j, "reconverge_at"), r.reconverge_cand_at = Opt<int64_t>(j, "reconverge_cand_at");
  r.first_difference = Opt<int64_t>(j, "first_difference");
  r.first_difference_cand = Opt<int64_t>(j, "first_difference_cand");
  r.first_difference_byte = Opt<int64_t>(j, "first_difference_byte");
  r.verdict = Str(j, "verdict"), r.reason = Str(j, "reason"), r.reproduced = Get(j, "reproduced", true);
  if (Sub(j, "outcome").is_string())
    r.attribution = ForkAttribution{Str(j, "outcome"),        Opt<std::string>(j, "outcome_kind"),
                                    Str(j, "outcome_reason"), Get(j, "call_cap_hit", false),
                                    SideFrom(Sub(j, "base")), SideFrom(Sub(j, "cand"))};
  r.extra = read::Without(j, kRecordKeys);
  return r;
}

int64_t* FailureTally::Of(Failure failure) {
  switch (failure) {
    case Failure::kNone:
      return nullptr;
    case Failure::kHarmlessCall:
      return &harmless_call;
    case Failure::kInventedFact:
      return &invented_fact;
    case Failure::kWrongCommand:
      return &wrong_command;
    case Failure::kLiteralMutated:
      return &literal_mutated;
    case Failure::kInvalidToolCall:
      return &invalid_tool_call;
    case Failure::kRunaway:
      return &runaway;
  }
  return nullptr;
}

int64_t* FailureTally::Of(std::string_view failure) {
  const std::optional<Failure> f = FromName<Failure>(failure);
  return f ? Of(*f) : nullptr;
}

std::vector<std::pair<std::string, int64_t>> FailureTally::KindsByName() const {
  return {{"harmless_call", harmless_call},
          {"invalid_tool_call", invalid_tool_call},
          {"invented_fact", invented_fact},
          {"literal_mutated", literal_mutated},
          {"runaway", runaway},
          {"wrong_command", wrong_command}};
}

int64_t* BranchCounts::OfVerdict(Verdict verdict) {
  switch (verdict) {
    case Verdict::kInvalidToolCall:
      return &invalid_tool_call;
    case Verdict::kLiteralMutated:
      return &literal_mutated;
    case Verdict::kWrongCommand:
      return &wrong_command;
    case Verdict::kDivergent:
      return &divergent;
    case Verdict::kBenign:
      return &benign;
  }
  return nullptr;
}

int64_t* BranchCounts::OfVerdict(std::string_view verdict) {
  const std::optional<Verdict> v = FromName<Verdict>(verdict);
  return v ? OfVerdict(*v) : nullptr;
}

std::vector<std::pair<std::string, int64_t>> BranchCounts::VerdictsByName() const {
  return {{"benign", benign},
          {"divergent", divergent},
          {"invalid_tool_call", invalid_tool_call},
          {"literal_mutated", literal_mutated},
          {"total", total},
          {"wrong_command", wrong_command}};
}

std::vector<std::pair<std::string, int64_t>> BranchCounts::OutcomesByName() const {
  if (!outcomes) return {};
  const OutcomeTally& o = *outcomes;
  return {{"benign", o.benign},
          {"both_fail", o.both_fail},
          {"damage", o.damage.total},
          {"different_but_fine", o.different_but_fine},
          {"repair", o.repair.total}};
}

json ToJson(const BranchCounts& c) {
  json j = json::object();
  for (const auto& [name, n] : c.VerdictsByName()) j[name] = n;
  PutIf(j, "branch_points", c.branch_points), PutIf(j, "teacher_forced_only", c.teacher_forced_only);
  if (const auto& o = c.outcomes)
    j["outcomes"] = {{"damage", FailureTallyJson(o->damage)},
                     {"repair", FailureTallyJson(o->repair)},
                     {"both_fail", o->both_fail},
                     {"different_but_fine", o->different_but_fine},
                     {"benign", o->benign}};
  read::KeepExtra(j, c.extra);
  return j;
}

BranchCounts BranchCountsFromJson(const json& j) {
  BranchCounts c;
  for (const auto& [name, n] : c.VerdictsByName())
    if (int64_t* v = c.OfVerdict(name)) *v = Get<int64_t>(j, name, 0);
  c.total = Get<int64_t>(j, "total", 0);
  c.branch_points = Opt<int64_t>(j, "branch_points"), c.teacher_forced_only = Opt<int64_t>(j, "teacher_forced_only");
  if (const json& o = Sub(j, "outcomes"); o.is_object())
    c.outcomes = OutcomeTally{FailureTallyFrom(Sub(o, "damage")), FailureTallyFrom(Sub(o, "repair")),
                              Get<int64_t>(o, "both_fail", 0), Get<int64_t>(o, "different_but_fine", 0),
                              Get<int64_t>(o, "benign", 0)};
  c.extra = read::Without(j, {"benign", "divergent", "invalid_tool_call", "literal_mutated", "wrong_command", "total",
                              "branch_points", "teacher_forced_only", "outcomes"});
  return c;
}

json ToJson(const BranchRunInfo& c) {
  json j = {{"at", c.at},
            {"max_tokens", c.max_tokens},
            {"max_branches", c.max_branches},
            {"reconverge", c.reconverge},
            {"tools", OrNull(c.tools)},
            {"warnings", c.warnings}};
  if (c.base) j["base"] = SideInfoJson(*c.base);
  if (c.cand) j["cand"] = SideInfoJson(*c.cand);
  PutIf(j, "ranges", c.ranges), PutIf(j, "max_call_tokens", c.max_call_tokens), PutIf(j, "pick", c.pick);
  PutIf(j, "fork_where", c.fork_where), PutIf(j, "n_tokens", c.n_tokens), PutIf(j, "branch_points", c.branch_points);
  PutIf(j, "n_branches", c.n_branches), PutIf(j, "seconds", c.seconds);
  if (c.decoding) j["decoding"] = DecodingJson(*c.decoding);
  if (c.teacher_forced_only) {
    json& a = j["teacher_forced_only"] = json::array();
    for (const auto& p : *c.teacher_forced_only) a.push_back({{"position", p.position}, {"span", OrNull(p.span)}});
  }
  if (c.envelope) j["envelope"] = {{"open", c.envelope->first}, {"close", c.envelope->second}};
  read::KeepExtra(j, c.extra);
  return j;
}

BranchRunInfo BranchRunInfoFromJson(const json& j) {
  BranchRunInfo c;
  if (Sub(j, "base").is_object()) c.base = SideInfoFrom(j["base"]);
  if (Sub(j, "cand").is_object()) c.cand = SideInfoFrom(j["cand"]);
  c.at = Str(j, "at"), c.ranges = Opt<std::string>(j, "ranges"), c.max_tokens = Get<int64_t>(j, "max_tokens", 0);
  c.max_call_tokens = Opt<int64_t>(j, "max_call_tokens"), c.max_branches = Get<int64_t>(j, "max_branches", 0);
  c.pick = Opt<std::string>(j, "pick"), c.reconverge = Get<int64_t>(j, "reconverge", 0);
  c.fork_where = Opt<std::string>(j, "fork_where");
  if (Sub(j, "decoding").is_object()) c.decoding = DecodingFrom(j["decoding"]);
  c.n_tokens = Opt<int64_t>(j, "n_tokens"), c.branch_points = Opt<int64_t>(j, "branch_points");
  c.n_branches = Opt<int64_t>(j, "n_branches");
  if (Sub(j, "teacher_forced_only").is_array())
    c.teacher_forced_only = read::Each<BranchRunInfo::ReadOnly>(j["teacher_forced_only"], [](const json& p) {
      return BranchRunInfo::ReadOnly{Get<int64_t>(p, "position", 0), Opt<std::string>(p, "span")};
    });
  if (const json& e = Sub(j, "envelope"); e.is_object()) c.envelope = {{Str(e, "open"), Str(e, "close")}};
  if (Sub(j, "tools").is_array()) c.tools = Values<std::string>(j, "tools");
  c.warnings = Values<std::string>(j, "warnings"), c.seconds = Opt<double>(j, "seconds");
  c.extra = read::Without(j, kRunInfoKeys);
  return c;
}

json BranchResult::ToJson() const {
  json records_json = json::array();
  for (const ForkRecord& r : records) records_json.push_back(flipscope::ToJson(r));
  return {{"config", flipscope::ToJson(config)},
          {"records", std::move(records_json)},
          {"counts", flipscope::ToJson(counts)}};
}

BranchResult BranchResult::FromJson(const json& j) {
  return {BranchRunInfoFromJson(Sub(j, "config")), read::Each<ForkRecord>(Sub(j, "records"), ForkRecordFromJson),
          BranchCountsFromJson(Sub(j, "counts"))};
}

}  // namespace flipscope
