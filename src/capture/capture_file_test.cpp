#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "capture/capture.h"
#include "testing/tiny_model.h"
#include "util/util.h"

using namespace flipscope;
using nlohmann::json;

namespace {

constexpr int32_t kVocab = 37;  // odd, so BF16 rows are not 4-byte multiples

CaptureLayout Layout(StoreDtype store = StoreDtype::kF32, int32_t topk = 0) {
  CaptureLayout l;
  for (int i = 0; i < 200; ++i) l.tokens.push_back((i * 7) % kVocab);
  l.positions = {0, 31, 63, 64, 65, 150};
  l.n_vocab = topk > 0 ? 0 : kVocab;
  l.store = store;
  l.topk = topk;
  return l;
}

// Six rows: row 4 repeats row 1 (equal digests), row 2 ties at ids 3 and 9 (argmax 3), row 3
// differs by one F32 ulp that BF16 cannot hold (id 7 wins in F32, ties with id 3 in BF16), row
// 5 holds exact BF16 halfway cases that round-to-nearest-even sends down and up.
std::vector<std::vector<float>> Rows() {
  std::vector<std::vector<float>> rows(6, std::vector<float>(kVocab));
  for (size_t r = 0; r < rows.size(); ++r)
    for (int v = 0; v < kVocab; ++v) rows[r][size_t(v)] = std::sin(float(r * 131 + size_t(v) * 17)) * 4.0f - 2.0f;
  rows[4] = rows[1];
  rows[2][3] = rows[2][9] = 10.0f;
  std::fill(rows[3].begin(), rows[3].end(), -1.0f);
  rows[3][3] = 1.0f;
  rows[3][7] = std::nextafter(1.0f, 2.0f);
  rows[5][0] = 1.00390625f;   // halfway between BF16 1.0 and 1.0078125 -> 1.0 (even)
  rows[5][1] = 1.01171875f;   // halfway between 1.0078125 and 1.015625 -> 1.015625 (even)
  rows[5][2] = -1.01171875f;  // same, negative
  return rows;
}

const std::vector<int64_t> kOrder = {3, 0, 5, 1, 4, 2};  // rows arrive out of order

json Manifest() { return {{"tool", "flipscope"}, {"workload", {{"n_tokens", 200}}}}; }

std::string WriteFull(const std::string& name, StoreDtype store) {
  std::string path = fixtures::TempPath(name);
  auto w = CaptureWriter::Create(path, Layout(store), Manifest());
  EXPECT_TRUE(w.ok()) << w.status().message();
  auto rows = Rows();
  for (int64_t i : kOrder) EXPECT_TRUE((*w)->WriteRow(i, rows[size_t(i)]).ok());
  json m = Manifest();
  m["timings"] = {{"prefill_s", 1.25}};
  (*w)->SetManifest(m);
  Status st = (*w)->Commit();
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

// Top-k rows: ids/logprobs per row; row 3 repeats row 0.
std::vector<std::pair<std::vector<int32_t>, std::vector<float>>> SampleTopKRows() {
  std::vector<std::pair<std::vector<int32_t>, std::vector<float>>> rows;
  for (int r = 0; r < 6; ++r) rows.push_back({{r, r + 10, r + 20, 5}, {-0.1f * float(r + 1), -1.5f, -2.0f, -7.25f}});
  rows[3] = rows[0];
  return rows;
}

std::string WriteTruncated(const std::string& name) {
  std::string path = fixtures::TempPath(name);
  auto w = CaptureWriter::Create(path, Layout(StoreDtype::kF32, 4), Manifest());
  EXPECT_TRUE(w.ok()) << w.status().message();
  auto rows = SampleTopKRows();
  for (int64_t i : kOrder) {
    auto& [ids, lps] = rows[size_t(i)];
    EXPECT_TRUE((*w)->WriteTopK(i, ids, lps, ids[0]).ok());
  }
  EXPECT_TRUE((*w)->Commit().ok());
  return path;
}

// The lowest index of the largest value, computed independently of the library.
int32_t FirstMax(const std::vector<float>& row) {
  return int32_t(std::max_element(row.begin(), row.end()) - row.begin());
}

std::unique_ptr<CaptureReader> MustOpen(const std::string& path) {
  auto r = CaptureReader::Open(path);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? std::move(*r) : nullptr;
}

}  // namespace

TEST(CaptureFile, RoundTripF32OutOfOrder) {
  auto path = WriteFull("capture-file-f32.safetensors", StoreDtype::kF32);
  auto r = MustOpen(path);
  ASSERT_TRUE(r);
  auto layout = Layout();
  auto rows = Rows();
  EXPECT_EQ(std::vector<int32_t>(r->tokens().begin(), r->tokens().end()), layout.tokens);
  EXPECT_EQ(std::vector<int32_t>(r->positions().begin(), r->positions().end()), layout.positions);
  EXPECT_EQ(r->n_vocab(), kVocab);
  EXPECT_FALSE(r->truncated());
  EXPECT_EQ(r->store(), StoreDtype::kF32);
  EXPECT_EQ(r->manifest().raw["timings"]["prefill_s"], 1.25);  // the manifest set before Commit
  EXPECT_EQ(r->file_size(), std::filesystem::file_size(path));
  ASSERT_EQ(r->tensors().size(), 5u);
  EXPECT_EQ(r->tensors().back().name, "logits");  // large data last
  std::vector<float> row(kVocab);
  std::vector<double> row64(kVocab);
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_TRUE(r->ReadRow(int64_t(i), row).ok());
    EXPECT_EQ(std::memcmp(row.data(), rows[i].data(), kVocab * 4), 0) << i;
    ASSERT_TRUE(r->ReadRowF64(int64_t(i), row64).ok());
    for (int v = 0; v < kVocab; ++v) EXPECT_EQ(row64[size_t(v)], double(rows[i][size_t(v)]));
    EXPECT_EQ(r->argmax()[i], FirstMax(rows[i])) << i;
    EXPECT_EQ(r->digest()[i], Digest64(rows[i].data(), kVocab * 4)) << i;
  }
  EXPECT_EQ(r->argmax()[2], 3);  // tie -> lowest id
  EXPECT_EQ(r->argmax()[3], 7);
  EXPECT_EQ(r->digest()[1], r->digest()[4]);
  EXPECT_NE(r->digest()[0], r->digest()[1]);
  EXPECT_FALSE(r->ReadRow(6, row).ok());
  EXPECT_FALSE(r->ReadRow(0, std::span<float>(row).first(5)).ok());
  EXPECT_TRUE(r->TopKIds(0).empty());
}

TEST(CaptureFile, RoundTripBF16KeepsNativeArgmaxAndDigest) {
  auto f32 = MustOpen(WriteFull("capture-file-bf16-ref.safetensors", StoreDtype::kF32));
  auto r = MustOpen(WriteFull("capture-file-bf16.safetensors", StoreDtype::kBF16));
  ASSERT_TRUE(r && f32);
  EXPECT_EQ(r->store(), StoreDtype::kBF16);
  EXPECT_EQ(r->tensors().back().dtype, "BF16");
  EXPECT_EQ(r->argmax()[3], 7);  // decided on F32, where BF16 alone would give 3
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(r->argmax()[i], f32->argmax()[i]);
    EXPECT_EQ(r->digest()[i], f32->digest()[i]);
  }
  std::vector<float> row(kVocab);
  ASSERT_TRUE(r->ReadRow(5, row).ok());
  EXPECT_EQ(row[0], 1.0f);
  EXPECT_EQ(row[1], 1.015625f);
  EXPECT_EQ(row[2], -1.015625f);
  ASSERT_TRUE(r->ReadRow(3, row).ok());
  EXPECT_EQ(row[3], row[7]);  // the F32 ulp is gone in storage
  auto rows = Rows();
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_TRUE(r->ReadRow(int64_t(i), row).ok());
    for (int v = 0; v < kVocab; ++v)  // within half a BF16 ulp (8 mantissa bits)
      EXPECT_LE(std::fabs(row[size_t(v)] - rows[i][size_t(v)]), std::fabs(rows[i][size_t(v)]) / 256.0f);
  }
}

TEST(CaptureFile, RoundTripTruncated) {
  auto r = MustOpen(WriteTruncated("capture-file-topk.safetensors"));
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->truncated());
  EXPECT_EQ(r->topk(), 4);
  EXPECT_EQ(r->n_vocab(), 0);
  auto rows = SampleTopKRows();
  for (size_t i = 0; i < rows.size(); ++i) {
    auto ids = r->TopKIds(int64_t(i));
    auto lps = r->TopKLogprobs(int64_t(i));
    EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.end()), rows[i].first);
    EXPECT_EQ(std::vector<float>(lps.begin(), lps.end()), rows[i].second);
    EXPECT_EQ(r->argmax()[i], rows[i].first[0]);
  }
  EXPECT_EQ(r->digest()[0], r->digest()[3]);
  EXPECT_NE(r->digest()[0], r->digest()[1]);
  std::vector<float> row(kVocab);
  EXPECT_FALSE(r->ReadRow(0, row).ok());
  EXPECT_TRUE(r->TopKIds(6).empty());
}

TEST(CaptureFile, UncommittedWriterLeavesNothing) {
  auto dir = std::filesystem::path(fixtures::TempPath("capture-file-uncommitted"));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    auto w = CaptureWriter::Create((dir / "c.safetensors").string(), Layout(), Manifest());
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->WriteRow(0, Rows()[0]).ok());
    EXPECT_FALSE(std::filesystem::is_empty(dir));  // the temporary file exists meanwhile
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

// A capture whose folder does not exist: the error names the capture, not its temporary file,
// and nothing is created.
TEST(CaptureFile, AMissingFolderIsSaidOfTheCapture) {
  auto dir = std::filesystem::path(fixtures::TempPath("capture-file-no-folder"));
  std::filesystem::remove_all(dir);
  const std::string path = (dir / "x.safetensors").string();
  auto w = CaptureWriter::Create(path, Layout(), Manifest());
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().message(), path + ": cannot create: its folder " + dir.string() + " does not exist");
  EXPECT_FALSE(std::filesystem::exists(dir));
}

// A capture larger than the space left where it goes fails when it is created, before any row is
// computed, naming the file, both sizes and the smaller store; nothing is left behind.
TEST(CaptureFile, ACaptureThatCannotFitFailsWhenCreated) {
  auto dir = std::filesystem::path(fixtures::TempPath("capture-file-no-room"));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  CaptureLayout huge;  // 200,000 rows of 2^30 F32 logits: 781 TiB, more than any disk here
  huge.tokens.assign(200001, 0);
  for (int32_t p = 0; p < 200000; ++p) huge.positions.push_back(p);
  huge.n_vocab = 1 << 30;
  const std::string path = (dir / "huge.safetensors").string();
  auto w = CaptureWriter::Create(path, huge, Manifest());
  ASSERT_FALSE(w.ok());
  const std::string m = w.status().message();
  EXPECT_EQ(m.rfind(path + ": not enough space: the capture needs 781.", 0), 0u) << m;
  EXPECT_NE(m.find(" TiB and its disk has "), std::string::npos) << m;
  EXPECT_NE(m.find("(BF16 rows take half)"), std::string::npos) << m;
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  huge.store = StoreDtype::kBF16;  // half the size, still too big, and no hint left to give
  auto b = CaptureWriter::Create(path, huge, Manifest());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message().find("BF16 rows"), std::string::npos) << b.status().message();
}

// Space that runs out after the capture started (another writer took it) fails the row whose
// write falls short, with one line naming the file and the system's reason; nothing is left
// behind. The file size limit stands in for the full disk: the up-front check cannot see it.
TEST(CaptureFile, AWriteThatFallsShortFailsAndLeavesNothing) {
  auto dir = std::filesystem::path(fixtures::TempPath("capture-file-short-write"));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "c.safetensors").string();
  auto w = CaptureWriter::Create(path, Layout(), Manifest());
  ASSERT_TRUE(w.ok()) << w.status().message();
  struct rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  struct rlimit small = old;
  small.rlim_cur = 1024;  // below the first row's offset (past the 64 KiB header)
  std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const Status st = (*w)->WriteRow(0, Rows()[0]);
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, SIG_DFL);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().rfind(path + ": write failed: ", 0), 0u) << st.message();
  w->reset();
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

TEST(CaptureFile, WriterRefusesBadRows) {
  std::string path = fixtures::TempPath("capture-file-badrows.safetensors");
  std::filesystem::remove(path);
  auto w = CaptureWriter::Create(path, Layout(), Manifest());
  ASSERT_TRUE(w.ok());
  auto rows = Rows();
  auto nan_row = rows[0], inf_row = rows[0];
  nan_row[5] = NAN;
  inf_row[6] = -INFINITY;
  Status st = (*w)->WriteRow(1, nan_row);
  EXPECT_EQ(st.message(), path + ": probe 1 (position 31): non-finite logit nan at token 5");
  st = (*w)->WriteRow(5, inf_row);
  EXPECT_EQ(st.message(), path + ": probe 5 (position 150): non-finite logit -inf at token 6");
  EXPECT_FALSE((*w)->WriteRow(6, rows[0]).ok());
  EXPECT_FALSE((*w)->WriteRow(0, std::span<const float>(rows[0]).first(3)).ok());
  EXPECT_FALSE((*w)->WriteTopK(0, std::vector<int32_t>{1}, std::vector<float>{0.f}, 1).ok());
  for (int64_t i : {0, 1, 3, 4, 5}) ASSERT_TRUE((*w)->WriteRow(i, rows[size_t(i)]).ok());
  EXPECT_NE((*w)->WriteRow(3, rows[3]).message().find("row written twice"), std::string::npos);
  st = (*w)->Commit();
  EXPECT_EQ(st.message(), path + ": 1 of 6 rows never written (first: probe 2 (position 63))");
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(CaptureFile, WriterRefusesBadLayoutsAndOversizedManifest) {
  std::string path = fixtures::TempPath("capture-file-badlayout.safetensors");
  std::filesystem::remove(path);
  auto l = Layout();
  l.positions = {0, 64, 63};
  EXPECT_NE(CaptureWriter::Create(path, l, Manifest()).status().message().find("not strictly ascending"),
            std::string::npos);
  l = Layout();
  l.positions.push_back(200);
  EXPECT_FALSE(CaptureWriter::Create(path, l, Manifest()).ok());
  l = Layout();
  l.tokens[7] = kVocab;
  EXPECT_NE(CaptureWriter::Create(path, l, Manifest()).status().message().find("token id 37 outside"),
            std::string::npos);
  l = Layout();
  l.topk = 5;  // both n_vocab and topk
  EXPECT_FALSE(CaptureWriter::Create(path, l, Manifest()).ok());

  auto w = CaptureWriter::Create(path, Layout(), Manifest());
  ASSERT_TRUE(w.ok());
  auto rows = Rows();
  for (int64_t i : kOrder) ASSERT_TRUE((*w)->WriteRow(i, rows[size_t(i)]).ok());
  json big = Manifest();
  big["notes"] = std::string(70 * 1024, 'x');  // past the 64 KiB reserve
  (*w)->SetManifest(big);
  Status st = (*w)->Commit();
  EXPECT_NE(st.message().find("past the"), std::string::npos) << st.message();
  EXPECT_FALSE(std::filesystem::exists(path));
}

// ---- Hostile files: every fault gives one line naming the file -------------------------------

namespace {

// A capture split into its header JSON and data section, to be damaged and joined again.
struct RawCapture {
  json header;
  std::string data;
  uint64_t Offset(const std::string& tensor) const { return header[tensor]["data_offsets"][0].get<uint64_t>(); }
};

RawCapture Split(const std::string& path) {
  std::string bytes = *ReadFile(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return {json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
}

std::string Join(const std::string& path, const RawCapture& raw) {
  std::string text = raw.header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  uint64_t n = text.size();
  std::string bytes(reinterpret_cast<const char*>(&n), 8);
  std::ofstream(path, std::ios::binary) << bytes << text << raw.data;
  return path;
}

template <typename T>
void Poke(RawCapture& raw, const std::string& tensor, size_t index, T value) {
  std::memcpy(raw.data.data() + raw.Offset(tensor) + index * sizeof(T), &value, sizeof(T));
}

struct HostileCase {
  const char* name;
  std::function<void(RawCapture&)> damage;
  const char* expected;  // part of the message
};

}  // namespace

TEST(CaptureFile, HostileFilesGiveOneClearError) {
  const std::string good = WriteFull("capture-file-good.safetensors", StoreDtype::kF32);
  const std::vector<HostileCase> cases = {
      {"offsets-past-end",
       [](RawCapture& r) {
         r.header["logits"]["data_offsets"] = {r.data.size(), r.data.size() + 37 * 24};
       },
       "tensor 'logits': data_offsets ["},
      {"overlap", [](RawCapture& r) { r.header["argmax"]["data_offsets"] = r.header["positions"]["data_offsets"]; },
       "overlap"},
      {"wrong-dtype", [](RawCapture& r) { r.header["positions"]["dtype"] = "F32"; },
       "tensor 'positions': dtype F32, expected I32"},
      {"bad-shape", [](RawCapture& r) { r.header["argmax"]["shape"] = {5}; }, "shape and dtype need 20"},
      {"negative-dim", [](RawCapture& r) { r.header["argmax"]["shape"] = {-6}; }, "shape entries must be"},
      {"no-manifest", [](RawCapture& r) { r.header.erase("__metadata__"); }, "no manifest (__metadata__ key"},
      {"manifest-not-json", [](RawCapture& r) { r.header["__metadata__"][kManifestKey] = "{oops"; },
       "the manifest is not a JSON object"},
      {"missing-tensor", [](RawCapture& r) { r.header.erase("digest"); }, "missing tensor 'digest'"},
      {"extra-tensor", [](RawCapture& r) { r.header["extra"] = r.header["argmax"]; }, "unexpected tensor 'extra'"},
      {"trailing-bytes", [](RawCapture& r) { r.data += "12345678"; }, "8 bytes after the last tensor"},
      {"cut-short", [](RawCapture& r) { r.data.resize(r.data.size() - 100); }, "outside the data section"},
      {"not-ascending", [](RawCapture& r) { Poke<int32_t>(r, "positions", 2, 31); }, "not strictly ascending"},
      {"token-range", [](RawCapture& r) { Poke<int32_t>(r, "tokens", 0, 9999); }, "token id 9999 outside"},
      {"argmax-range", [](RawCapture& r) { Poke<int32_t>(r, "argmax", 1, -1); }, "'argmax' holds token id -1"},
  };
  for (const HostileCase& c : cases) {
    RawCapture raw = Split(good);
    c.damage(raw);
    std::string path = Join(fixtures::TempPath(std::string("capture-file-hostile-") + c.name), raw);
    auto r = CaptureReader::Open(path);
    ASSERT_FALSE(r.ok()) << c.name;
    const std::string msg = r.status().message();
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
    EXPECT_NE(msg.find(c.expected, path.size()), std::string::npos) << c.name << ": " << msg;  // past the path
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }

  // Raw byte faults: the header length, a header that is not JSON, a tiny file, no file.
  std::string bytes = *ReadFile(good);
  std::string path = fixtures::TempPath("capture-file-hostile-raw");
  auto expect_error = [&](const std::string& content, const std::string& expected) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
    auto r = CaptureReader::Open(path);
    ASSERT_FALSE(r.ok()) << expected;
    EXPECT_EQ(r.status().message().rfind(path + ": ", 0), 0u) << r.status().message();
    EXPECT_NE(r.status().message().find(expected, path.size()), std::string::npos) << r.status().message();
  };
  std::string too_long = bytes;
  uint64_t n = bytes.size();
  std::memcpy(too_long.data(), &n, 8);
  expect_error(too_long, "does not fit the file");
  std::string not_json = bytes;
  not_json[8] = '[';
  not_json[12] = '}';
  expect_error(not_json, "header is not valid JSON");
  expect_error("abc", "too short");
  auto missing = CaptureReader::Open("/nonexistent/c.safetensors");
  EXPECT_EQ(missing.status().message(), "/nonexistent/c.safetensors: no such file");
}

// ---- The independent reference: safetensors + numpy read the same files ---------------------

namespace {
// Runs tests/ref/check_capture.py on three captures; returns its exit status and output.
std::pair<int, std::string> RunReference(const std::string& f32, const std::string& bf16, const std::string& topk) {
  std::string cmd = std::string(FLIPSCOPE_PYTHON) + " " + FLIPSCOPE_SOURCE_DIR + "/tests/ref/check_capture.py " + f32 +
                    " " + bf16 + " " + topk + " 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  char buf[512];
  while (size_t got = std::fread(buf, 1, sizeof buf, p)) out.append(buf, got);
  int rc = ::pclose(p);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out};
}
}  // namespace

TEST(CaptureFile, NumpyReferenceReadsTheFiles) {
  ASSERT_TRUE(std::filesystem::exists(FLIPSCOPE_PYTHON)) << "run scripts/setup.sh: " << FLIPSCOPE_PYTHON;
  const std::string f32 = WriteFull("capture-file-py-f32.safetensors", StoreDtype::kF32);
  const std::string bf16 = WriteFull("capture-file-py-bf16.safetensors", StoreDtype::kBF16);
  const std::string topk = WriteTruncated("capture-file-py-topk.safetensors");
  auto [rc, out] = RunReference(f32, bf16, topk);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("ok"), std::string::npos) << out;

  // The reference must be able to fail: a wrong argmax (the tie row), split identical digests.
  RawCapture raw = Split(f32);
  Poke<int32_t>(raw, "argmax", 2, 9);
  std::tie(rc, out) = RunReference(Join(fixtures::TempPath("capture-file-py-bad-argmax.safetensors"), raw), bf16, topk);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("argmax"), std::string::npos) << out;
  raw = Split(topk);
  Poke<uint64_t>(raw, "digest", 3, 12345);
  std::tie(rc, out) = RunReference(f32, bf16, Join(fixtures::TempPath("capture-file-py-bad-digest.safetensors"), raw));
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("digest"), std::string::npos) << out;
}

TEST(CaptureFile, ReadsCapturesWrittenByPython) {
  const std::string f32 = fixtures::TempPath("capture-file-pywritten-f32.safetensors");
  const std::string bf16 = fixtures::TempPath("capture-file-pywritten-bf16.safetensors");
  std::string cmd = std::string(FLIPSCOPE_PYTHON) + " " + FLIPSCOPE_SOURCE_DIR +
                    "/tests/ref/check_capture.py --write-sample " + f32 + " " + bf16;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto a = MustOpen(f32);
  auto b = MustOpen(bf16);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->manifest().raw["writer"], "check_capture.py");
  EXPECT_EQ(b->store(), StoreDtype::kBF16);
  ASSERT_EQ(a->n_vocab(), 11);
  std::vector<float> row(11), row16(11);
  for (int64_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(a->ReadRow(i, row).ok());
    ASSERT_TRUE(b->ReadRow(i, row16).ok());
    EXPECT_EQ(a->argmax()[size_t(i)], FirstMax(row));  // numpy's argmax agrees with the format's rule
    EXPECT_EQ(b->argmax()[size_t(i)], a->argmax()[size_t(i)]);
    for (size_t v = 0; v < 11; ++v) EXPECT_LE(std::fabs(row16[v] - row[v]), std::fabs(row[v]) / 256.0f);
  }
  EXPECT_EQ(a->argmax()[1], 2);  // the tie row
}
