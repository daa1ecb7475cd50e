// Server configurations in a run: the server's lifetime around its captures (launched ones are
// started, health-checked and stopped) and the futures at the forks, decoded over HTTP while the
// server is up and kept beside the capture like the llama engine's (CAPTURE.forks.json).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "experiment/steps.h"
#include "util/util.h"

namespace flipscope {

ServerSession::ServerSession(const ConfigSpec& c, std::string log_path, Log log)
    : spec_(c.server), log_(std::move(log_path)), status_(std::move(log)) {
  opts_ = spec_.http;
  opts_.url = spec_.url;
  if (!spec_.launch.empty())
    opts_.launch = {{"command", spec_.launch}, {"env", spec_.env}, {"health", spec_.health}, {"port", spec_.port}};
}

ServerSession::~ServerSession() = default;

Result<HttpOptions> ServerSession::Up() {
  if (spec_.launch.empty() || process_) return opts_;
  int port = spec_.port;
  if (port == 0 && spec_.launch.find("{port}") != std::string::npos) {
    FS_ASSIGN_OR_RETURN(port, FreePort());
  }
  LaunchOptions lo;
  lo.command = spec_.launch;
  for (size_t at = lo.command.find("{port}"); at != std::string::npos; at = lo.command.find("{port}", at))
    lo.command.replace(at, 6, std::to_string(port));
  lo.env = spec_.env;
  lo.url = spec_.url.empty() ? fmt::format("http://127.0.0.1:{}", port) : spec_.url;
  lo.health = spec_.health;
  lo.startup_timeout_s = spec_.startup_timeout_s;
  lo.stop_timeout_s = spec_.stop_timeout_s;
  lo.log_path = log_;
  status_.Info(fmt::format("  starting the server: {}", lo.command));
  FS_ASSIGN_OR_RETURN(process_, ServerProcess::Start(lo));
  status_.Info(fmt::format("  the server answered {} after {:.1f} s", lo.url + lo.health, process_->startup_seconds()));
  opts_.url = lo.url;
  opts_.launched = {{"command", lo.command},
                    {"url", lo.url},
                    {"pid", process_->pid()},
                    {"log", log_},
                    {"startup_s", process_->startup_seconds()}};
  ServerProcess* p = process_.get();
  opts_.alive = [p] { return p->Alive(); };
  return opts_;
}

namespace {

// Decodes the future at one point: the prompt is tokens[0..p] plus `first`; with the call
// extension the server decodes up to its cap and the future keeps what the extension allows
// (a greedy future does not depend on where it stops).
Result<Future> HttpFuture(HttpEngine& engine, std::span<const int32_t> tokens, int32_t p, int32_t first,
                          float first_prob, const BranchSettings& s, const ExtendFn& extend) {
  const int cap = std::max(s.options.max_tokens, s.options.max_call_tokens);
  Future f;
  f.tokens = {first};
  f.probs = {first_prob};
  bool server_stopped = false;  // it wrote fewer tokens than asked for: its own stop (end of turn)
  if (cap > 1) {
    std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + p + 1);
    prompt.push_back(first);
    FS_ASSIGN_OR_RETURN(Future g, engine.Complete(prompt, cap - 1));
    f.tokens.insert(f.tokens.end(), g.tokens.begin(), g.tokens.end());
    f.probs.insert(f.probs.end(), g.probs.begin(), g.probs.end());
    f.seconds = g.seconds;
    server_stopped = int(g.tokens.size()) < cap - 1;
  }
  size_t keep = std::min(f.tokens.size(), size_t(s.options.max_tokens));
  while (keep < f.tokens.size() && extend && extend(p, std::span<const int32_t>(f.tokens).first(keep))) ++keep;
  // Ended only where the server stopped by itself and nothing of its text was cut here.
  f.stop = server_stopped && keep == f.tokens.size() ? FutureStop::kEnd : FutureStop::kBudget;
  f.tokens.resize(keep);
  f.probs.resize(keep);
  return f;
}

}  // namespace

Status DecodeOverHttp(const HttpOptions& opts, const std::string& capture, const std::string& base0,
                      const std::vector<int32_t>& points, const ForkFirst& first_at, const BranchSettings& s,
                      const Log& log, DecodedFutures* out) {
  FS_ASSIGN_OR_RETURN(auto cap, CaptureReader::Open(capture));
  const int32_t n_vocab = int32_t(cap->manifest().model.n_vocab);
  FS_ASSIGN_OR_RETURN(auto engine, HttpEngine::Create(opts, n_vocab));
  FS_ASSIGN_OR_RETURN(ExtendFn extend, CallExtension(base0, s.options.max_tokens, s.options.max_call_tokens));
  out->max_tokens = s.options.max_tokens;
  out->max_call_tokens = s.options.max_call_tokens;
  out->source = capture;
  Progress bar(log, "forks over HTTP", points.size(), "fork");
  for (size_t i = 0; i < points.size(); ++i) {
    const ForkToken t = first_at(points[i]);
    auto f = HttpFuture(*engine, cap->tokens(), points[i], t.id, t.prob, s, extend);
    if (!f.ok()) return f.status().Prefixed(fmt::format("the future at position {}", points[i]));
    out->at[points[i]] = std::move(*f);
    out->reproduced[points[i]] = t.reproduced;
    bar.Update(i + 1);
  }
  bar.Finish();
  return WriteDecoded(capture, base0, *out);
}

Result<std::vector<int32_t>> FlipPoints(const std::string& base0, const std::string& capture, const BranchSettings& s) {
  FS_ASSIGN_OR_RETURN(auto b, CaptureReader::Open(base0));
  FS_ASSIGN_OR_RETURN(auto c, CaptureReader::Open(capture));
  FS_ASSIGN_OR_RETURN(ForkFilter where, ForkWhere(*b, s.options.fork_where));
  FirstFlips rule(s.options.max_branches, std::move(where), s.options.pick, int64_t(b->tokens().size()));
  std::vector<int32_t> out;
  for (const Flip& f : Flips(b->positions(), b->argmax(), c->positions(), c->argmax()))
    if (rule.Take(f.position, f.base_token, f.cand_token)) out.push_back(f.position);
  return out;
}

Result<ForkFirst> FirstTokens(const std::string& capture, const std::string& reference) {
  FS_ASSIGN_OR_RETURN(std::shared_ptr<CaptureReader> cap, CaptureReader::Open(capture));
  std::shared_ptr<CaptureReader> ref = cap;
  if (!reference.empty() && reference != capture) {
    FS_ASSIGN_OR_RETURN(ref, CaptureReader::Open(reference));
  }
  if (!ref->truncated()) return Status::Error(reference + ": not a server's (top-k) capture");
  return ForkFirst([cap, ref](int32_t p) {
    auto pos = ref->positions();
    const size_t i = size_t(std::lower_bound(pos.begin(), pos.end(), p) - pos.begin());
    ForkToken t;
    t.id = ref->argmax()[i];
    t.prob = std::exp(ref->TopKLogprobs(int64_t(i))[0]);  // a truncated row is sorted: the argmax's own
    t.reproduced = cap == ref || (i < cap->digest().size() && cap->digest()[i] == ref->digest()[i]);
    return t;
  });
}

}  // namespace flipscope
