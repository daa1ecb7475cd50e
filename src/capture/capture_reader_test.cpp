// Hostile capture files against CaptureReader::Open: forged length prefixes, shapes and offsets
// near the integer limits, partial overlaps, wrong dtypes, deep JSON. Each must give one line that
// names the file and the fault, quickly, without reading or allocating past the file. (The basic
// faults are in capture_file_test.cpp; fuzz findings live here as regression tests too.)
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "capture/capture.h"
#include "testing/tiny_model.h"
#include "util/util.h"

using namespace flipscope;
using nlohmann::json;

namespace {

// A valid 3-probe, 5-token-vocabulary F32 capture written by the real writer.
std::string WriteSmall(const std::string& name) {
  CaptureLayout l;
  l.tokens = {1, 2, 3, 4, 0, 1, 2};
  l.positions = {0, 2, 5};
  l.n_vocab = 5;
  const std::string path = fixtures::TempPath(name);
  auto w = CaptureWriter::Create(path, l, json{{"tool", "capture_reader_test"}});
  EXPECT_TRUE(w.ok()) << w.status().message();
  for (int64_t i = 0; i < 3; ++i) {
    std::vector<float> row = {0.5f, float(i), -1.0f, 2.0f, 0.0f};
    EXPECT_TRUE((*w)->WriteRow(i, row).ok());
  }
  EXPECT_TRUE((*w)->Commit().ok());
  return path;
}

// The file's length prefix, header JSON and data section, to be forged and joined again.
struct Parts {
  uint64_t prefix = 0;  // 0: the header's real (padded) length
  std::string header, data;
};

Parts SplitParts(const std::string& path) {
  std::string bytes = *ReadFile(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return {0, json::parse(bytes.substr(8, n)).dump(), bytes.substr(8 + n)};
}

std::string Join(const std::string& path, Parts p) {
  p.header.resize((p.header.size() + 7) / 8 * 8, ' ');
  const uint64_t n = p.prefix != 0 ? p.prefix : p.header.size();
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      << std::string(reinterpret_cast<const char*>(&n), 8) << p.header << p.data;
  return path;
}

// Opens the forged file and checks for one line starting with the path and holding `expected`,
// within a second (no hang).
void ExpectRefused(const std::string& name, const Parts& parts, const std::string& expected) {
  const std::string path = Join(fixtures::TempPath("capture-reader-" + name), parts);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = CaptureReader::Open(path);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(r.ok()) << name;
  const std::string msg = r.status().message();  // a copy: status() is a temporary
  EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << name << ": " << msg;
  EXPECT_NE(msg.find(expected, path.size()), std::string::npos) << name << ": " << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << name << ": " << msg;
  EXPECT_LT(seconds, 1.0) << name;
}

// The good file with one tensor entry's field replaced.
Parts WithField(const std::string& good, const char* tensor, const char* field, const json& value) {
  Parts p = SplitParts(good);
  json h = json::parse(p.header);
  h[tensor][field] = value;
  p.header = h.dump();
  return p;
}

}  // namespace

TEST(CaptureReader, LengthPrefixLargerThanTheFile) {
  const std::string good = WriteSmall("capture-reader-good.safetensors");
  const uint64_t size = std::filesystem::file_size(good);
  for (uint64_t prefix : {size - 7, size, uint64_t(1) << 40, ~uint64_t(0), ~uint64_t(0) - 7}) {
    Parts p = SplitParts(good);
    p.prefix = prefix;
    ExpectRefused("prefix", p, "does not fit the file");
  }
}

TEST(CaptureReader, HugeShapesAndOffsetsAreRefusedBeforeAnyRead) {
  const std::string good = WriteSmall("capture-reader-good.safetensors");
  const uint64_t big = uint64_t(INT32_MAX);
  const uint64_t end = SplitParts(good).data.size();  // logits (60 bytes) ends the data section
  struct Case {
    const char *name, *tensor, *field;
    json value;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"shape-2^31", "logits", "shape", {uint64_t(1) << 31, 5}, "shape entries must be integers in [0, 2^31)"},
      {"shape-int-max", "logits", "shape", {big, big}, "data_offsets span 60 bytes, shape and dtype need"},
      {"shape-float", "tokens", "shape", {7.0}, "shape entries must be integers"},
      {"offsets-u64-max", "logits", "data_offsets", {~uint64_t(0) - 59, ~uint64_t(0)}, "outside the data section"},
      {"offsets-reversed", "tokens", "data_offsets", {40, 12}, "outside the data section"},
      {"offsets-one-past-eof", "logits", "data_offsets", {end - 59, end + 1}, "outside the data section"},
      {"offsets-three", "tokens", "data_offsets", {0, 28, 56}, "data_offsets must be two non-negative integers"},
      {"offsets-negative", "tokens", "data_offsets", {-28, 0}, "data_offsets must be two non-negative integers"},
      {"dtype-f16", "logits", "dtype", "F16", "dtype F16, expected F32 or BF16"},
      {"dtype-i64", "digest", "dtype", "I64", "dtype I64, expected U64"},
      {"dtype-number", "tokens", "dtype", 3, "needs dtype, shape and data_offsets"},
  };
  for (const Case& c : cases) ExpectRefused(c.name, WithField(good, c.tensor, c.field, c.value), c.expected);
}

TEST(CaptureReader, PartialOverlapsAndMisalignment) {
  const std::string good = WriteSmall("capture-reader-good.safetensors");
  Parts p = SplitParts(good);
  const json h = json::parse(p.header);
  // tokens moved 4 bytes into the digest before it (same length): a partial overlap.
  const uint64_t t0 = h["tokens"]["data_offsets"][0].get<uint64_t>() - 4;
  ExpectRefused("overlap-partial", WithField(good, "tokens", "data_offsets", {t0, t0 + 28}), "overlap");
  // digest (U64) moved to an offset that is a multiple of 4 but not of 8.
  ExpectRefused("misaligned", WithField(good, "digest", "data_offsets", {4, 28}), "not aligned to its dtype");
}

TEST(CaptureReader, HeadersThatAreNotTablesGiveOneLine) {
  const std::string good = WriteSmall("capture-reader-good.safetensors");
  json numeric_metadata = json::parse(SplitParts(good).header);
  numeric_metadata["__metadata__"] = 7;
  struct Case {
    const char *name, *expected;
    std::string header;
  };
  const std::vector<Case> cases = {
      {"array", "header is not a JSON object", "[1, 2, 3]"},
      {"deep-nesting", "header is not valid JSON", std::string(200000, '[')},
      {"deep-object", "header is not valid JSON",
       [] {
         std::string s;
         for (int i = 0; i < 50000; ++i) s += "{\"a\":";
         return s;
       }()},
      {"nul-bytes", "header is not valid JSON", std::string("{\"tokens\"\0\0\0:1}", 15)},
      {"entry-not-object", "needs dtype, shape and data_offsets", R"({"tokens": [1, 2]})"},
      {"metadata-number", "no manifest", numeric_metadata.dump()},
  };
  for (const Case& c : cases) {
    Parts p = SplitParts(good);
    p.header = c.header;
    ExpectRefused(c.name, p, c.expected);
  }
}

// Rows are not scanned at Open (a capture may hold gigabytes); NaN / ±Inf in a row reach the
// caller as values. compare refuses such rows (compare_test.cpp: RefusesNonFiniteRows).
TEST(CaptureReader, NonFiniteRowsAreReadAsStored) {
  const std::string good = WriteSmall("capture-reader-good.safetensors");
  Parts p = SplitParts(good);
  const json h = json::parse(p.header);
  const uint64_t at = h["logits"]["data_offsets"][0].get<uint64_t>() + 4 * 5 + 4;  // row 1, id 1
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(p.data.data() + at, &nan, 4);
  const std::string path = Join(fixtures::TempPath("capture-reader-nan.safetensors"), p);
  auto r = CaptureReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::vector<float> row(5);
  ASSERT_TRUE((*r)->ReadRow(1, row).ok());
  EXPECT_TRUE(std::isnan(row[1]));
  EXPECT_EQ(row[3], 2.0f);
}
