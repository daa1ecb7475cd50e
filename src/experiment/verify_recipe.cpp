// --verify-recipe: the recommended llama-server command, started exactly as the recipe prints it
// (on a free port), answers the workload at a sample of the capture's probes with the capture's
// greedy tokens and top log-probabilities.
#include <dlfcn.h>
#include <fmt/format.h>
#include <llama.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include "capture/capture.h"
#include "experiment/steps.h"

namespace flipscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// llama-server from the llama.cpp build whose libllama this process runs (FLIPSCOPE_LLAMA_SERVER
// overrides): the same tree and build options as the captures.
Result<std::string> LlamaServerPath() {
  if (const char* env = std::getenv("FLIPSCOPE_LLAMA_SERVER"); env && *env) return std::string(env);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&llama_backend_init), &info) == 0 || !info.dli_fname)
    return Status::Error("cannot tell where libllama was loaded from to find llama-server (set FLIPSCOPE_LLAMA_SERVER)");
  const fs::path server = fs::path(info.dli_fname).parent_path() / "llama-server";
  std::error_code ec;
  if (!fs::exists(server, ec))
    return Status::Error(server.string() + ": no llama-server beside libllama (scripts/build-llama.sh builds it)");
  return server.string();
}

// Why llama-server did not start, on one line: the flag it refused when its log names one.
std::string Refusal(const std::string& log_path, const Status& start) {
  std::ifstream in(log_path);
  // llama.cpp's wording; its server prints the second with a capital (seen: "Error while handling").
  const std::regex invalid(R"([Ee]rror: invalid argument: (\S+))"),
      handling(R"([Ee]rror while handling argument \"([^\"]+)\": ([^\n]*))");
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, invalid)) return "llama-server refuses the flag " + m[1].str();
    if (std::regex_search(line, m, handling)) return "llama-server refuses " + m[1].str() + ": " + m[2].str();
  }
  std::string why = start.message();
  std::replace(why.begin(), why.end(), '\n', ' ');
  return "llama-server did not start: " + why;
}

// Up to n of the capture's probe rows, evenly spaced from the first to the last.
std::vector<int64_t> SampleRows(int64_t n_rows, int n) {
  std::vector<int64_t> rows;
  if (n_rows <= 0 || n <= 0) return rows;
  if (n_rows <= n) n = int(n_rows);
  for (int j = 0; j < n; ++j) rows.push_back(n == 1 ? n_rows - 1 : int64_t(j) * (n_rows - 1) / (n - 1));
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

// The capture's log-probability of each id at row i: FP64 log-softmax of a full row, the stored
// top-k of a truncated one (NaN where an id is outside it).
Result<std::vector<double>> CapturedLogprobs(const CaptureReader& cap, int64_t i, const std::vector<int32_t>& ids) {
  std::vector<double> out(ids.size(), NAN);
  if (cap.truncated()) {
    auto tid = cap.TopKIds(i);
    auto tlp = cap.TopKLogprobs(i);
    for (size_t j = 0; j < ids.size(); ++j)
      for (size_t t = 0; t < tid.size(); ++t)
        if (tid[t] == ids[j]) out[j] = tlp[t];
    return out;
  }
  std::vector<double> row(size_t(cap.n_vocab()));
  FS_RETURN_IF_ERROR(cap.ReadRowF64(i, row));
  const double max = *std::max_element(row.begin(), row.end());
  double sum = 0;
  for (double v : row) sum += std::exp(v - max);
  const double log_z = max + std::log(sum);
  for (size_t j = 0; j < ids.size(); ++j) out[j] = row[size_t(ids[j])] - log_z;
  return out;
}

// Sends the capture's sampled probes to a running llama-server and compares its answers:
// recipe.verification without "command", "llama_server" and "seconds"; errors say which request failed.
Result<RecipeVerification> CheckProbes(const HttpOptions& http, const CaptureReader& c, const VerifyOptions& o) {
  RecipeVerification v;
  std::vector<int64_t>& checked = v.positions.emplace();
  double max_diff = 0;
  int with_logprobs = 0;  // probes whose log-probabilities the server returned
  int within = 0;         // ... and were within the tolerance of the capture's
  for (int64_t i : SampleRows(int64_t(c.positions().size()), o.max_probes)) {
    const int32_t p = c.positions()[size_t(i)];
    FS_ASSIGN_OR_RETURN(ServedChoice served,
                        LlamaServerChoice(http, c.tokens().subspan(0, size_t(p) + 1), o.top_k, c.n_vocab()));
    FS_ASSIGN_OR_RETURN(std::vector<double> captured, CapturedLogprobs(c, i, served.ids));
    // Each side relative to its own top-1: llama-server may normalize over the sampler's
    // candidates rather than the whole vocabulary, which shifts every log-probability alike.
    double diff = 0;
    for (size_t j = 1; j < served.ids.size(); ++j)
      if (!std::isnan(captured[j]) && !std::isnan(captured[0]))
        diff = std::max(diff, std::abs((served.logprobs[j] - served.logprobs[0]) - (captured[j] - captured[0])));
    max_diff = std::max(max_diff, diff);
    with_logprobs += served.ids.size() > 1 ? 1 : 0;
    within += served.ids.size() > 1 && diff <= o.tolerance ? 1 : 0;
    const int32_t want = c.argmax()[size_t(i)];
    // The greedy token decides a match; a token the capture itself ranks within near_tie of its
    // top-1 is a near-tie, which the server's different batching of the prompt can flip
    // (docs/experiment.md, --verify-recipe).
    FS_ASSIGN_OR_RETURN(std::vector<double> pair, CapturedLogprobs(c, i, {want, served.token}));
    const auto verdict = JudgeServedChoice(served.token == want, pair[0], pair[1], o.near_tie);
    if (verdict != ServedChoiceVerdict::kSame)
      (verdict == ServedChoiceVerdict::kNearTie ? v.near_ties : v.mismatches)
          .push_back({p, fmt::format("served token {}, captured {}{}", served.token, want,
                                     std::isnan(pair[1])
                                         ? std::string()
                                         : fmt::format(", {:.3g} nats below it in the capture", pair[0] - pair[1]))});
    checked.push_back(p);
  }
  const int64_t n = int64_t(checked.size());
  v.status = v.mismatches.empty() ? "matched" : "differs";
  v.probes_total = int64_t(c.positions().size()), v.probes_checked = n;
  v.matched = n - int64_t(v.mismatches.size()) - int64_t(v.near_ties.size());
  v.near_tie = o.near_tie, v.top_k = o.top_k, v.logprobs_compared = with_logprobs;
  v.logprobs_within_tolerance = within, v.max_logprob_diff = max_diff, v.tolerance = o.tolerance;
  return v;
}

RecipeVerification Unverified(const std::string& command, const std::string& why) {
  RecipeVerification v;
  v.status = "unverified", v.command = command, v.error = why;
  return v;
}

}  // namespace

ServedChoiceVerdict JudgeServedChoice(bool same_token, double captured_top_lp, double captured_served_lp, double near_tie) {
  if (same_token) return ServedChoiceVerdict::kSame;
  if (std::isnan(captured_top_lp) || std::isnan(captured_served_lp)) return ServedChoiceVerdict::kDiffers;
  return captured_top_lp - captured_served_lp <= near_tie ? ServedChoiceVerdict::kNearTie : ServedChoiceVerdict::kDiffers;
}

RecipeVerification VerifyRecipe(const ExperimentResults& results, const VerifyOptions& o, const Log& log) {
  const std::string command = results.recipe ? results.recipe->server_command : "";
  const ConfigEntry* config = results.recipe ? results.measured.Config(results.recipe->recommended) : nullptr;
  // The command starts with the ggml variables the configuration was measured under, if any.
  const std::map<std::string, std::string> env =
      config && config->engine ? config->engine->env : std::map<std::string, std::string>{};
  const std::string prefix = EnvPrefix(env) + "llama-server ";
  if (command.rfind(prefix, 0) != 0)
    return Unverified(command,
                      "the recommended command is not a llama-server command (a server's own launch command "
                      "is served by the experiment itself)");
  if (!config || config->captures.empty())
    return Unverified(command, "the recommended configuration has no capture to check against");
  auto cap = CaptureReader::Open(config->captures.front());
  if (!cap.ok()) return Unverified(command, cap.status().message());
  auto server = LlamaServerPath();
  if (!server.ok()) return Unverified(command, server.status().message());
  auto port = FreePort();
  if (!port.ok()) return Unverified(command, port.status().message());
  LaunchOptions launch;
  // The command as printed, with only its program resolved to this build and a port added.
  launch.command = "'" + *server + "' " + command.substr(prefix.size()) + fmt::format(" --host 127.0.0.1 --port {}", *port);
  launch.url = fmt::format("http://127.0.0.1:{}", *port);
  launch.env = env;
  launch.startup_timeout_s = o.startup_timeout_s;
  launch.log_path = o.log_path;
  std::error_code ec;
  fs::remove(o.log_path, ec);  // the refusal is read from this start's log alone
  log.Info("verifying the recipe: " + command);
  const double t0 = NowSeconds();
  auto process = ServerProcess::Start(launch);
  if (!process.ok()) return Unverified(command, Refusal(o.log_path, process.status()));
  HttpOptions http;
  http.url = launch.url;
  http.timeout_s = o.request_timeout_s;
  auto v = CheckProbes(http, **cap, o);
  if (!v.ok()) return Unverified(command, v.status().message());
  v->command = command, v->llama_server = *server, v->seconds = NowSeconds() - t0;
  return *v;
}

}  // namespace flipscope
