// `flipscope branch BASE CAND -o BRANCHES.json [--at flips|ranges] [--ranges A-B,...|tool_calls]
//  [--max-tokens N] [--max-call-tokens N] [--max-branches N] [--reconverge K] [--fork-where assistant|all]
//  [--fork-decoding auto|grammar|free]`
#include <fmt/format.h>

#include <filesystem>

#include "branch/branch.h"
#include "cli/commands.h"
#include "util/util.h"

namespace flipscope::cli {

namespace {

// Records where the change did damage or repair shown on the terminal, one line each; the rest
// are in the JSON.
constexpr size_t kShownRecords = 12;

void PrintSummary(const BranchResult& out, const std::string& path) {
  const BranchRunInfo& cfg = out.config;
  const bool everywhere = cfg.ForkWhereMode() == ForkScope::kAll;
  const int64_t points = cfg.branch_points.value_or(0);
  auto forked = [](const std::optional<ForkSideInfo>& side) { return side && side->forked ? "yes" : "re-prefill"; };
  // "at flips" or "at ranges 100-200,300-400".
  const std::string at = cfg.AtMode() == BranchAt::kRanges ? "ranges " + cfg.ranges.value_or("") : "flips";
  fmt::print("{} branch points (at {}{}), {} of {} followed for {} tokens; fork: base {}, cand {}\n", points, at,
             everywhere ? "" : ", where the model writes", cfg.n_branches.value_or(0), points, cfg.max_tokens,
             forked(cfg.base), forked(cfg.cand));
  const ForkDecodingInfo dec = cfg.decoding.value_or(ForkDecodingInfo{});
  fmt::print("futures decoded {}{}\n", dec.used.empty() ? "free" : dec.used,
             dec.why      ? " (" + *dec.why + ")"
             : dec.source ? " (the grammar of the " + *dec.source + ")"
                          : "");
  fmt::print("{}", SummaryText(out.counts, FromName<ForkPick>(cfg.pick.value_or("")).value_or(ForkPick::kFirst)));
  size_t shown = 0, not_reproduced = 0;
  for (const ForkRecord& r : out.records) {
    not_reproduced += !r.reproduced;
    const auto& a = r.attribution;
    const std::optional<Outcome> outcome = a ? a->OutcomeMode() : std::nullopt;
    if ((outcome != Outcome::kDamage && outcome != Outcome::kRepair) || shown == kShownRecords) continue;
    ++shown;
    fmt::print("  position {:>7}  {:<6} {:<17}  {}\n", r.position, a->outcome, a->kind.value_or(""), a->reason);
  }
  if (not_reproduced > 0)
    fmt::print("{} branch points where a recomputed row differs from its capture (see \"reproduced\")\n",
               not_reproduced);
  fmt::print("wrote {}\n", path);
}

// The branch stage's errors name the fields of its options; these are the flags that set them.
Status WithBranchFlags(const Status& st) {
  return FieldsAsFlags(st, {{"at", "--at"},
                            {"ranges", "--ranges"},
                            {"max_tokens", "--max-tokens"},
                            {"max_call_tokens", "--max-call-tokens"},
                            {"max_branches", "--max-branches"},
                            {"reconverge", "--reconverge"},
                            {"decoding", "--fork-decoding"},
                            {"api", "--api"}});
}

// What `flipscope branch` reads from its command line.
struct BranchOpts {
  BranchRequest req;
  std::string at{NameOf(BranchOptions().at)}, fork_where{NameOf(BranchOptions().fork_where)},
      pick{NameOf(BranchOptions().pick)}, decoding{NameOf(BranchOptions().decoding)};
  std::string out;
  bool quiet = false, no_fork = false;
};

// The branch stage's options as flags (their defaults from a default BranchOptions).
void AddBranchOptionFlags(CLI::App* cmd, BranchOpts& o) {
  cmd->add_option("--at", o.at, "Branch points: flips (stored argmax differ) or ranges")->capture_default_str();
  cmd->add_option("--ranges", o.req.options.ranges, "With --at ranges: A-B,... (inclusive positions) or tool_calls");
  cmd->add_option("--max-tokens", o.req.options.max_tokens, "Tokens decoded per future")->capture_default_str();
  cmd->add_option(
         "--max-call-tokens", o.req.options.max_call_tokens,
         "Inside a tool call, decode on until the call closes, up to this many tokens; 0 = never past --max-tokens")
      ->capture_default_str();
  cmd->add_option("--max-branches", o.req.options.max_branches, "Follow only N branch points (see --pick); 0 = all")
      ->capture_default_str();
  cmd->add_option("--pick", o.pick,
                  "Which N flips --max-branches follows: first (by position) or spread (over the whole session: "
                  "at most N * (p + 1) / tokens up to position p)")
      ->capture_default_str();
  cmd->add_option("--reconverge", o.req.options.reconverge,
                  "K: futures agreeing again for K tokens within K tokens of the fork are benign")
      ->capture_default_str();
  cmd->add_option("--fork-where", o.fork_where,
                  "Fork only where the model writes the next token (assistant: assistant messages and their "
                  "tool calls) or everywhere (all); the others count as teacher-forced only")
      ->capture_default_str();
  cmd->add_option("--fork-decoding", o.decoding,
                  "How futures decode: grammar (greedy under the tool-call grammar llama-server would build for "
                  "the workload's tools), free (unconstrained greedy), or auto (grammar where the chat template "
                  "renders tool calls, else free)")
      ->capture_default_str();
  cmd->add_flag("--no-fork", o.no_fork,
                "Re-prefill every branch instead of forking the cache (slower; for comparison)");
}

// The named modes read into o.req.options; an error names the flag.
Status ReadBranchModes(BranchOpts& o) {
  FS_ASSIGN_OR_RETURN(o.req.options.at, ParseName<BranchAt>(o.at, "--at"));
  FS_ASSIGN_OR_RETURN(o.req.options.fork_where, ParseName<ForkScope>(o.fork_where, "--fork-where"));
  FS_ASSIGN_OR_RETURN(o.req.options.pick, ParseName<ForkPick>(o.pick, "--pick"));
  FS_ASSIGN_OR_RETURN(o.req.options.decoding, ParseName<DecodingMode>(o.decoding, "--fork-decoding"));
  o.req.options.allow_fork = !o.no_fork;
  o.req.options.log.bars = !o.quiet;
  return Status::Ok();
}

}  // namespace

Action DefineBranch(CLI::App* cmd) {
  auto o = std::make_shared<BranchOpts>();
  cmd->add_option("base", o->req.base_path, "Baseline capture (.safetensors)")->required();
  cmd->add_option("cand", o->req.cand_path, "Candidate capture of the same workload")->required();
  cmd->add_option("-o,--output", o->out, "Branch records to write (.json)")->required();
  AddBranchOptionFlags(cmd, *o);
  cmd->add_flag("-q,--quiet", o->quiet, "No progress bar");
  return [o]() -> int {
    // Refuse a missing output folder before the long run rather than after it.
    std::filesystem::path parent = std::filesystem::path(o->out).parent_path();
    if (!parent.empty() && !std::filesystem::is_directory(parent))
      return Fail(Status::Error(o->out + ": the folder " + parent.string() + " does not exist"));
    if (Status st = ReadBranchModes(*o); !st.ok()) return Fail(st);
    auto out = RunBranches(o->req);
    if (!out.ok()) return Fail(WithBranchFlags(out.status()));
    for (const std::string& w : out->config.warnings) fmt::print(stderr, "flipscope: warning: {}\n", w);
    Status st =
        WriteFileAtomic(o->out, out->ToJson().dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    if (!st.ok()) return Fail(st);
    PrintSummary(*out, o->out);
    return 0;
  };
}

}  // namespace flipscope::cli
