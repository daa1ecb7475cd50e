// compare_bench: the compare stage's benchmark helper (driven by bench/compare_bench.py).
//   compare_bench generate OUT_DIR [--tokens N] [--stride S] [--vocab V] [--store f32|bf16]
//       writes OUT_DIR/base-<store>.safetensors and OUT_DIR/cand-<store>.safetensors with the
//       capture writer: synthetic logits (a noise floor, one peaked token, the candidate a
//       slightly perturbed copy with some rows pushed to another token).
//   compare_bench bandwidth [--mib N] [--threads T]
//       the machine's memory bandwidth: a read pass over a buffer (1 thread and T threads) and
//       memcpy, in GB/s (1e9 bytes), as JSON.
//   compare_bench kernel [--vocab V] [--rows N]
//       one thread's row kernels alone (rows already in memory), in thread CPU time, for every
//       instruction set this CPU runs: ms per row pair, rows/s and GB/s of F32 logits.
//   compare_bench compare BASE CAND [--threads T] [--repeat R]
//       the compare stage over two captures (CompareFiles, as `flipscope compare` runs it), R times:
//       each run's wall seconds, the metric pass's GB/s of logits and the flips, as JSON (for a
//       machine that has no flipscope binary, e.g. a GPU host measured through a carried binary).
#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "capture/capture.h"
#include "compare/compare.h"

namespace {
using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
// This thread's CPU seconds: the kernel figures stay meaningful on a busy machine.
double ThreadCpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Value of "--name" in argv, or fallback.
std::string Flag(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 2; i + 1 < argc; ++i)
    if (argv[i] == name) return argv[i + 1];
  return fallback;
}

// splitmix64: a cheap, seedable stream (std::normal_distribution would dominate the run).
struct Rng {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Roughly normal: the sum of four uniforms, centred and scaled to unit variance.
  float Gauss() {
    uint64_t r = Next();
    double s = 0;
    for (int k = 0; k < 4; ++k) s += double((r >> (16 * k)) & 0xffff) / 65535.0;
    return float((s - 2.0) * 1.7320508);
  }
  double Uniform() { return double(Next() >> 11) * 0x1p-53; }
};

void FillRows(int32_t position, std::vector<float>& base, std::vector<float>& cand) {
  Rng rng{uint64_t(position) * 0x2545f4914f6cdd1dULL + 1};
  const size_t n = base.size();
  for (auto& x : base) x = 2.0f * rng.Gauss();
  base[size_t(rng.Next() % n)] += float(6 + 10 * rng.Uniform());
  for (size_t i = 0; i < n; ++i) cand[i] = base[i] + 0.05f * rng.Gauss();
  if (rng.Uniform() < 0.02) cand[size_t(rng.Next() % n)] += 12.0f;
}

int Generate(int argc, char** argv) {
  using namespace flipscope;
  const std::string dir = argv[2];
  const int tokens = std::stoi(Flag(argc, argv, "--tokens", "100000"));
  const int stride = std::stoi(Flag(argc, argv, "--stride", "32"));
  const int vocab = std::stoi(Flag(argc, argv, "--vocab", "151936"));
  const std::string store = Flag(argc, argv, "--store", "f32");
  std::filesystem::create_directories(dir);
  CaptureLayout layout;
  for (int i = 0; i < tokens; ++i) layout.tokens.push_back(int32_t((uint64_t(i) * 2654435761ULL) % uint64_t(vocab)));
  for (int p = 0; p + 1 < tokens; p += stride) layout.positions.push_back(p);
  layout.n_vocab = vocab;
  if (store != "f32" && store != "bf16") return std::fprintf(stderr, "--store must be f32 or bf16\n"), 2;
  layout.store = store == "bf16" ? StoreDtype::kBF16 : StoreDtype::kF32;
  nlohmann::json manifest = {{"workload", {{"spans", nlohmann::json::array()}}}, {"generator", "compare_bench"}};
  std::vector<std::unique_ptr<CaptureWriter>> writers;
  for (const char* side : {"base", "cand"}) {
    auto w = CaptureWriter::Create(fmt::format("{}/{}-{}.safetensors", dir, side, store), layout, manifest);
    if (!w.ok()) return std::fprintf(stderr, "%s\n", w.status().message().c_str()), 1;
    writers.push_back(std::move(w).value());
  }
  std::vector<float> base(static_cast<size_t>(vocab)), cand(static_cast<size_t>(vocab));
  auto t0 = Clock::now();
  for (size_t i = 0; i < layout.positions.size(); ++i) {
    FillRows(layout.positions[i], base, cand);
    for (auto [w, row] : {std::pair{writers[0].get(), &base}, {writers[1].get(), &cand}}) {
      Status s = w->WriteRow(int64_t(i), *row);
      if (!s.ok()) return std::fprintf(stderr, "%s\n", s.message().c_str()), 1;
    }
  }
  for (auto& w : writers) {
    Status s = w->Commit();
    if (!s.ok()) return std::fprintf(stderr, "%s\n", s.message().c_str()), 1;
  }
  fmt::print(
      "{}\n",
      nlohmann::json{{"probes", layout.positions.size()}, {"vocab", vocab}, {"store", store}, {"seconds", Since(t0)}}
          .dump());
  return 0;
}

// GB/s of a read pass over buf split among `threads` threads (the best of 3 passes).
double ReadBandwidth(const std::vector<uint64_t>& buf, int threads) {
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<uint64_t> sums(static_cast<size_t>(threads));
    auto t0 = Clock::now();
    std::vector<std::thread> pool;
    const size_t per = buf.size() / size_t(threads);
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        uint64_t s = 0;
        for (size_t i = size_t(t) * per; i < size_t(t + 1) * per; ++i) s += buf[i];
        sums[size_t(t)] = s;
      });
    for (auto& th : pool) th.join();
    const double secs = Since(t0);
    if (sums[0] == 42) std::puts("");  // keeps the sums alive
    best = std::max(best, double(per * size_t(threads) * 8) / secs / 1e9);
  }
  return best;
}

int Bandwidth(int argc, char** argv) {
  const size_t mib = std::stoul(Flag(argc, argv, "--mib", "2048"));
  const int threads =
      std::stoi(Flag(argc, argv, "--threads", std::to_string(std::max(1u, std::thread::hardware_concurrency()))));
  std::vector<uint64_t> a(mib * 1024 * 1024 / 8), b(a.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = i * 0x9e3779b97f4a7c15ULL;
  double copy = 0;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), a.size() * 8);
    copy = std::max(copy, double(a.size() * 8) / Since(t0) / 1e9);
  }
  fmt::print("{}\n", nlohmann::json{{"buffer_mib", mib},
                                    {"threads", threads},
                                    {"read_gb_per_s_1_thread", ReadBandwidth(a, 1)},
                                    {"read_gb_per_s", ReadBandwidth(a, threads)},
                                    {"memcpy_gb_per_s", copy}}
                         .dump());
  return b[7] == 1 ? 1 : 0;
}

// One thread's kernel time per row pair under the current instruction set.
nlohmann::json KernelTimes(int vocab, int rows) {
  using namespace flipscope::compare;
  std::vector<float> base(static_cast<size_t>(vocab)), cand(static_cast<size_t>(vocab));
  RowScratch scratch;
  double sink = 0, scan = 0, full = 0;
  for (int r = 0; r < rows; ++r) {
    FillRows(r, base, cand);
    const double t0 = ThreadCpu();
    RowSummary sb = ScanRow(base), sc = ScanRow(cand);
    const double t1 = ThreadCpu();
    sink += CompareFullRows(base, cand, sb, sc, sb.top_ids[0], sc.top_ids[0], scratch).kl_base_cand;
    scan += t1 - t0;
    full += ThreadCpu() - t1;
  }
  const double bytes = double(rows) * vocab * 8;  // both rows, F32
  return {{"scan_ms_per_row_pair", 1e3 * scan / rows},
          {"divergence_ms_per_row_pair", 1e3 * full / rows},
          {"rows_per_s", rows / (scan + full)},
          {"gb_per_s", bytes / (scan + full) / 1e9},
          {"kl_sum", sink}};
}

int Kernel(int argc, char** argv) {
  const int vocab = std::stoi(Flag(argc, argv, "--vocab", "151936"));
  const int rows = std::stoi(Flag(argc, argv, "--rows", "200"));
  nlohmann::json out = {{"vocab", vocab}, {"rows", rows}, {"default_isa", flipscope::compare::KernelIsa()}};
  for (const char* isa : {"avx512", "avx2", "baseline"})
    if (flipscope::compare::SetKernelIsa(isa).ok()) out[isa] = KernelTimes(vocab, rows);
  fmt::print("{}\n", out.dump());
  return 0;
}

int CompareRuns(int argc, char** argv) {
  flipscope::CompareOptions o;
  o.threads = std::stoi(Flag(argc, argv, "--threads", "0"));
  const int repeat = std::stoi(Flag(argc, argv, "--repeat", "3"));
  nlohmann::json runs = nlohmann::json::array();
  for (int r = 0; r < repeat; ++r) {
    auto t0 = Clock::now();
    auto c = flipscope::CompareFiles(argv[2], argv[3], o);
    if (!c.ok()) {
      std::fprintf(stderr, "compare_bench: %s\n", c.status().message().c_str());
      return 1;
    }
    runs.push_back({{"seconds", Since(t0)},
                    {"metric_seconds", c->seconds},
                    {"threads", c->threads},
                    {"isa", c->isa},
                    {"gb_per_s", c->seconds > 0 ? double(c->logit_bytes) / c->seconds / 1e9 : 0.0},
                    {"flips", c->overall.flips},
                    {"probes", c->probes_compared}});
  }
  fmt::print("{}\n", runs.dump());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "generate" && argc > 2) return Generate(argc, argv);
  if (mode == "bandwidth") return Bandwidth(argc, argv);
  if (mode == "kernel") return Kernel(argc, argv);
  if (mode == "compare" && argc > 3) return CompareRuns(argc, argv);
  std::fprintf(stderr,
               "usage: compare_bench generate OUT_DIR [--tokens N] [--stride S] [--vocab V] [--store f32|bf16]\n"
               "       compare_bench bandwidth [--mib N] [--threads T]\n"
               "       compare_bench kernel [--vocab V] [--rows N]\n"
               "       compare_bench compare BASE CAND [--threads T] [--repeat R]\n");
  return 2;
}
