// Attribution: from each future's own judgement to what the change did at a branch point.
#include <fmt/format.h>

#include "branch/verdict.h"
#include "util/names.h"

namespace flipscope {
namespace {

constexpr Outcome kOutcomes[] = {Outcome::kDamage, Outcome::kRepair, Outcome::kBothFail, Outcome::kDifferentButFine,
                                 Outcome::kBenign};

}  // namespace

// A failure is named as the verdict it comes from (VerdictName's table), none as "none".
const char* FailureName(Failure f) {
  switch (f) {
    case Failure::kNone:
      return "none";
    case Failure::kInvalidToolCall:
      return VerdictName(Verdict::kInvalidToolCall);
    case Failure::kLiteralMutated:
      return VerdictName(Verdict::kLiteralMutated);
    case Failure::kWrongCommand:
      return VerdictName(Verdict::kWrongCommand);
  }
  return "?";
}

// Outcome names as branch records spell them.
template <>
struct Names<Outcome> {
  static constexpr std::pair<Outcome, const char*> v[] = {{Outcome::kDamage, "damage"},
                                                          {Outcome::kRepair, "repair"},
                                                          {Outcome::kBothFail, "both_fail"},
                                                          {Outcome::kDifferentButFine, "different_but_fine"},
                                                          {Outcome::kBenign, "benign"}};
};

const char* OutcomeName(Outcome o) { return NameOf(o).data(); }

std::span<const Outcome> AllOutcomes() { return kOutcomes; }

Attribution Attribute(const SideJudgement& base, const SideJudgement& cand, const Judgement& pair, int /*k*/) {
  const bool base_fails = base.failure != Failure::kNone, cand_fails = cand.failure != Failure::kNone;
  const std::string both = fmt::format("base: {}; cand: {}", base.reason, cand.reason);
  // The same text (or a budget-cut prefix of it): whatever it holds, the fork changed nothing.
  if (!pair.first_difference) return {Outcome::kBenign, Failure::kNone, "both futures write the same text"};
  if (base_fails && cand_fails) return {Outcome::kBothFail, cand.failure, both};
  if (cand_fails) return {Outcome::kDamage, cand.failure, "cand " + cand.reason + " (base " + base.reason + ")"};
  if (base_fails) return {Outcome::kRepair, base.failure, "base " + base.reason + " (cand " + cand.reason + ")"};
  // FindReconvergence bounds both detours by k: a reconvergence is benign, none is not.
  if (const auto& r = pair.reconverge)
    return {Outcome::kBenign, Failure::kNone,
            fmt::format("the futures agree again after {} / {} tokens", r->base_detour, r->cand_detour)};
  return {Outcome::kDifferentButFine, Failure::kNone, both};
}

nlohmann::json SideJson(const SideJudgement& s, const FutureText& f) {
  nlohmann::json call = nullptr;
  if (s.call_present)
    call = {{"closed", s.call_closed},
            {"problem", s.call_problem.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.call_problem)},
            {"call", s.call ? *s.call : nlohmann::json(nullptr)},
            {"matches_reference", s.call_matches        ? nlohmann::json(*s.call_matches)
                                  : s.call_diverged.empty() ? nlohmann::json(nullptr)
                                                            : nlohmann::json(false)}};
  nlohmann::json mutation = nullptr;
  if (s.mutation) mutation = {{"literal", s.mutation->literal}, {"copy", s.mutation->copy}};
  return {{"failure", FailureName(s.failure)},
          {"reason", s.reason},
          {"tool_call", call},
          {"literal_mutation", mutation},
          {"follows_reference", s.follows_reference},
          {"rejoins_at", s.rejoins ? nlohmann::json{{"future", s.rejoins->base_at}, {"transcript", s.rejoins->cand_at}}
                                   : nlohmann::json(nullptr)},
          {"ended", f.ended},
          {"stop", f.stop.empty() ? nlohmann::json(nullptr) : nlohmann::json(f.stop)},
          {"call_cap_hit", f.cap_hit}};
}

}  // namespace flipscope
