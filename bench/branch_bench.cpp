// Forking against re-prefilling: the branch stage's one side pass (RunSide) over a workload,
// with N branch points spread evenly over it (or the flips of two captures), once forking the
// KV cache at each point and once re-prefilling each point's prefix. Prints both times, the ratio,
// and whether both ways decoded the same futures. docs/branch.md quotes its output.
//
// usage: branch_bench MODEL WORKLOAD [--points N] [--max-tokens N] [--stride N] [-t THREADS]
//                     [--flips BASE.safetensors CAND.safetensors]
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "branch/branch.h"
#include "records/engine_records.h"
#include "capture/capture.h"
#include "util/util.h"
#include "workload/workload.h"

using namespace flipscope;

namespace {

struct Args {
  std::string model, workload, base, cand;
  int points = 16, max_tokens = 64, stride = 32, threads = 0;
};

Result<Args> Parse(int argc, char** argv) {
  Args a;
  if (argc < 3)
    return Status::Error(
        "usage: branch_bench MODEL WORKLOAD [--points N] [--max-tokens N] [--stride N] "
        "[-t THREADS] [--flips BASE CAND]");
  a.model = argv[1];
  a.workload = argv[2];
  for (int i = 3; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : ""; };
    if (k == "--points")
      a.points = std::atoi(next());
    else if (k == "--max-tokens")
      a.max_tokens = std::atoi(next());
    else if (k == "--stride")
      a.stride = std::atoi(next());
    else if (k == "-t")
      a.threads = std::atoi(next());
    else if (k == "--flips")
      a.base = next(), a.cand = next();
    else
      return Status::Error("unknown argument " + k);
  }
  return a;
}

// Branch points and first tokens: the flips of two captures (base side), or N evenly spaced probes.
Status ChoosePoints(const Args& a, const std::vector<int32_t>& probes, SideInputs* in) {
  if (!a.base.empty()) {
    FS_ASSIGN_OR_RETURN(auto b, CaptureReader::Open(a.base));
    FS_ASSIGN_OR_RETURN(auto c, CaptureReader::Open(a.cand));
    for (size_t i = 0; i < b->positions().size() && i < c->positions().size(); ++i)
      if (b->argmax()[i] != c->argmax()[i] && b->positions()[i] == c->positions()[i]) {
        in->points.push_back(b->positions()[i]);
        in->firsts.push_back(b->argmax()[i]);
      }
    return Status::Ok();
  }
  for (int k = 0; k < a.points; ++k) {
    int32_t p = probes[size_t((k + 1) * int64_t(probes.size()) / (a.points + 1))];
    in->points.push_back(p);
    in->firsts.push_back(in->tokens[size_t(p) + 1]);  // the transcript's own next token
  }
  return Status::Ok();
}

Status Run(const Args& a) {
  InitLlamaLogging(false);  // llama.cpp's log only in error messages
  FS_ASSIGN_OR_RETURN(Workload w, LoadWorkload(a.workload, a.model, WorkloadOptions{}));
  Knobs k;
  k.flash_attn = FlashAttn::kOn;
  k.n_threads = a.threads;
  FS_ASSIGN_OR_RETURN(auto engine, LlamaEngine::Create(a.model, k, 2));
  std::vector<int32_t> probes;
  for (int32_t p = 0; p + 1 < int32_t(w.tokens.size()); p += a.stride) probes.push_back(p);
  SideInputs in;
  in.tokens = w.tokens;
  in.probes = probes;
  in.max_tokens = a.max_tokens;
  FS_RETURN_IF_ERROR(ChoosePoints(a, probes, &in));
  fmt::print("{} tokens, {} probes, {} branch points x {} tokens, {} threads, {}\n", w.tokens.size(), probes.size(),
             in.points.size(), a.max_tokens, flipscope::KnobText(engine->Describe().knobs.at("threads")), a.model);
  in.allow_fork = true;
  FS_ASSIGN_OR_RETURN(SidePass fork, RunSide(*engine, in));
  fmt::print("fork:       {:8.2f} s\n", fork.seconds);
  in.allow_fork = false;
  FS_ASSIGN_OR_RETURN(SidePass fresh, RunSide(*engine, in));
  fmt::print("re-prefill: {:8.2f} s\n", fresh.seconds);
  size_t same = 0;
  for (size_t i = 0; i < in.points.size(); ++i) same += fork.tokens[i] == fresh.tokens[i];
  fmt::print("ratio re-prefill / fork: {:.2f}x; identical futures: {} of {}\n", fresh.seconds / fork.seconds, same,
             in.points.size());
  fmt::print("{}\n", nlohmann::json{{"tokens", w.tokens.size()},
                                    {"points", in.points.size()},
                                    {"max_tokens", a.max_tokens},
                                    {"fork_s", fork.seconds},
                                    {"reprefill_s", fresh.seconds},
                                    {"identical_futures", same}}
                         .dump());
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  auto a = Parse(argc, argv);
  Status st = a.ok() ? Run(*a) : a.status();
  if (!st.ok()) {
    fmt::print(stderr, "branch_bench: error: {}\n", st.message());
    return 1;
  }
  return 0;
}
