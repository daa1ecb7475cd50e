// Attribution: from each future's own judgement to what the change did at a branch point.
#include <fmt/format.h>

#include "branch/verdict.h"
#include "util/names.h"

namespace flipscope {
namespace {

constexpr Outcome kOutcomes[] = {Outcome::kDamage, Outcome::kRepair, Outcome::kBothFail, Outcome::kDifferentButFine,
                                 Outcome::kBenign};

constexpr Failure kFailures[] = {Failure::kHarmlessCall,   Failure::kInventedFact,    Failure::kWrongCommand,
                                 Failure::kLiteralMutated, Failure::kInvalidToolCall, Failure::kRunaway};

}  // namespace

const char* FailureName(Failure f) { return NameOf(f).data(); }

std::span<const Failure> AllFailures() { return kFailures; }

const char* OutcomeName(Outcome o) { return NameOf(o).data(); }

std::span<const Outcome> AllOutcomes() { return kOutcomes; }

Attribution Attribute(const SideJudgement& base, const SideJudgement& cand, const Judgement& pair, int /*k*/) {
  const Grade gb = GradeOf(base), gc = GradeOf(cand);
  const std::string both = fmt::format("base: {}; cand: {}", base.reason, cand.reason);
  // The same text (or a budget-cut prefix of it): whatever it holds, the fork changed nothing.
  if (!pair.first_difference) return {Outcome::kBenign, Failure::kNone, "both futures write the same text"};
  // One scale for both: the worse failure is the change's doing (damage) or undoing (repair);
  // only failures of the same grade fail alike.
  if (IsFailure(gc) && gc > gb)
    return {Outcome::kDamage, cand.failure,
            fmt::format("cand {} (base {}: {})", cand.reason, GradeName(gb), base.reason)};
  if (IsFailure(gb) && gb > gc)
    return {Outcome::kRepair, base.failure,
            fmt::format("base {} (cand {}: {})", base.reason, GradeName(gc), cand.reason)};
  if (IsFailure(gb)) return {Outcome::kBothFail, cand.failure, both};
  // FindReconvergence bounds both detours by k: a reconvergence is benign, none is not.
  if (const auto& r = pair.reconverge)
    return {Outcome::kBenign, Failure::kNone,
            fmt::format("the futures agree again after {} / {} tokens", r->base_detour, r->cand_detour)};
  return {Outcome::kDifferentButFine, Failure::kNone, both};
}

ForkSideJudgement SideRecord(const SideJudgement& s, const FutureText& f) {
  ForkSideJudgement out;
  out.failure = FailureName(s.failure);
  out.grade = GradeName(GradeOf(s));
  out.reason = s.reason;
  if (s.call_present)
    out.tool_call =
        ForkToolCall{s.call_closed, s.call_problem.empty() ? std::nullopt : std::optional<std::string>(s.call_problem),
                     s.call ? *s.call : nlohmann::json(nullptr),
                     s.call_matches            ? s.call_matches
                     : s.call_diverged.empty() ? std::nullopt
                                               : std::optional<bool>(false)};
  if (s.mutation) out.literal_mutation = ForkSideJudgement::Mutation{s.mutation->literal, s.mutation->copy};
  out.follows_reference = s.follows_reference;
  if (s.rejoins) out.rejoins_at = ForkSideJudgement::Rejoin{s.rejoins->base_at, s.rejoins->cand_at};
  out.ended = f.ended;
  if (!f.stop.empty()) out.stop = f.stop;
  out.call_cap_hit = f.cap_hit;
  return out;
}

}  // namespace flipscope
