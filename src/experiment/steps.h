// experiment's internal steps (not part of the stage's interface): comparisons, summary, branches.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "branch/branch.h"
#include "checkpoint/model_info.h"
#include "experiment/experiment.h"
#include "results/experiment_results.h"
#include "results/results.h"
#include "util/names.h"

namespace flipscope {

// KV-cache bytes per token of context for a model shape and the knobs' K/V cache types.
double KvBytesPerToken(const ModelInfo& model, const Knobs& knobs);
// The KV cache llama.cpp allocates for one sequence (kv_memory.cpp has the rule).
struct KvMemory {
  double bytes = 0;
  int64_t cells = 0;      // of each full-attention layer: the context padded to 256
  int64_t cells_swa = 0;  // of each sliding-window layer (0 without any)
};
// The KV cache of `model` at n_ctx tokens of context with the knobs' cache types and -ub, swa_full
// as llama.cpp's --swa-full.
KvMemory KvCacheMemory(const ModelInfo& model, const Knobs& knobs, int64_t n_ctx, bool swa_full);
// The largest context, at most `cap` (the training context when cap <= 0), whose KV cache fits in
// `bytes`; 0 when none does.
int64_t ContextFitting(const ModelInfo& model, const Knobs& knobs, double bytes, bool swa_full, int64_t cap = 0);
// Whether a configuration's capture kept every sliding-window cell (its manifest's engine.swa_full)
// on a model that has sliding-window layers: then its command needs --swa-full.
bool CapturedSwaFull(const ConfigEntry& config, const ModelInfo& model);
// The line that says, once the baseline's first capture is on disk, that the captures still to
// make (captures_left, each about capture_bytes) need more than the free_bytes left where they go,
// and that BF16 rows take half when f32_rows; nullopt when they fit.
std::optional<std::string> SpaceWarning(uint64_t capture_bytes, int captures_left, uint64_t free_bytes, bool f32_rows);
// A shell line's prefix that sets env's variables for one command: "K=v K2=v2 " ("" for none).
std::string EnvPrefix(const std::map<std::string, std::string>& env);
// `tool` ("llama-server" or "llama-cli") serving a llama configuration (its results.json configs[]
// entry) at n_ctx: the ggml variables it was measured under (EnvPrefix), the model, -c, one
// sequence (server), every knob's flag, --swa-full as captured and the chat template the workload
// used; words shell-quoted.
std::string LlamaCommand(const std::string& tool, const ConfigEntry& config, const WorkloadFacts& workload,
                         const ModelInfo& model, int64_t n_ctx);
// A launched server configuration's command as it was run (its engine's launch): the variables it
// set ("K=v ") then the command as run, as run, as asked (with {port}), the variables, and what
// the command is, in words; none for any other configuration.
std::optional<RecipeServerLaunch> ServerLaunch(const ConfigEntry& config);
// A configuration's facts from its first capture's manifest: the knobs, flags (unset when it
// records none), engine record and timings (an empty object when absent).
void AddCaptureFacts(const CaptureManifest& manifest, ConfigEntry& entry);
// The run's facts from the baseline's first capture's manifest: the workload's record (without
// its spans), the probe plan and the environment (the engine's record).
void AddRunFacts(const CaptureManifest& manifest, ExperimentResults& results);
// The model file configuration c runs: its own, or its requantized weights' place in outdir/models.
std::string ConfigModelPath(const ConfigSpec& c, const std::string& outdir);
// Where repeat r of configuration c is captured: outdir/captures/NAME-rR.safetensors.
std::string CaptureFilePath(const std::string& outdir, const ConfigSpec& c, int r);
// The request of repeat r of configuration c over model into outdir (its log left at the
// default); server: a server configuration's HTTP options (its knobs then only the replay).
CaptureRequest ConfigRequest(const Experiment& exp, const ConfigSpec& c, int r, const std::string& model,
                             const std::string& outdir, const HttpOptions* server = nullptr);
// A configuration's status line: its name, its replay ("[prefill]" or "[served replay]") and what
// it changes against the baseline, as flags ("kv-q8_0 [prefill] -ctk q8_0 -ctv q8_0", "served
// [served replay] (same knobs as baseline)"); the baseline with its own flags; a server
// configuration with server_flags, the exact reference with its engine and threads.
std::string ConfigLine(const ConfigSpec& c, const ConfigSpec& baseline, const std::string& server_flags = "");
// 1. Captures into m.configs (the baseline, then the variants in file order): the baseline's
// first repeat (without it nothing can be compared), the variants, then the baseline's other
// repeats (its second follows the variants' forks from its side), then the exact reference when
// the experiment has one (into *reference). A refused or failed variant is recorded and the run
// goes on; an error names the experiment file and what could not be captured. *hashes caches
// files' SHA-256 by path (read and extended).
Status CaptureAll(const Experiment& exp, const RunOptions& opts, const ModelInfo& model,
                  std::map<std::string, std::string>* hashes, Measurements& m,
                  std::optional<ReferenceResults>* reference);
// Fills m.comparisons: baseline repeats vs baseline r0, every variant repeat vs baseline r0 (each
// with compare's document and the figures a summary is made of).
Status CompareAll(const Experiment& exp, Measurements& m, const Log& log);
// The configuration a loaded one (load > 0) is the same as when run alone: the baseline or a
// variant with the same model and knobs at load 0; "" when there is none or c runs alone.
std::string AloneOf(const Experiment& exp, const ConfigSpec& c);
struct CompareOptions;
// Comparison options of the experiment (window, confident flips, the baseline's token text).
CompareOptions OptionsOf(const Experiment& exp, const Measurements& m);
// Fills m.summary (median over repeats per configuration) and m.floor (exp.baseline's repeats); a
// loaded configuration's row names its load and alone counterpart, and m.load_floor holds the
// floor alone beside the baseline's floor under each load.
void Summarize(const Experiment& exp, Measurements& m);
// With results.reference (the exact capture's entry): every configuration's captures compared
// with it (reference.comparisons, the exact capture as base), the median over repeats per
// configuration (reference.summary, the baseline included), and each summary row's
// exact_flip_rate and exact_kl_mean.
Status CompareWithReference(const Experiment& exp, ExperimentResults& results, const Log& log);
// With results.reference and results.served: the served twins likewise (reference.served_comparisons,
// reference.served_summary, each served summary row's exact_flip_rate and exact_kl_mean).
Status CompareServedWithReference(const Experiment& exp, ExperimentResults& results, const Log& log);
// Adds to each summary row what following its forks found (m.branches): damage, repair, forks
// followed, forkable and teacher-forced-only flips, and the damage rate (median flip rate x
// damage / branches followed x the share of flips where the model writes: damaging flips per
// probe); none where its forks were not followed.
void AddDamage(Measurements& m);
// Fills m.branches for each variant whose first repeat flips, using the futures the captures
// decoded (sidecars) where they cover the branch points.
Status BranchAll(const Experiment& exp, Measurements& m, const RunOptions& opts);
// The flips of a configuration's first repeat against the baseline's first (0 when not compared).
int64_t FirstRepeatFlips(const Measurements& m, const std::string& name);

// Whether the experiment looks into this variant's flips layer by layer ([layers]).
bool Layered(const Experiment& exp, const std::string& name);
// Fills results.layers: for each such variant whose first repeat flips, the layers stage's
// document (docs/layers.md), or why it was skipped (a server or loaded configuration), or the
// error when its rows do not reproduce.
Status LayersAll(const Experiment& exp, ExperimentResults& results, const RunOptions& opts);

// Whether the experiment follows this variant's forks.
bool Branched(const Experiment& exp, const std::string& name);
// Forks for a branched variant's first repeat: where its greedy token differs from baseline r0's
// (the first max_branches of them); futures go to *out.
Result<CaptureForks> VariantForks(const std::string& base0, const BranchSettings& s,
                                  std::shared_ptr<DecodedFutures> out);
// Forks for the baseline's second repeat at `points`, each from r0's greedy token; records in
// out->reproduced whether the repeat's row there equals r0's.
Result<CaptureForks> BaselineForks(const std::string& base0, const std::set<int32_t>& points, const BranchSettings& s,
                                   std::shared_ptr<DecodedFutures> out);

// replay = "both", once results.served holds the served twins' measurements: each
// configuration's first prefill capture (base) against its twin's (served.distance: figures,
// per-window, and the probes where the model wrote, inside tool calls, and elsewhere) and the
// ranking under each replay (served.ranking).
Status ReplayDistances(const Experiment& exp, ExperimentResults& results, const Log& log);

// ---- The replay the recipe ranks by (recipe_replay.cpp) ----

// One ranking holds one replay: served when the served twins were measured against a served
// baseline that ran (twins: the figures are results.served's), else the baseline's replay.
struct RankedReplay {
  Replay replay = Replay::kPrefill;
  bool twins = false;
};
RankedReplay RankedReplayOf(const ExperimentResults& results);
// Why a measured configuration is left out of a ranking by `by`, in one phrase; "" when it is
// ranked. With twins: one without a served twin measured (skipped, refused, failed); without: one
// captured under another replay than the baseline (an earlier version's replay-only variant).
std::string NotRankedReason(const ExperimentResults& results, const RankedReplay& by, const ConfigEntry& config);
// A configuration's own prefill-vs-served distance (results.served.distance; for the baseline in
// an earlier version's results, its replay-only variant's figures); none when not measured.
std::optional<RecipeServedDistance> OwnServedDistance(const ExperimentResults& results, const std::string& config);
// One line when the recommended configuration's prefill-vs-served distance (its own, else the
// baseline's) flips above the repeat floor (the larger of both replays' floors), with the figure:
// then the recommendation cannot be of high confidence. "" otherwise.
std::string ServedDistanceCaveat(const ExperimentResults& results, const std::string& config);

// ---- The recipe's warnings (recipe_warnings.cpp) ----

// One line per configuration that is within the repeat floor alone (or is the baseline) but flips
// above it when other sequences share its batches: its alone figures do not hold on a busy server.
std::vector<std::string> LoadWarnings(const Measurements& measured, const std::string& baseline);
// What the recipe's context means for the session measured (session tokens): too short to hold
// it (budget: because the memory budget leaves no more), or past the model's training context.
std::vector<std::string> ContextWarnings(int64_t context, int64_t session, const ModelInfo& model, bool budget);

// ---- The recipe's launch command, served (verify_recipe.cpp) ----

struct VerifyOptions {
  int max_probes = 32;      // the capture's probes checked, evenly spaced (each one request)
  int top_k = 5;            // log-probabilities compared per probe
  double tolerance = 0.01;  // |served - captured| log-probability, relative to each one's top-1, counted as within
  double near_tie = 0.1;    // a served token the capture ranks at most this many nats below its own
                            // top-1 is a near-tie (the prompt's batching can flip it), not a mismatch
  double startup_timeout_s = 300;
  double request_timeout_s = 300;
  std::string log_path;  // llama-server's output
};
// Starts the recipe's server_command as printed (llama-server of this build, a free port)
// and checks at up to max_probes of the recommended configuration's first capture's probes that
// the served greedy token equals the capture's, and how far the top-k log-probabilities are from
// the capture's. Returns the recipe's verification: status matched, differs or unverified, the
// command, the probes checked and matched, mismatches and near-ties (each {position, why};
// matched: no mismatch beyond near-ties), the log-probabilities compared and within tolerance and
// their largest difference; for unverified a one-line error (a refused flag is named). Never
// throws; the server is stopped.
RecipeVerification VerifyRecipe(const ExperimentResults& results, const VerifyOptions& opts, const Log& log);

// How a served greedy token compares with the capture's at one probe, from the capture's own
// log-probabilities of its top-1 and of the served token (NaN: outside a truncated capture's top-k).
enum class ServedChoiceVerdict { kSame, kNearTie, kDiffers };
ServedChoiceVerdict JudgeServedChoice(bool same_token, double captured_top_lp, double captured_served_lp,
                                      double near_tie);

// ---- Server configurations (servers.cpp) ----

// A server configuration's server while its captures run. Launched servers start on the first
// Up() (log appended to log_path) and stop when the session is destroyed; URL ones are used as
// they are.
class ServerSession {
 public:
  ServerSession(const ConfigSpec& c, std::string log_path, Log log);
  ~ServerSession();
  // The options a capture's request is identified by (a launched server's URL is not yet known).
  const HttpOptions& Asked() const { return opts_; }
  // The options to capture with, starting a launched server first; errors say why it did not start.
  Result<HttpOptions> Up();

 private:
  ServerSpec spec_;
  std::string log_;
  Log status_;  // where the start and the answer are reported
  HttpOptions opts_;
  std::unique_ptr<ServerProcess> process_;
};

// The token a future starts from at a branch point, its probability there, and whether the
// row there is the compared capture's (bit for bit).
struct ForkToken {
  int32_t id = 0;
  float prob = 0;
  bool reproduced = true;
};
using ForkFirst = std::function<ForkToken(int32_t position)>;
// First tokens from a server's capture: reference's argmax and top-1 probability at each point
// (reference empty: the capture's own); reproduced = the capture's row digest equals reference's.
Result<ForkFirst> FirstTokens(const std::string& capture, const std::string& reference);
// The first max_branches (0: all) positions probed by both captures where their argmax differ,
// among those fork_where allows (the branch stage's rule).
Result<std::vector<int32_t>> FlipPoints(const std::string& base0, const std::string& capture, const BranchSettings& s);
// Decodes a future at every point over HTTP (prompt: tokens up to the point plus the first
// token, temperature 0) and keeps them beside capture (WriteDecoded).
Status DecodeOverHttp(const HttpOptions& opts, const std::string& capture, const std::string& base0,
                      const std::vector<int32_t>& points, const ForkFirst& first_at, const BranchSettings& s,
                      const Log& log, DecodedFutures* out);

}  // namespace flipscope
