// The capture's row work off the decode thread: the per-row kernels (one scan for finiteness and
// argmax, the BF16 rounding) and a bounded pool of workers that run CaptureWriter::WriteRow while
// the engine computes the next batch. Internal to the capture stage (capture_file.cpp,
// capture_run.cpp, bench/row_cost.cpp); the stage's interface stays capture.h.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "capture/capture.h"
#include "util/util.h"

namespace flipscope {

// One pass over a logits row: its greedy token (ties to the lowest id, as ArgmaxLowest) when
// every value is finite; first_bad is the index of the first non-finite value, -1 when none.
struct RowScan {
  int32_t argmax = 0;
  int64_t first_bad = -1;
};
// Scans row (at least one value) for non-finite values and its argmax.
RowScan ScanRow(std::span<const float> row);

// Rounds row to BF16 (nearest, ties to even) into out (same length); finite values only.
void RoundToBf16(std::span<const float> row, std::span<uint16_t> out);

// How many rows may wait between the decode thread and the file, and how many threads write them.
struct RowPipelineShape {
  int in_flight = 1;  // row buffers (each n_vocab floats): the memory bound
  int workers = 1;
};
// The default shape for rows of n_vocab floats: up to 4 workers (fewer on fewer cores) and as
// many buffers as fit 64 MiB, at least two per worker and at most 256; in_flight > 0 overrides
// the buffer count (1: one row at a time, handed over in order).
RowPipelineShape DefaultRowPipelineShape(int32_t n_vocab, int in_flight);

// FLIPSCOPE_ROWS_IN_FLIGHT, the row buffers a capture may hold (its memory bound for rows: this
// many rows of n_vocab floats): 0 when unset (the default shape), else a whole number >= 1; an
// error naming the variable for anything else. 1 writes each row before the next is copied.
Result<int> RowsInFlightFromEnv();

// Full-logits rows from one producer thread to writer.WriteRow on shape.workers threads. Submit
// copies the row (the engine's buffer is overwritten by its next decode) into one of at most
// shape.in_flight buffers, waiting while all are taken. Lend hands over the engine's own row
// instead, and TakeBack (before the engine's next decode) returns every lent row once the
// workers and the producer itself have copied them out, in parallel: one thread copying every
// row held a GPU capture back (docs/performance.md). Rows are written at their fixed offsets, so
// the order in which workers finish does not change the file.
class RowPipeline {
 public:
  RowPipeline(CaptureWriter& writer, int32_t n_vocab, RowPipelineShape shape);
  ~RowPipeline();  // waits for the queued rows and joins the workers
  RowPipeline(const RowPipeline&) = delete;
  RowPipeline& operator=(const RowPipeline&) = delete;

  // Queues row `index`; once a row has failed, queues nothing more and returns, after the rows
  // already queued are done, the error of the lowest failed index (what a serial writer stopping
  // at its first failure reports).
  Status Submit(int64_t index, std::span<const float> logits);
  // Queues row `index` without copying it: logits must stay as they are until TakeBack (or
  // Finish) returns. Errors as Submit.
  Status Lend(int64_t index, std::span<const float> logits);
  // Returns once no lent row is read any more (each copied into a buffer, or written from where
  // it lies when no buffer is free), helping to copy them; the error of the lowest failed index,
  // or Ok.
  Status TakeBack();
  // Waits for every queued row; the error of the lowest failed index, or Ok.
  Status Finish();

 private:
  struct Job {
    int64_t index;
    int buffer;
    float* data;  // buffers_[buffer]'s values, taken under the lock
  };
  struct Lent {
    int64_t index;
    const float* data;  // the producer's, until TakeBack returns
  };
  void Work();
  Status DrainLocked(std::unique_lock<std::mutex>& lock);
  // A buffer for one row (reusing a free one, or allocating up to max_buffers_); -1 when none.
  int TakeBufferLocked();
  // Copies a lent row into a buffer and queues it, or writes it in place when no buffer is free;
  // called with the lock held, releases it while the row is read.
  void CopyOutLocked(const Lent& row, std::unique_lock<std::mutex>& lock);
  void RecordLocked(int64_t index, Status st);
  // The producer's side of TakeBack: wakes the workers for more than one lent row, copies lent
  // rows itself until none is left, and waits for the workers' copies.
  void CopyLentLocked(std::unique_lock<std::mutex>& lock);

  CaptureWriter& writer_;
  const size_t n_vocab_;
  const int max_buffers_;
  std::vector<std::vector<float>> buffers_;  // allocated on demand, up to max_buffers_
  std::vector<int> free_;                    // buffers not holding a queued row
  std::deque<Job> queue_;                    // rows copied in and not yet taken by a worker
  std::deque<Lent> lent_;                    // lent rows not yet taken to copy
  int lent_open_ = 0;                        // lent rows not yet copied out (queued or copying)
  int busy_ = 0;  // rows taken by a worker and not yet written
  bool stop_ = false;
  int64_t failed_index_ = -1;
  Status failed_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::vector<std::thread> threads_;
};

}  // namespace flipscope
