// served_bench: the decode steps of a served replay against llama.cpp's own token-generation loop
// on the same model, threads and context, side by side in one run (docs/served.md).
//
// The bare loop runs the served schedule with llama.h alone: the prefill segments untimed, then
// each decode step timed as a generation step is (one llama_decode of one token at its position,
// logits out, llama.cpp's greedy sampler), at the same positions over the same cache. The served
// side is `flipscope capture --replay served` with a probe at every position, so every decode step
// also hands its row to the capture's row workers (copied out; the workers check, digest and write
// it while the next steps run); its manifest's served.decode_s times the steps from their
// llama_decode to their row handed over. Then the whole served capture
// against the prefill capture at the default stride.
//   served_bench MODEL WORKLOAD [--chat-template NAME] [-t N] [--rounds R] [-fa on|off]
#include <fmt/format.h>
#include <llama.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "capture/capture.h"
#include "util/util.h"

using namespace flipscope;

namespace {

// Decode-step tokens/s of the bare generation loop over the served schedule.
double BareLoop(const std::string& model_path, const std::vector<int32_t>& tokens, const std::vector<uint8_t>& written,
                const nlohmann::json& knobs, int64_t* steps) {
  llama_model* model = llama_model_load_from_file(model_path.c_str(), llama_model_default_params());
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = knobs["ctx_size"].get<uint32_t>();
  cp.n_batch = knobs["batch_size"].get<uint32_t>();
  cp.n_ubatch = knobs["ubatch_size"].get<uint32_t>();
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = knobs["threads"].get<int>();
  cp.flash_attn_type = knobs["flash_attn"] == "on" ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.kv_unified = true;
  cp.swa_full = true;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!model || !ctx) {
    fmt::print(stderr, "served_bench: llama.cpp could not load {}\n", model_path);
    std::exit(1);
  }
  llama_sampler* greedy = llama_sampler_init_greedy();
  const int32_t n = int32_t(tokens.size()), nb = int32_t(cp.n_batch);
  auto step = [&](int32_t p) { return written[size_t(p)] && p + 1 < n && written[size_t(p + 1)]; };
  llama_batch batch = llama_batch_init(nb, 0, 1);
  auto decode = [&](int32_t begin, int32_t end, bool out) {
    batch.n_tokens = end - begin;
    for (int32_t p = begin; p < end; ++p) {
      const int32_t j = p - begin;
      batch.token[j] = tokens[size_t(p)];
      batch.pos[j] = p;
      batch.n_seq_id[j] = 1;
      batch.seq_id[j][0] = 0;
      batch.logits[j] = out;
    }
    if (llama_decode(ctx, batch) != 0) std::exit(1);
  };
  double decode_s = 0;
  *steps = 0;
  for (int32_t p = 0; p < n;) {
    if (step(p)) {
      const double t0 = NowSeconds();
      decode(p, p + 1, true);
      (void)llama_sampler_sample(greedy, ctx, -1);
      decode_s += NowSeconds() - t0;
      ++*steps;
      ++p;
      continue;
    }
    int32_t end = p;
    while (end < n && !step(end)) ++end;
    for (int32_t b = p; b < end; b += nb) decode(b, std::min(end, b + nb), false);
    p = end;
  }
  llama_batch_free(batch);
  llama_sampler_free(greedy);
  llama_free(ctx);
  llama_model_free(model);
  return decode_s > 0 ? double(*steps) / decode_s : 0;
}

nlohmann::json Capture(CaptureRequest req, const CaptureSource& src) {
  auto m = RunCapture(req, src);
  if (!m.ok()) {
    fmt::print(stderr, "served_bench: {}\n", m.status().message());
    std::exit(1);
  }
  std::filesystem::remove(req.out_path);
  return m->ToJson();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fmt::print(stderr,
               "usage: served_bench MODEL WORKLOAD [--chat-template NAME] [-t N] [--rounds R] [-fa on|off]\n");
    return 2;
  }
  CaptureRequest req;
  req.model_path = argv[1];
  req.workload_path = argv[2];
  req.knobs.n_threads = 2;
  req.log = Log::Quiet();
  int rounds = 3;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--chat-template") req.workload.chat_template = v;
    else if (k == "-t") req.knobs.n_threads = std::stoi(v);
    else if (k == "--rounds") rounds = std::stoi(v);
    else if (k == "-fa") req.knobs.flash_attn = v == "on" ? FlashAttn::kOn : FlashAttn::kOff;
    else {
      fmt::print(stderr, "served_bench: unknown option {}\n", k);
      return 2;
    }
  }
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  auto src = PrepareCapture(req);
  if (!src.ok()) {
    fmt::print(stderr, "served_bench: {}\n", src.status().message());
    return 1;
  }
  auto written = ServedWritten(src->workload, req.workload_path);
  if (!written.ok()) {
    fmt::print(stderr, "served_bench: {}\n", written.status().message());
    return 1;
  }
  const std::string dir = std::filesystem::temp_directory_path() / fmt::format("served_bench.{}", getpid());
  std::filesystem::create_directories(dir);

  CaptureRequest served = req;
  served.knobs.replay = Replay::kServed;
  served.plan.stride = 1;  // every decode step hands a row to the file
  served.out_path = dir + "/served-all.safetensors";
  fmt::print("model {}  workload {} ({} tokens)  threads {}\n", std::filesystem::path(req.model_path).filename().string(),
             req.workload_path, src->workload.tokens.size(), req.knobs.n_threads);
  fmt::print("round  bare_loop_tok/s  served_steps_tok/s  ratio  (decode steps per pass: bare; served)\n");
  std::vector<double> ratios;
  for (int r = 1; r <= rounds; ++r) {
    const nlohmann::json m = Capture(served, *src);
    int64_t steps = 0;
    const double bare = BareLoop(req.model_path, src->workload.tokens, *written, m["knobs"], &steps);
    const double tps = m["served"]["decode_tokens_per_s"].get<double>();
    ratios.push_back(tps / bare);
    fmt::print("{}  {:.1f}  {:.1f}  {:.3f}  ({} steps; served {})\n", r, bare, tps, tps / bare, steps,
               m["served"]["fed_singly"].get<int64_t>());
  }
  std::sort(ratios.begin(), ratios.end());
  fmt::print("median ratio served/bare: {:.3f}\n", ratios[ratios.size() / 2]);

  // The whole capture at the default probe plan (stride 32): prefill against served.
  CaptureRequest pre = req;
  pre.out_path = dir + "/prefill.safetensors";
  served.plan = pre.plan;
  served.out_path = dir + "/served.safetensors";
  const nlohmann::json mp = Capture(pre, *src), ms = Capture(served, *src);
  fmt::print("whole capture (stride {}): prefill {:.2f} s ({:.1f} tok/s), served {:.2f} s ({:.1f} tok/s), {:.1f}x\n",
             pre.plan.stride, mp["timings"]["prefill_s"].get<double>(), mp["timings"]["tokens_per_s"].get<double>(),
             ms["timings"]["prefill_s"].get<double>(), ms["timings"]["tokens_per_s"].get<double>(),
             ms["timings"]["prefill_s"].get<double>() / mp["timings"]["prefill_s"].get<double>());
  std::filesystem::remove_all(dir);
  return 0;
}
