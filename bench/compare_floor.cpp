// compare_floor: the least arithmetic any FP64 comparison of two full logits rows needs, timed on
// one thread, against which compare's row kernels (compare_bench kernel) and the machine's read
// bandwidth (compare_bench bandwidth) are read (docs/performance.md, "Compare").
//   compare_floor [--vocab V] [--rows N]
// Every metric compare reports (both KLs, JS, entropies) needs each row's probabilities in FP64,
// so at least one FP64 exp per vocabulary entry of each row, after each row's maximum. This does
// exactly that and nothing else (no top-k, no logs, no divergences): a pass for the maxima, a pass
// of exp(x - max) summed, with the AVX-512 exp compare itself uses (2^(j/8) table, degree-7
// polynomial). Rows are already in cache; thread CPU time. Prints JSON: ms per row pair for each
// pass and GB/s of F32 logits (both rows' bytes over the time), or an error on a CPU without
// AVX-512.
#include <fmt/format.h>
#include <time.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compare/simd.h"

namespace {

double ThreadCpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

using L = flipscope::compare::simd::Lanes<8>;

// The row's maximum, 16 floats a step (one AVX-512 register).
__attribute__((target("arch=x86-64-v4"))) float RowMax(const float* x, size_t n) {
  typedef float VF16 __attribute__((vector_size(64)));
  VF16 m;
  for (int i = 0; i < 16; ++i) m[i] = -INFINITY;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    VF16 v;
    std::memcpy(&v, x + i, sizeof(v));
    m = v > m ? v : m;
  }
  float best = -INFINITY;
  for (int k = 0; k < 16; ++k) best = std::max(best, m[k]);
  for (; i < n; ++i) best = std::max(best, x[i]);
  return best;
}

// sum exp(x - max) in FP64, 8 entries a step, compare's exp (ExpTable).
__attribute__((target("arch=x86-64-v4"))) double ExpSum(const float* x, size_t n, float max) {
  using namespace flipscope::compare::simd;
  L::V acc = Splat<L::V>(0.0), m = Splat<L::V>(double(max));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) acc += ExpTable<L>(LoadF<L>(x + i) - m);
  double s = Sum(acc);
  for (; i < n; ++i) s += std::exp(double(x[i]) - double(max));
  return s;
}

std::string Flag(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512dq")) {
    std::fprintf(stderr, "compare_floor: this CPU has no AVX-512 (the floor is measured with compare's AVX-512 exp)\n");
    return 1;
  }
  const size_t vocab = std::stoul(Flag(argc, argv, "--vocab", "151936"));
  const int rows = std::stoi(Flag(argc, argv, "--rows", "400"));
  // Logit-like rows: a spread of about 30 nats, different each row so nothing is folded away.
  std::vector<float> a(vocab), b(vocab);
  double max_s = 0, exp_s = 0, sink = 0;
  for (int r = 0; r < rows; ++r) {
    for (size_t i = 0; i < vocab; ++i) {
      const uint32_t h = uint32_t(i * 2654435761u + uint32_t(r) * 40503u);
      a[i] = float(h % 30011) * 1e-3f - 20.0f;
      b[i] = a[i] + float(h % 7) * 1e-4f;
    }
    const double t0 = ThreadCpu();
    const float ma = RowMax(a.data(), vocab), mb = RowMax(b.data(), vocab);
    const double t1 = ThreadCpu();
    sink += ExpSum(a.data(), vocab, ma) + ExpSum(b.data(), vocab, mb);
    const double t2 = ThreadCpu();
    max_s += t1 - t0, exp_s += t2 - t1;
  }
  const double bytes = double(rows) * double(vocab) * 8;  // both rows, F32
  const nlohmann::json out = {{"vocab", vocab},
                              {"rows", rows},
                              {"max_ms_per_row_pair", 1e3 * max_s / rows},
                              {"exp_ms_per_row_pair", 1e3 * exp_s / rows},
                              {"floor_gb_per_s", bytes / (max_s + exp_s) / 1e9},
                              {"exp_only_gb_per_s", bytes / exp_s / 1e9},
                              {"sink", sink}};
  fmt::print("{}\n", out.dump());
  return 0;
}
