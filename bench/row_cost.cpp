// row_cost: what a capture spends per stored row, part by part, for a vocabulary's width: the
// copy out of the engine's buffer, the non-finite check, the argmax, the XXH3 digest, the BF16
// rounding, the pwrite; rows into one file from several threads, written and mapped; a whole
// CaptureWriter::WriteRow (F32 and BF16 stores); then the same rows through the RowPipeline with
// its default shape against one row in flight, copied on the calling thread and lent (docs/performance.md).
//   row_cost [N_VOCAB...] [--rows R] [--dir DIR]     (default: 49152 262144, 256 rows, the temp dir)
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "capture/capture.h"
#include "capture/row_pipeline.h"
#include "engine/engine.h"
#include "util/util.h"

using namespace flipscope;

namespace {

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// Logits-like rows: normal values with a few large ones, as an LM head gives.
std::vector<std::vector<float>> MakeRows(int32_t n_vocab, int n_rows) {
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 3.0f);
  const std::vector<float> zero(static_cast<size_t>(n_vocab));
  std::vector<std::vector<float>> rows(static_cast<size_t>(n_rows), zero);
  for (auto& r : rows) {
    for (float& v : r) v = d(rng);
    r[rng() % r.size()] = 30.0f;
  }
  return rows;
}

// Per row of f(row, i) over every row, after a warm-up over the first 8 (given i = rows + 0..7, so
// a row slot is never written twice): the fastest row's wall time (the least disturbed by other
// processes on a shared machine) and the mean CPU time of the process.
void Time(const std::string& what, const std::vector<std::vector<float>>& rows,
          const std::function<void(const std::vector<float>&, size_t)>& f) {
  for (size_t i = 0; i < std::min<size_t>(rows.size(), 8); ++i) f(rows[i], rows.size() + i);
  const double c0 = ProcessCpuSeconds();
  double fastest = 1e30;
  for (size_t i = 0; i < rows.size(); ++i) {
    const double t0 = NowSeconds();
    f(rows[i], i);
    fastest = std::min(fastest, NowSeconds() - t0);
  }
  const double cpu = ProcessCpuSeconds() - c0;
  fmt::print("  {:<44} {:8.4f} ms/row fastest  (cpu {:8.4f} ms/row mean)\n", what, 1e3 * fastest,
             1e3 * cpu / double(rows.size()));
}

CaptureLayout Layout(int32_t n_vocab, int n_rows, StoreDtype store) {
  CaptureLayout l;
  l.tokens.assign(size_t(n_rows) + 1, 0);
  for (int i = 0; i < n_rows; ++i) l.positions.push_back(i);
  l.n_vocab = n_vocab;
  l.store = store;
  return l;
}

void Parts(int32_t n_vocab, const std::vector<std::vector<float>>& rows, const std::string& dir) {
  std::vector<float> copy(static_cast<size_t>(n_vocab));
  std::vector<uint16_t> bf16(static_cast<size_t>(n_vocab));
  volatile uint64_t sink = 0;
  Time("memcpy out of the engine's buffer", rows, [&](auto& r, size_t) {
    std::memcpy(copy.data(), r.data(), r.size() * 4);
    sink = sink + copy[0];
  });
  Time("isfinite scan (std::find_if)", rows, [&](auto& r, size_t) {
    sink = sink + uint64_t(std::find_if(r.begin(), r.end(), [](float v) { return !std::isfinite(v); }) - r.begin());
  });
  Time("ArgmaxLowest (max in 16 lanes, then its index)", rows, [&](auto& r, size_t) { sink = sink + ArgmaxLowest(r); });
  Time("ScanRow (finite check and argmax, one pass)", rows, [&](auto& r, size_t) { sink = sink + ScanRow(r).argmax; });
  Time("XXH3 digest (Digest64)", rows, [&](auto& r, size_t) { sink = sink + Digest64(r.data(), r.size() * 4); });
  Time("BF16 rounding (RoundToBf16)", rows, [&](auto& r, size_t) {
    RoundToBf16(r, bf16);
    sink = sink + bf16[0];
  });
  const std::string path = dir + "/row_cost.bin";
  const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  Time("pwrite F32 row (page cache)", rows, [&](auto& r, size_t i) {
    sink = sink + uint64_t(::pwrite(fd, r.data(), r.size() * 4, off_t(i * r.size() * 4)));
  });
  Time("pwrite BF16 row (page cache)", rows, [&](auto&, size_t i) {
    sink = sink + uint64_t(::pwrite(fd, bf16.data(), bf16.size() * 2, off_t(i * bf16.size() * 2)));
  });
  ::close(fd);
  std::filesystem::remove(path);
}

// Rows into one fresh file from several threads at once, by pwrite and through a shared mapping
// of each row (the file reserved with fallocate first): whether the kernel lets writers of one
// file run in parallel, and what a mapping costs against a write (docs/performance.md).
void FileWrites(const std::vector<std::vector<float>>& rows, const std::string& dir) {
  const size_t row_bytes = rows[0].size() * 4, n = rows.size() * 4;  // each row 4 times: more bytes
  const std::string path = dir + "/row_cost_writes.bin";
  // The first pass is a warm-up (the kernel finds the memory for the file's pages), not timed.
  for (auto [mapped, timed] : {std::pair{false, false}, {false, true}, {true, true}}) {
    for (int threads : {1, 2, 4}) {
      const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR, 0644);
      if (mapped && ::fallocate(fd, 0, 0, off_t(n * row_bytes)) != 0) break;  // no reservation here
      const double t0 = NowSeconds();
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          for (size_t i = size_t(t); i < n; i += size_t(threads)) {
            const void* src = rows[i % rows.size()].data();
            if (!mapped) {
              (void)!::pwrite(fd, src, row_bytes, off_t(i * row_bytes));
              continue;
            }
            void* dst = ::mmap(nullptr, row_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(i * row_bytes));
            if (dst == MAP_FAILED) continue;
            std::memcpy(dst, src, row_bytes);
            ::munmap(dst, row_bytes);
          }
        });
      for (std::thread& t : pool) t.join();
      const double wall = NowSeconds() - t0;
      if (timed)
        fmt::print("  {} rows into one file, {} thread(s): {:7.3f} s, {:6.2f} GB/s\n", mapped ? "mapped" : "pwrite",
                   threads, wall, double(n * row_bytes) / wall / 1e9);
      ::close(fd);
      std::filesystem::remove(path);
    }
  }
}

// Whole WriteRow calls on one thread, then through the pipeline (default shape and one in flight).
void Writer(int32_t n_vocab, const std::vector<std::vector<float>>& rows, const std::string& dir) {
  const int n = int(rows.size());
  for (StoreDtype store : {StoreDtype::kF32, StoreDtype::kBF16}) {
    const std::string path = dir + "/row_cost.safetensors";
    // n + 8 slots: the warm-up rows go past the timed ones; each timing gets a writer of its own.
    auto fresh = [&]() -> std::unique_ptr<CaptureWriter> {
      auto w = CaptureWriter::Create(path, Layout(n_vocab, n + 8, store), {{"bench", 1}});
      if (!w.ok()) {
        fmt::print(stderr, "row_cost: {}\n", w.status().message());
        std::exit(1);
      }
      return std::move(*w);
    };
    auto w = fresh();
    Time(fmt::format("WriteRow, {} store, on the calling thread", StoreName(store)), rows,
         [&](auto& r, size_t i) { (void)w->WriteRow(int64_t(i), r); });
    // Submit copies each row on the calling thread; Lend leaves the copies to the workers and the
    // caller together, one decode's rows (kDecodeRows) at a time, taken back before the next.
    constexpr int kDecodeRows = 16;
    for (auto [in_flight, lend] : {std::pair{1, false}, {0, false}, {0, true}}) {
      auto pw = fresh();
      const RowPipelineShape shape = DefaultRowPipelineShape(n_vocab, in_flight);
      const double c0 = ProcessCpuSeconds(), t0 = NowSeconds();
      double handed = 0;
      {
        RowPipeline pipe(*pw, n_vocab, shape);
        for (int i = 0; i < n; ++i) {
          (void)(lend ? pipe.Lend(i, rows[size_t(i)]) : pipe.Submit(i, rows[size_t(i)]));
          if (lend && (i % kDecodeRows == kDecodeRows - 1 || i == n - 1)) (void)pipe.TakeBack();
        }
        handed = NowSeconds() - t0;
        (void)pipe.Finish();
      }
      const double wall = NowSeconds() - t0, cpu = ProcessCpuSeconds() - c0;
      fmt::print(
          "  pipeline {} store, {:6}, {:3d} in flight, {} workers: {:8.4f} ms/row handed over, {:8.4f} "
          "ms/row written (cpu {:8.4f} ms/row)\n",
          StoreName(store), lend ? "lent" : "copied", shape.in_flight, shape.workers, 1e3 * handed / n, 1e3 * wall / n,
          1e3 * cpu / n);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int32_t> vocabs;
  int n_rows = 256;
  std::string dir = std::filesystem::temp_directory_path().string();
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rows" && i + 1 < argc) n_rows = std::stoi(argv[++i]);
    else if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    else vocabs.push_back(std::stoi(a));
  }
  if (vocabs.empty()) vocabs = {49152, 262144};
  for (int32_t nv : vocabs) {
    fmt::print("n_vocab {} ({} KiB a F32 row), {} rows:\n", nv, nv * 4 / 1024, n_rows);
    auto rows = MakeRows(nv, n_rows);
    Parts(nv, rows, dir);
    FileWrites(rows, dir);
    Writer(nv, rows, dir);
  }
  return 0;
}
