// exact_gpu: the exact engine on a CUDA device (docs/exact.md, "On a GPU").
//   exact_gpu check -m MODEL (-w WORKLOAD | --random N) [--dev CUDA0] [--mutation M]
//     the CPU engine (the reference implementation) and the device over the same tokens: the
//     same top-1 at every probe, max |Δlogit| <= 1e-9 and KL(cpu||device) <= 1e-15, or exit 1.
//   exact_gpu cost -m MODEL --tokens N [--probes P] [--dev CUDA0]
//     one pass over N seeded random tokens: wall time, parts, operations, FP64 TFLOP/s, memory.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "exact/exact.h"
#include "records/engine_records.h"
#include "util/util.h"
#include "workload/workload.h"

namespace {

using flipscope::ExactEngine;
using flipscope::ExactOptions;
using flipscope::RowF64;
using flipscope::Status;

struct Rows {
  std::vector<std::vector<double>> logits;
};

// Every probe row of one pass, in FP64.
flipscope::Result<Rows> Run(ExactEngine& e, const std::vector<int32_t>& tokens, const std::vector<int32_t>& probes) {
  Rows r;
  Status st = e.PrefillF64(
      tokens, probes,
      [&](const RowF64& row) {
        r.logits.emplace_back(row.logits.begin(), row.logits.end());
        return Status::Ok();
      },
      nullptr);
  if (!st.ok()) return st;
  return r;
}

// log-softmax of a row, in FP64.
std::vector<double> LogSoftmax(const std::vector<double>& x) {
  const double mx = *std::max_element(x.begin(), x.end());
  double sum = 0;
  for (double v : x) sum += std::exp(v - mx);
  const double lse = mx + std::log(sum);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] - lse;
  return out;
}

// KL(softmax(x) || softmax(y)) for rows that differ by rounding: from d = x - y, as
// sum p d + log1p(sum p expm1(-d)) (lse(y) - lse(x) without subtracting two numbers near 10), so
// that the figure is the rows' difference, not the ~1e-15 rounding of two log-softmaxes.
double KlOfNearRows(const std::vector<double>& x, const std::vector<double>& y) {
  const std::vector<double> lp = LogSoftmax(x);
  double pd = 0, pe = 0;
  for (size_t j = 0; j < x.size(); ++j) {
    const double p = std::exp(lp[j]), d = x[j] - y[j];
    pd += p * d;
    pe += p * std::expm1(-d);
  }
  return pd + std::log1p(pe);
}

std::vector<int32_t> RandomTokens(int64_t n, int32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = d(rng);
  return t;
}

// The engine's last pass split into its parts, as the capture manifest's timings.parts has them.
std::string PartsText(const ExactEngine& e) {
  const auto parts = e.PartTimes();
  return parts ? flipscope::ToJson(*parts).dump() : "null";
}

int Fail(const Status& st) {
  std::fprintf(stderr, "exact_gpu: error: %s\n", st.message().c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The exact engine on a CUDA device: agreement with the CPU engine, and cost"};
  app.require_subcommand(1);
  std::string model, workload, chat_template, device = "CUDA0", mutation;
  int64_t random = 0, n_probes = 64, stride = 1, max_tokens = 0;
  std::vector<int64_t> lengths;
  int threads = 0, chunk = 8192, block = 0;
  uint64_t seed = 1;
  for (CLI::App* sub : {app.add_subcommand("check", "CPU against device"), app.add_subcommand("cost", "one pass")}) {
    sub->add_option("-m,--model", model, "GGUF model")->required();
    sub->add_option("--device,--dev", device, "CUDA device")->default_val("CUDA0");
    sub->add_option("-t,--threads", threads, "host threads (0: all)");
    sub->add_option("--seed", seed, "random tokens' seed");
  }
  CLI::App* check = app.get_subcommand("check");
  check->add_option("-w,--workload", workload, "workload file (its tokens)");
  check->add_option("--chat-template", chat_template, "template FILE or NAME");
  check->add_option("-n", max_tokens, "first N tokens of the workload (0: all)");
  check->add_option("--random", random, "N random tokens instead of a workload");
  check->add_option("--stride", stride, "a probe every STRIDE positions (and the last)");
  check->add_option("--mutation", mutation, "a deliberate error in the device pass: drop-bias or rope-mode");
  check->add_option("--chunk", chunk, "device tokens per chunk (small: the chunked paths on a short input)");
  check->add_option("--query-block", block, "device queries per attention block (0: automatic)");
  CLI::App* cost = app.get_subcommand("cost");
  cost->add_option("--tokens", lengths, "tokens (several: one pass each, one load)")->required();
  cost->add_option("--probes", n_probes, "probes (the last positions)");
  CLI11_PARSE(app, argc, argv);
  flipscope::InitLlamaLogging(false);

  ExactOptions gpu{.n_threads = threads,
                   .device = device,
                   .device_chunk = chunk,
                   .device_query_block = block,
                   .device_mutation = mutation};
  const double t0 = flipscope::NowSeconds();
  auto dev = ExactEngine::Create(model, gpu);
  if (!dev.ok()) return Fail(dev.status());
  const double load_s = flipscope::NowSeconds() - t0;
  const int32_t vocab = (*dev)->n_vocab();

  if (cost->parsed()) {
    fmt::print("model {}\nload_s {:.1f}\ndevice {}\n", model, load_s, flipscope::ToJson((*dev)->Describe())["device"].dump());
    for (const int64_t n_tokens : lengths) {
      const std::vector<int32_t> tokens = RandomTokens(n_tokens, vocab, seed);
      std::vector<int32_t> probes;
      for (int64_t p = std::max<int64_t>(0, n_tokens - n_probes); p < n_tokens; ++p) probes.push_back(int32_t(p));
      const double t1 = flipscope::NowSeconds();
      auto rows = Run(**dev, tokens, probes);
      if (!rows.ok()) return Fail(rows.status());
      const double pass_s = flipscope::NowSeconds() - t1;
      const flipscope::ExactWork w = (*dev)->Work(n_tokens, int64_t(probes.size()));
      double top = 0;  // mean top-1 probability: how peaked the model's distributions are
      for (const auto& r : rows->logits) {
        const auto ls = LogSoftmax(r);
        top += std::exp(*std::max_element(ls.begin(), ls.end()));
      }
      top /= double(rows->logits.size());
      fmt::print(
          "tokens {} probes {} pass_s {:.1f} | work_tflop matmul {:.1f} attention {:.1f} scan {:.2f} logits "
          "{:.2f} total {:.1f} | fp64_tflops {:.1f} | mean_top1_prob {:.4f} | planned_gib {:.1f}\nparts {}\n",
          n_tokens, probes.size(), pass_s, w.matmul / 1e12, w.attention / 1e12, w.scan / 1e12, w.logits / 1e12,
          w.total() / 1e12, w.total() / pass_s / 1e12, top,
          double((*dev)->DeviceBytes(n_tokens, int64_t(probes.size()))) / double(1 << 30), PartsText(**dev));
      std::fflush(stdout);
    }
    return 0;
  }

  std::vector<int32_t> tokens;
  if (random > 0) {
    tokens = RandomTokens(random, vocab, seed);
  } else {
    flipscope::WorkloadOptions wo;
    wo.chat_template = chat_template;
    auto w = flipscope::LoadWorkload(workload, model, wo);
    if (!w.ok()) return Fail(w.status());
    tokens.assign(w->tokens.begin(), w->tokens.end());
    if (max_tokens > 0 && int64_t(tokens.size()) > max_tokens) tokens.resize(size_t(max_tokens));
  }
  std::vector<int32_t> probes;
  for (int64_t p = 0; p < int64_t(tokens.size()); p += std::max<int64_t>(1, stride)) probes.push_back(int32_t(p));
  if (probes.back() != int32_t(tokens.size()) - 1) probes.push_back(int32_t(tokens.size()) - 1);
  auto cpu = ExactEngine::Create(model, ExactOptions{.n_threads = threads});
  if (!cpu.ok()) return Fail(cpu.status());
  double t1 = flipscope::NowSeconds();
  auto a = Run(**cpu, tokens, probes);
  if (!a.ok()) return Fail(a.status());
  const double cpu_s = flipscope::NowSeconds() - t1;
  t1 = flipscope::NowSeconds();
  auto b = Run(**dev, tokens, probes);
  if (!b.ok()) return Fail(b.status());
  const double dev_s = flipscope::NowSeconds() - t1;
  int64_t same = 0;
  double max_abs = 0, max_kl = 0;
  for (size_t i = 0; i < probes.size(); ++i) {
    const auto &x = a->logits[i], &y = b->logits[i];
    same += std::max_element(x.begin(), x.end()) - x.begin() == std::max_element(y.begin(), y.end()) - y.begin();
    for (size_t j = 0; j < x.size(); ++j) max_abs = std::max(max_abs, std::abs(x[j] - y[j]));
    max_kl = std::max(max_kl, KlOfNearRows(x, y));
  }
  const bool agree = same == int64_t(probes.size()) && max_abs <= 1e-9 && max_kl <= 1e-15;
  fmt::print(
      "{}{}: {} tokens, {} probes: top-1 same {}/{}, max |dlogit| {:.3g}, max KL {:.3g}; cpu {:.2f} s, {} "
      "{:.2f} s -> {}\n",
      model, mutation.empty() ? "" : " (mutation " + mutation + ")", tokens.size(), probes.size(), same, probes.size(),
      max_abs, max_kl, cpu_s, device, dev_s, agree ? "agree" : "DISAGREE");
  return agree ? 0 : 1;
}
