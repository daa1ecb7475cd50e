#include "capture/row_pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>

#include "testing/tiny_model.h"
#include "util/util.h"

using namespace flipscope;

namespace {

std::vector<float> RandomRow(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> r(n);
  for (float& v : r) v = d(rng);
  return r;
}

// BF16 by value: the nearer of the two BF16 neighbours of f (truncation and the next one up in
// magnitude), ties to the even one; independent of the bit trick under test.
uint16_t Bf16ByValue(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t lo = uint16_t(u >> 16), hi = uint16_t(lo + 1);
  const double dlo = std::abs(double(std::bit_cast<float>(uint32_t(lo) << 16)) - double(f));
  const double dhi = std::abs(double(std::bit_cast<float>(uint32_t(hi) << 16)) - double(f));
  if (dlo != dhi) return dlo < dhi ? lo : hi;
  return (lo & 1u) ? hi : lo;
}

}  // namespace

TEST(ScanRow, ArgmaxIsTheFirstMaximumAtEveryLength) {
  std::mt19937 rng(3);
  for (size_t n : {1u, 7u, 8u, 9u, 17u, 1000u, 49152u}) {
    for (int trial = 0; trial < 4; ++trial) {
      std::vector<float> r = RandomRow(rng, n);
      if (trial == 1 && n > 3) r[n - 1] = r[n / 2] = 50.0f;  // a tie: the lower id wins
      if (trial == 2) std::fill(r.begin(), r.end(), 0.0f);  // all equal: id 0
      if (trial == 3 && n > 3) {
        std::fill(r.begin(), r.end(), -1.0f);
        r[2] = -0.0f;  // -0 and +0 are equal: the first one wins
        r[n - 1] = 0.0f;
      }
      const RowScan s = ScanRow(r);
      EXPECT_EQ(s.first_bad, -1);
      // Independently of ArgmaxLowest: the standard library's first maximum is the lowest id.
      EXPECT_EQ(s.argmax, int32_t(std::max_element(r.begin(), r.end()) - r.begin())) << n << " " << trial;
      EXPECT_EQ(s.argmax, ArgmaxLowest(r));
    }
  }
}

TEST(ScanRow, FindsTheFirstNonFiniteValue) {
  std::mt19937 rng(5);
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity()};
  for (size_t n : {1u, 9u, 1001u}) {
    for (float b : bad) {
      std::vector<float> r = RandomRow(rng, n);
      r[n - 1] = b;  // in the tail past the last block of eight when n % 8 != 0
      if (n > 5) r[n / 3] = b;
      EXPECT_EQ(ScanRow(r).first_bad, int64_t(n > 5 ? n / 3 : n - 1)) << n << " " << b;
    }
  }
}

TEST(RoundToBf16, NearestTiesToEvenAtEveryLength) {
  std::mt19937 rng(11);
  for (size_t n : {1u, 8u, 13u, 4099u}) {
    std::vector<float> r = RandomRow(rng, n);
    // Exact halfway cases: low half 0x8000 over an even and an odd kept part.
    r[0] = std::bit_cast<float>(0x3F808000u);
    if (n > 1) r[n - 1] = std::bit_cast<float>(0x3F818000u);
    std::vector<uint16_t> out(n);
    RoundToBf16(r, out);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], Bf16ByValue(r[i])) << n << " " << i << " " << r[i];
  }
}

namespace {

constexpr int32_t kWidth = 1003;  // odd, past a multiple of eight
constexpr int kRows = 300;

CaptureLayout PipelineLayout(StoreDtype store) {
  CaptureLayout l;
  for (int i = 0; i < kRows * 2; ++i) l.tokens.push_back(i % kWidth);
  for (int i = 0; i < kRows; ++i) l.positions.push_back(2 * i);
  l.n_vocab = kWidth;
  l.store = store;
  return l;
}

std::vector<std::vector<float>> PipelineRows() {
  std::mt19937 rng(17);
  std::vector<std::vector<float>> rows;
  for (int i = 0; i < kRows; ++i) rows.push_back(RandomRow(rng, size_t(kWidth)));
  return rows;
}

// An empty folder of the tests' temporary tree.
std::string FreshDir(const std::string& name) {
  const std::string dir = fixtures::TempPath(name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The file a serial writer makes of PipelineRows(), by one WriteRow after another.
std::string SerialFile(const std::string& path, StoreDtype store) {
  auto w = CaptureWriter::Create(path, PipelineLayout(store), {{"m", 1}});
  EXPECT_TRUE(w.ok()) << w.status().message();
  if (!w.ok()) return "";
  const auto rows = PipelineRows();
  for (int i = 0; i < kRows; ++i) EXPECT_TRUE((*w)->WriteRow(i, rows[size_t(i)]).ok());
  EXPECT_TRUE((*w)->Commit().ok());
  auto bytes = ReadFile(path);
  return bytes.ok() ? *bytes : "";
}

}  // namespace

// Many workers finishing in any order write the same file as one thread writing row after row.
TEST(RowPipeline, WritesTheSameFileAsASerialWriter) {
  const std::string dir = FreshDir("row-pipeline");
  const auto rows = PipelineRows();
  for (StoreDtype store : {StoreDtype::kF32, StoreDtype::kBF16}) {
    const std::string serial = SerialFile(dir + "/serial.safetensors", store), piped = dir + "/piped.safetensors";
    for (RowPipelineShape shape : {RowPipelineShape{1, 1}, RowPipelineShape{3, 4}, RowPipelineShape{64, 4}}) {
      auto pw = CaptureWriter::Create(piped, PipelineLayout(store), {{"m", 1}});
      ASSERT_TRUE(pw.ok());
      {
        RowPipeline pipe(**pw, kWidth, shape);
        for (int i = 0; i < kRows; ++i) ASSERT_TRUE(pipe.Submit(i, rows[size_t(i)]).ok());
        ASSERT_TRUE(pipe.Finish().ok());
      }
      ASSERT_TRUE((*pw)->Commit().ok());
      EXPECT_EQ(*ReadFile(piped), serial) << StoreName(store) << " " << shape.in_flight;
    }
  }
}

// A bad row fails the run with the serial writer's message for the first bad row, whichever
// worker meets which bad row first; nothing is committed.
TEST(RowPipeline, TheFirstBadRowFailsWithTheSerialMessage) {
  const std::string dir = FreshDir("row-pipeline-bad");
  auto rows = PipelineRows();
  rows[37][5] = std::numeric_limits<float>::quiet_NaN();
  rows[80][2] = std::numeric_limits<float>::infinity();
  const std::string path = dir + "/c.safetensors";
  auto serial = CaptureWriter::Create(path, PipelineLayout(StoreDtype::kBF16), {{"m", 1}});
  ASSERT_TRUE(serial.ok());
  Status want;
  for (int i = 0; i < kRows && want.ok(); ++i) want = (*serial)->WriteRow(i, rows[size_t(i)]);
  ASSERT_FALSE(want.ok());
  EXPECT_NE(want.message().find("probe 37 (position 74): non-finite logit nan at token 5"), std::string::npos)
      << want.message();
  serial->reset();
  for (RowPipelineShape shape : {RowPipelineShape{1, 1}, RowPipelineShape{8, 4}}) {
    auto w = CaptureWriter::Create(path, PipelineLayout(StoreDtype::kBF16), {{"m", 1}});
    ASSERT_TRUE(w.ok());
    Status first;
    {
      RowPipeline pipe(**w, kWidth, shape);
      for (int i = 0; i < kRows && first.ok(); ++i) first = pipe.Submit(i, rows[size_t(i)]);
      if (first.ok()) first = pipe.Finish();
      EXPECT_EQ(pipe.Finish().message(), want.message());  // and it stays the answer
    }
    EXPECT_EQ(first.message(), want.message());
    w->reset();  // never committed: nothing at the path, no temporary left
    EXPECT_FALSE(std::filesystem::exists(path));
    EXPECT_TRUE(std::filesystem::is_empty(dir));
  }
}

TEST(RowPipeline, DefaultShapeBoundsTheRowsInFlight) {
  for (int32_t nv : {307, 49152, 262144}) {
    const RowPipelineShape s = DefaultRowPipelineShape(nv, 0);
    EXPECT_GE(s.workers, 1);
    EXPECT_LE(s.workers, 4);
    EXPECT_GE(s.in_flight, s.workers);
    EXPECT_LE(s.in_flight, 256);
    // At most 64 MiB of rows, unless the two-per-worker floor asks for more.
    if (s.in_flight > 2 * s.workers) {
      EXPECT_LE(int64_t(s.in_flight) * nv * 4, int64_t(64) << 20) << nv;
    }
  }
  EXPECT_EQ(DefaultRowPipelineShape(262144, 1).in_flight, 1);
  EXPECT_EQ(DefaultRowPipelineShape(262144, 1).workers, 1);
}

// Lent rows are read only until TakeBack returns: the producer then overwrites its buffer, as the
// engine's next decode does, and the file is still the serial writer's, whether the rows were
// copied out or (no buffer free) written where they lay.
TEST(RowPipeline, LentRowsAreDoneWithWhenTakenBack) {
  const std::string dir = FreshDir("row-pipeline-lend");
  const auto rows = PipelineRows();
  constexpr int kChunk = 7;  // rows per decode
  for (StoreDtype store : {StoreDtype::kF32, StoreDtype::kBF16}) {
    const std::string serial = SerialFile(dir + "/serial.safetensors", store), lent = dir + "/lent.safetensors";
    for (RowPipelineShape shape : {RowPipelineShape{1, 1}, RowPipelineShape{3, 4}, RowPipelineShape{64, 4}}) {
      auto w = CaptureWriter::Create(lent, PipelineLayout(store), {{"m", 1}});
      ASSERT_TRUE(w.ok());
      std::vector<float> engine(size_t(kChunk * kWidth));  // one decode's outputs, reused
      {
        RowPipeline pipe(**w, kWidth, shape);
        for (int first = 0; first < kRows; first += kChunk) {
          for (int i = first; i < std::min(kRows, first + kChunk); ++i) {
            float* out = engine.data() + size_t(i - first) * kWidth;
            std::copy(rows[size_t(i)].begin(), rows[size_t(i)].end(), out);
            ASSERT_TRUE(pipe.Lend(i, {out, size_t(kWidth)}).ok());
          }
          ASSERT_TRUE(pipe.TakeBack().ok());
          std::fill(engine.begin(), engine.end(), std::numeric_limits<float>::quiet_NaN());
        }
        ASSERT_TRUE(pipe.Finish().ok());
      }
      ASSERT_TRUE((*w)->Commit().ok());
      EXPECT_EQ(*ReadFile(lent), serial) << StoreName(store) << " " << shape.in_flight;
    }
  }
}

// PipelineRows lent and never taken back (the engine stopped before its next decode) are still copied
// out and written by Finish: it neither hangs nor loses them.
TEST(RowPipeline, FinishWritesRowsLentAndNeverTakenBack) {
  const std::string dir = FreshDir("row-pipeline-lend-finish");
  const std::string serial = SerialFile(dir + "/serial.safetensors", StoreDtype::kF32);
  const auto rows = PipelineRows();
  for (RowPipelineShape shape : {RowPipelineShape{1, 1}, RowPipelineShape{64, 4}}) {
    auto w = CaptureWriter::Create(dir + "/lent.safetensors", PipelineLayout(StoreDtype::kF32), {{"m", 1}});
    ASSERT_TRUE(w.ok());
    {
      RowPipeline pipe(**w, kWidth, shape);
      for (int i = 0; i < kRows; ++i) ASSERT_TRUE(pipe.Lend(i, rows[size_t(i)]).ok());
      ASSERT_TRUE(pipe.Finish().ok());
    }
    ASSERT_TRUE((*w)->Commit().ok());
    EXPECT_EQ(*ReadFile(dir + "/lent.safetensors"), serial) << shape.in_flight;
  }
}

// A bad lent row fails TakeBack, a later Lend or Finish (it fails when written, which may come
// after its copy is taken back), and Finish stays that answer: the serial writer's message.
TEST(RowPipeline, ABadLentRowFailsWithTheSerialMessage) {
  const std::string path = fixtures::TempPath("row-pipeline-lend-bad.safetensors");
  auto rows = PipelineRows();
  rows[37][5] = std::numeric_limits<float>::quiet_NaN();
  for (RowPipelineShape shape : {RowPipelineShape{1, 1}, RowPipelineShape{8, 4}}) {
    auto w = CaptureWriter::Create(path, PipelineLayout(StoreDtype::kF32), {{"m", 1}});
    ASSERT_TRUE(w.ok());
    RowPipeline pipe(**w, kWidth, shape);
    Status first;
    for (int i = 0; i < kRows && first.ok(); ++i) {
      first = pipe.Lend(i, rows[size_t(i)]);
      if (first.ok() && i % 10 == 9) first = pipe.TakeBack();
    }
    if (first.ok()) first = pipe.Finish();  // the bad row was copied out and failed when written
    EXPECT_NE(first.message().find("probe 37 (position 74): non-finite logit nan at token 5"), std::string::npos)
        << first.message();
    EXPECT_EQ(pipe.Finish().message(), first.message());
  }
}
