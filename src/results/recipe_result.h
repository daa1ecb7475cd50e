// The recipe (results.json "recipe"; docs/report.md), typed: the configuration to run and why, the
// ranking every configuration got, its memory at each KV cache type, and the commands. The
// experiment's recipe step builds a RecipeResult; only results/ turns it into JSON and back.
// Reading is tolerant (outside input): a figure that is absent or null reads as none, a field of
// another type as its default, and unknown fields are kept in `extra` and written back. Fields
// that files of earlier versions lack are written back as null (they render the same).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace flipscope {

// A configuration's prefill-vs-served distance (recipe.ranking[].served_distance): its first prefill
// capture against its first served one (results.served.distance). A property of the deployment's
// path shown beside the configuration, never a figure it is ranked by.
struct RecipeServedDistance {
  std::string of;  // the configuration whose two replays were compared
  int64_t flips = 0, probes = 0;
  double flip_rate = 0, kl_mean = 0;
  std::optional<std::array<double, 2>> flip_rate_ci;
};

// A measured configuration the recipe did not rank, and why in one phrase (recipe.not_ranked[]).
struct RecipeNotRanked {
  std::string config, reason;
};

// One configuration in the recipe's ranking (recipe.ranking[]), best first.
struct RecipeRankingRow {
  std::string config;
  bool name_only = false;             // the ranking of an early file listed names alone
  std::optional<int64_t> tie_group;   // 1-based statistical tie group
  std::optional<std::string> replay;  // prefill, decode or served: the captures its figures come from
  double median_flip_rate = 0, kl_mean = 0;
  std::optional<std::array<double, 2>> flip_rate_ci;
  // What following its forks found; none where they were not followed.
  std::optional<int64_t> damage, repair, branches_followed;
  std::optional<double> damage_rate, repair_rate;
  std::optional<std::array<double, 2>> damage_rate_ci, repair_rate_ci;
  // Against the exact reference, when there is one.
  std::optional<double> exact_flip_rate, exact_kl_mean;
  std::optional<std::array<double, 2>> exact_flip_rate_ci;
  std::optional<double> memory_bytes;        // weights + KV cache at the training context; none: unknown
  std::optional<double> kv_bytes_per_token;  // none for a server
  std::optional<double> weights_bytes;       // none in early files
  std::optional<int64_t> context_at_budget;  // the context its memory budget leaves; none without one
  std::optional<bool> above_floor;           // flips above the repeat floor; none in early files
  struct Reproduced {
    int64_t reproduced = 0, of = 0;  // forks that started from the token its capture's row chose
  };
  std::optional<Reproduced> forks_reproduced;
  std::optional<RecipeServedDistance> served_distance;  // none where its two replays were not compared
  nlohmann::json extra = nlohmann::json::object();
};

// What the recommendation rests on and how sure it is (recipe.basis).
struct RecipeBasis {
  std::string rests_on, confidence, why;  // confidence: high, medium or low
  int64_t tie_group = 0;
  std::vector<std::string> tied_with;
  std::optional<int64_t> probes;
  nlohmann::json extra = nlohmann::json::object();
};

// One KV cache type for the recommended configuration (recipe.kv_types[]).
struct RecipeKvType {
  std::string type;
  double bytes_per_token = 0;
  std::optional<double> bytes_at_context;
  std::optional<int64_t> context_at_budget;
  nlohmann::json extra = nlohmann::json::object();
};

// The KV cache the recommended command allocates (recipe.kv_cache).
struct RecipeKvCache {
  double bytes = 0, bytes_without_swa_full = 0;
  bool swa_full = false;
};

// A server configuration's launch (recipe.server_launch): the command it ran with its variables,
// as asked and as run; or, for a server reached by URL, only a note.
struct RecipeServerLaunch {
  std::optional<std::string> command;  // the variables it set, then the command as run
  std::optional<std::string> as_run;
  nlohmann::json asked;  // the launch command as the experiment file gave it (null when none)
  std::optional<std::map<std::string, std::string>> env;  // the variables set on top of flipscope's
  std::string note;                                       // what this command is, one phrase
  nlohmann::json extra = nlohmann::json::object();
};

// Where the recommended command served the capture's probes differently (mismatches[], near_ties[]).
struct RecipeProbeNote {
  int64_t position = 0;
  std::string why;
};

// --verify-recipe's check of the recommended command against the capture (recipe.verification;
// docs/experiment.md): matched, differs, or unverified with the error.
struct RecipeVerification {
  std::string status;  // matched, differs or unverified
  std::string command;
  std::optional<std::string> error;         // unverified: why
  std::optional<std::string> llama_server;  // the llama-server binary served
  std::optional<double> seconds;
  std::optional<int64_t> probes_total, probes_checked, matched;
  std::optional<std::vector<int64_t>> positions;  // the probes checked
  std::vector<RecipeProbeNote> mismatches, near_ties;
  std::optional<double> near_tie, tolerance, max_logprob_diff;  // nats
  std::optional<int64_t> top_k, logprobs_compared, logprobs_within_tolerance;
  nlohmann::json extra = nlohmann::json::object();
};

struct RecipeResult {
  std::string recommended, reason;
  std::vector<std::string> warnings;
  std::optional<std::string> ranked_by, ranking_key, ranking_mode;  // none in early files
  std::optional<std::vector<std::string>> lacking_forks;  // flipping configurations whose forks were not followed
  // Measured configurations left out of the ranking: every ranked row is of one replay (ranked_by);
  // none in files of earlier versions.
  std::optional<std::vector<RecipeNotRanked>> not_ranked;
  std::optional<RecipeBasis> basis;
  std::vector<RecipeRankingRow> ranking;
  std::vector<RecipeKvType> kv_types;
  std::optional<RecipeKvCache> kv_cache;  // none for a server configuration
  std::optional<double> weights_bytes;
  std::optional<double> memory_budget_bytes;  // none: no budget
  std::optional<int64_t> context;             // the -c of the commands
  std::string server_command, cli_command;
  std::optional<RecipeServerLaunch> server_launch;  // a server configuration's; none otherwise
  std::optional<RecipeVerification> verification;   // none when --verify-recipe did not run
  nlohmann::json extra = nlohmann::json::object();

  // The ranking row of a configuration; null when it has none.
  const RecipeRankingRow* Row(const std::string& config) const;
  // Why the recipe left a measured configuration out of its ranking; null when it did not.
  const std::string* NotRankedWhy(const std::string& config) const;
};

nlohmann::json ToJson(const RecipeVerification& v);
RecipeVerification RecipeVerificationFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const RecipeResult& r);
// Never fails: what is missing or mistyped reads as empty.
RecipeResult RecipeFromJson(const nlohmann::json& j);

}  // namespace flipscope
