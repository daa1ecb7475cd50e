// The progress of a capture's rows: which part of the work a token count stands for.
#include "capture/rows_progress.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "capture/capture_run.h"

namespace flipscope {

namespace {
// Whether served replay feeds position p alone (the engine's PlanReplay rule).
bool FedAlone(std::span<const uint8_t> written, int64_t p) {
  auto wrote = [&](int64_t q) { return q >= 0 && size_t(q) < written.size() && written[size_t(q)] != 0; };
  return wrote(p) && wrote(p + 1);
}

const char* LabelOf(bool served, int n_layer) {
  return n_layer > 0 ? "exact (FP64)" : served ? "served replay" : "prefill";
}
}  // namespace

int64_t ServedDecodeSteps(std::span<const uint8_t> written, int64_t n) {
  int64_t steps = 0;
  for (int64_t p = 0; p < n; ++p) steps += FedAlone(written, p);
  return steps;
}

RowsProgress::RowsProgress(const Log& log, int64_t n_tokens, std::span<const uint8_t> written, int n_layer)
    : bar_(log, LabelOf(!written.empty(), n_layer), uint64_t(std::max<int64_t>(0, n_tokens)), "tok"),
      n_(n_tokens),
      n_layer_(n_layer) {
  if (written.empty()) return;
  steps_before_.assign(size_t(n_ + 1), 0);
  for (int64_t p = 0; p < n_; ++p) steps_before_[size_t(p + 1)] = steps_before_[size_t(p)] + FedAlone(written, p);
}

std::string RowsProgress::Note() const {
  std::string note;
  auto add = [&](const std::string& part) { note += (note.empty() ? "" : ", ") + part; };
  if (!end_.empty()) {
    add(end_);
  } else if (!steps_before_.empty()) {
    add(fmt::format("decode step {} of {}", steps_before_[size_t(std::clamp<int64_t>(done_, 0, n_))], DecodeSteps()));
  } else if (n_layer_ > 0 && n_ > 0) {
    // Layer l done is reported as n * l / (n_layer + 1) tokens; the last share is the logits.
    const int64_t layer = int64_t(std::ceil(double(done_) * (n_layer_ + 1) / double(n_)));
    add(layer > n_layer_ ? std::string("logits") : fmt::format("layer {} of {}", layer, n_layer_));
  }
  if (forks_ > 0) add(fmt::format("{} fork{} decoded in {:.1f} s", forks_, forks_ == 1 ? "" : "s", fork_s_));
  return note;
}

void RowsProgress::Tokens(int64_t done) {
  done_ = done;
  bar_.Note(Note());
  bar_.Update(uint64_t(std::max<int64_t>(0, done)));
}

void RowsProgress::Forked(double seconds) {
  ++forks_;
  fork_s_ += seconds;
  bar_.Note(Note());
  bar_.Update(uint64_t(std::max<int64_t>(0, done_)));
}

void RowsProgress::Finish(bool ok, std::optional<double> decode_s) {
  if (ok) done_ = n_;
  if (ok && decode_s && DecodeSteps() > 0)
    end_ = fmt::format("{} decode steps in {:.1f} s ({} steps/s)", DecodeSteps(), *decode_s,
                       RateText(*decode_s > 0 ? double(DecodeSteps()) / *decode_s : 0));
  else if (ok && n_layer_ > 0)
    end_ = fmt::format("{} layers", n_layer_);
  bar_.Note(Note());
  bar_.Update(uint64_t(std::max<int64_t>(0, done_)));
  bar_.Finish();
}

}  // namespace flipscope
