// Served replay: the schedule of llama_decode calls that computes a transcript as a deployed
// agent did. What the model read (system, user, tool results) went through prefill; what it wrote
// was decoded one token per call over the cache both had filled (docs/served.md).
#include <fmt/format.h>

#include <algorithm>

#include "engine/engine.h"
#include "engine/llama_internal.h"

namespace flipscope {

std::vector<ReplayChunk> PlanReplay(int32_t n, int n_batch, std::span<const uint8_t> written) {
  std::vector<ReplayChunk> chunks;
  auto wrote = [&](int32_t p) { return size_t(p) < written.size() && written[size_t(p)] != 0; };
  // The logits at p predict token p+1: the decode path computed them exactly when the model had
  // written token p (it was fed back as a decode step) and then wrote p+1 from them. The first
  // token of a message came from the prompt's last row, a prefill row; the last one (end of turn)
  // is fed with the next prompt.
  auto single = [&](int32_t p) { return !written.empty() && wrote(p) && wrote(p + 1); };
  int32_t p = 0;
  while (p < n) {
    if (single(p)) {
      chunks.push_back({p, p + 1, true});
      ++p;
      continue;
    }
    int32_t end = p;
    while (end < n && !single(end)) ++end;
    for (int32_t b = p; b < end; b += n_batch) chunks.push_back({b, std::min(end, b + n_batch), false});
    p = end;
  }
  return chunks;
}

ServedPlan ServedPlanOf(std::span<const ReplayChunk> chunks, int32_t n, std::span<const uint8_t> written) {
  int64_t singles = 0, segments = 0, prefill_chunks = 0, written_tokens = 0, runs = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (chunks[i].single) {
      ++singles;
      continue;
    }
    ++prefill_chunks;
    segments += i == 0 || chunks[i - 1].single;  // a segment starts after a decode step
  }
  for (int32_t p = 0; p < n && size_t(p) < written.size(); ++p) {
    written_tokens += written[size_t(p)] != 0;
    runs += written[size_t(p)] != 0 && (p == 0 || !written[size_t(p - 1)]);
  }
  ServedPlan plan;
  plan.fed_singly = singles, plan.decode_calls = int64_t(chunks.size()), plan.prefill_segments = segments;
  plan.prefill_chunks = prefill_chunks, plan.written_tokens = written_tokens, plan.written_runs = runs;
  return plan;
}

Result<std::vector<ReplayChunk>> LlamaEngine::Impl::Chunks(int32_t n) const {
  if (knobs.replay == Replay::kPrefill) return PlanReplay(n, knobs.n_batch, {});
  if (int64_t(written.size()) < n)
    return Status::Error(fmt::format(
        "--replay served: which tokens the model wrote is known for {} tokens, the pass has {} (the workload's "
        "spans decide it)",
        written.size(), n));
  return PlanReplay(n, knobs.n_batch, written);
}

void LlamaEngine::SetWritten(std::vector<uint8_t> written) { impl_->written = std::move(written); }
std::optional<ServedPlan> LlamaEngine::ServedRecord() const { return impl_->served_record; }

}  // namespace flipscope
