// The row kernels and the row pipeline (row_pipeline.h).
#include "capture/row_pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace flipscope {

RowScan ScanRow(std::span<const float> row) {
  // Eight independent running maxima and one flag instead of ArgmaxLowest's dependent compare
  // chain: the compiler keeps them in vector registers, so the scan runs at memory speed. The
  // argmax is then the first value equal to the maximum, which is ArgmaxLowest's answer for
  // finite rows (its strict '>' keeps the lowest of equal values, and -0 == +0 for both).
  constexpr size_t kLanes = 8;
  const float* p = row.data();
  const size_t n = row.size(), whole = n / kLanes * kLanes;
  float lane_max[kLanes];
  std::fill(lane_max, lane_max + kLanes, -std::numeric_limits<float>::infinity());
  uint32_t bad = 0;
  for (size_t i = 0; i < whole; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) {
      const float v = p[i + j];
      bad |= uint32_t((std::bit_cast<uint32_t>(v) & 0x7F800000u) == 0x7F800000u);
      lane_max[j] = v > lane_max[j] ? v : lane_max[j];
    }
  float mx = *std::max_element(lane_max, lane_max + kLanes);
  for (size_t i = whole; i < n; ++i) {
    bad |= uint32_t(!std::isfinite(p[i]));
    mx = p[i] > mx ? p[i] : mx;
  }
  RowScan s;
  if (bad) {
    s.first_bad = std::find_if(p, p + n, [](float v) { return !std::isfinite(v); }) - p;
    return s;
  }
  s.argmax = int32_t(std::find(p, p + n, mx) - p);
  return s;
}

namespace {
// Round to nearest, ties to even: add 0x7FFF plus the kept part's lowest bit, keep the top half.
uint16_t Bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
}  // namespace

void RoundToBf16(std::span<const float> row, std::span<uint16_t> out) {
  // Fixed blocks of eight, as in ScanRow, so that -O2 vectorizes the loop (half the time of the
  // plain loop on this CPU: bench/row_cost).
  constexpr size_t kLanes = 8;
  const size_t n = row.size(), whole = n / kLanes * kLanes;
  const float* p = row.data();
  uint16_t* o = out.data();
  for (size_t i = 0; i < whole; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) o[i + j] = Bf16(p[i + j]);
  for (size_t i = whole; i < n; ++i) o[i] = Bf16(p[i]);
}

RowPipelineShape DefaultRowPipelineShape(int32_t n_vocab, int in_flight) {
  RowPipelineShape s;
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  s.workers = std::clamp(cores - 1, 1, 4);
  const size_t row_bytes = std::max<size_t>(1, size_t(n_vocab) * sizeof(float));
  s.in_flight = in_flight > 0 ? in_flight
                              : std::clamp(int((size_t(64) << 20) / row_bytes), 2 * s.workers, 256);
  s.workers = std::min(s.workers, s.in_flight);
  return s;
}

Result<int> RowsInFlightFromEnv() {
  const char* v = std::getenv("FLIPSCOPE_ROWS_IN_FLIGHT");
  if (!v || !*v) return 0;
  int n = 0;
  const char* end = v + std::strlen(v);
  auto [at, ec] = std::from_chars(v, end, n);
  if (ec != std::errc() || at != end || n < 1 || n > 65536)
    return Status::InvalidArgument(
        fmt::format("FLIPSCOPE_ROWS_IN_FLIGHT: '{}' is not a whole number of rows from 1 to 65536", v));
  return n;
}

RowPipeline::RowPipeline(CaptureWriter& writer, int32_t n_vocab, RowPipelineShape shape)
    : writer_(writer), n_vocab_(size_t(n_vocab)), max_buffers_(std::max(1, shape.in_flight)) {
  buffers_.reserve(size_t(max_buffers_));
  for (int i = 0; i < std::max(1, shape.workers); ++i) threads_.emplace_back([this] { Work(); });
}

RowPipeline::~RowPipeline() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;  // the workers still finish every queued row before they leave
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

int RowPipeline::TakeBufferLocked() {
  if (!free_.empty()) {
    const int b = free_.back();
    free_.pop_back();
    return b;
  }
  if (int(buffers_.size()) >= max_buffers_) return -1;
  buffers_.emplace_back(n_vocab_);
  return int(buffers_.size()) - 1;
}

Status RowPipeline::Submit(int64_t index, std::span<const float> logits) {
  // A row of the wrong width is the writer's error to name; it has no buffer to go in.
  if (logits.size() != n_vocab_) return writer_.WriteRow(index, logits);
  std::unique_lock lock(mu_);
  done_cv_.wait(lock, [&] { return failed_index_ >= 0 || !free_.empty() || int(buffers_.size()) < max_buffers_; });
  if (failed_index_ >= 0) return DrainLocked(lock);
  const int b = TakeBufferLocked();
  float* data = buffers_[size_t(b)].data();
  lock.unlock();
  std::memcpy(data, logits.data(), logits.size_bytes());  // the buffer is this thread's until queued
  lock.lock();
  queue_.push_back({index, b, data});
  lock.unlock();
  work_cv_.notify_one();
  return Status::Ok();
}

Status RowPipeline::Lend(int64_t index, std::span<const float> logits) {
  if (logits.size() != n_vocab_) return writer_.WriteRow(index, logits);
  std::unique_lock lock(mu_);
  if (failed_index_ >= 0) return DrainLocked(lock);
  lent_.push_back({index, logits.data()});
  ++lent_open_;
  return Status::Ok();  // the workers are woken by TakeBack, once the decode's rows are all lent
}

Status RowPipeline::TakeBack() {
  std::unique_lock lock(mu_);
  CopyLentLocked(lock);
  return failed_index_ >= 0 ? failed_ : Status::Ok();
}

void RowPipeline::CopyLentLocked(std::unique_lock<std::mutex>& lock) {
  // A decode step's single row is copied here, without waking a worker for it (served replay
  // hands over one row a step); more rows are shared with the workers.
  if (lent_.size() > 1) work_cv_.notify_all();
  while (!lent_.empty()) {  // the producer copies too: it has nothing else to do until then
    const Lent row = lent_.front();
    lent_.pop_front();
    CopyOutLocked(row, lock);
  }
  done_cv_.wait(lock, [&] { return lent_open_ == 0; });
}

void RowPipeline::CopyOutLocked(const Lent& row, std::unique_lock<std::mutex>& lock) {
  const int b = TakeBufferLocked();
  float* data = b < 0 ? nullptr : buffers_[size_t(b)].data();
  lock.unlock();
  // No buffer free: the row is written from where it lies, which holds the producer back as
  // Submit's wait for a buffer would.
  Status st = data ? Status::Ok() : writer_.WriteRow(row.index, std::span<const float>(row.data, n_vocab_));
  if (data) std::memcpy(data, row.data, n_vocab_ * sizeof(float));
  lock.lock();
  if (data) {
    queue_.push_back({row.index, b, data});
    work_cv_.notify_one();
  }
  RecordLocked(row.index, std::move(st));
  --lent_open_;
  done_cv_.notify_all();
}

void RowPipeline::RecordLocked(int64_t index, Status st) {
  if (!st.ok() && (failed_index_ < 0 || index < failed_index_)) {
    failed_index_ = index;
    failed_ = std::move(st);
  }
}

Status RowPipeline::Finish() {
  std::unique_lock lock(mu_);
  return DrainLocked(lock);
}

Status RowPipeline::DrainLocked(std::unique_lock<std::mutex>& lock) {
  CopyLentLocked(lock);  // rows lent and never taken back (the engine stopped between)
  done_cv_.wait(lock, [&] { return queue_.empty() && busy_ == 0; });
  return failed_index_ >= 0 ? failed_ : Status::Ok();
}

void RowPipeline::Work() {
  std::unique_lock lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || !queue_.empty() || !lent_.empty(); });
    if (!lent_.empty()) {  // the producer waits on these: copy them out first
      const Lent row = lent_.front();
      lent_.pop_front();
      CopyOutLocked(row, lock);
      continue;
    }
    if (queue_.empty()) return;  // stopped, and nothing left to write
    const Job job = queue_.front();
    queue_.pop_front();
    ++busy_;
    lock.unlock();
    Status st = writer_.WriteRow(job.index, std::span<const float>(job.data, n_vocab_));
    lock.lock();
    --busy_;
    RecordLocked(job.index, std::move(st));
    free_.push_back(job.buffer);
    done_cv_.notify_all();
  }
}

}  // namespace flipscope
