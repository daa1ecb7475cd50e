// A 100K-token session through capture and compare on the tiny model: the rows are streamed, so
// the process's peak memory stays within a bound that does not grow with the session beyond the
// model, its KV cache and one batch of rows (docs/performance.md, "Scale").
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <cstdio>
#include <random>

#include "capture/capture.h"
#include "compare/compare.h"
#include "testing/tiny_model.h"

using namespace flipscope;
namespace fs = std::filesystem;

namespace {
constexpr int kTokens = 100000;
// The bound: the tiny model's F16 KV cache at 100,352 cells is 2 layers x 100,352 x 32 dims x
// 2 (K, V) x 2 B = 25 MiB, its compute buffers a few MiB more, the token and probe lists under
// 2 MiB; the rest is the process (gtest, llama.cpp, libstdc++) at about 60 MiB. A stage that held
// every row (3,125 rows of the tiny vocabulary) would not cross it, but one that kept per-token
// state in JSON or materialised the attention (100K x 100K) would.
constexpr double kPeakMiB = 256;

double PeakRssMiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;
}
}  // namespace

TEST(CaptureScale, HundredThousandTokensStayWithinTheMemoryBound) {
  const std::string dir = fixtures::TempPath("capture-scale");
  fs::remove_all(dir);
  fs::create_directories(dir);
  fixtures::TinyModelOptions mo;
  mo.n_ctx_train = 131072;
  ASSERT_TRUE(fixtures::WriteTinyModel(dir + "/tiny.gguf", mo).ok());
  {
    std::ofstream w(dir + "/session.ids");
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> id(3, 250);  // ordinary pieces, no control tokens
    for (int i = 0; i < kTokens; ++i) w << id(rng) << (i % 32 == 31 ? '\n' : ' ');
  }
  CaptureRequest r;
  r.model_path = dir + "/tiny.gguf";
  r.workload_path = dir + "/session.ids";
  r.out_path = dir + "/base.safetensors";
  r.knobs.n_ctx = kTokens + 352;
  r.knobs.n_threads = 2;
  r.plan.stride = 32;
  r.log.bars = false;
  auto made = RunCapture(r);
  ASSERT_TRUE(made.ok()) << made.status().message();
  const double after_capture = PeakRssMiB();

  // The capture against itself: every row is read twice and streamed through the kernels.
  CompareOptions co;
  co.window = 8192;
  auto c = CompareFiles(r.out_path, r.out_path, co);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->probes_compared, (kTokens - 2) / 32 + 1);  // 0, 32, ..., the last at most n-2
  EXPECT_EQ(c->bit_identical, c->probes_compared);
  EXPECT_EQ(c->overall.flips, 0);
  EXPECT_EQ(c->windows.size(), size_t((kTokens + 8191) / 8192));

  const double peak = PeakRssMiB();
  RecordProperty("peak_rss_mib_after_capture", std::to_string(after_capture));
  RecordProperty("peak_rss_mib", std::to_string(peak));
  std::printf("peak RSS: %.1f MiB after the capture, %.1f MiB after the compare (bound %.0f)\n", after_capture, peak, kPeakMiB);
  EXPECT_LT(peak, kPeakMiB) << "capture peak " << after_capture << " MiB";
  fs::remove_all(dir);
}
