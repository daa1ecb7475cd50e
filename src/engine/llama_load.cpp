// LlamaEngine under load: filler sequences share every batch with the measured sequence 0, in
// one unified KV cache, as a server batches the requests it has in flight.
#include <fmt/format.h>

#include "engine/llama_internal.h"
#include "runtime/runtime.h"

namespace flipscope {

FillerLoad::FillerLoad(LlamaEngine::Impl& e, std::vector<FillerSource> pool, int max_cells)
    : e_(e), pool_(std::move(pool)), max_cells_(max_cells) {
  const uint64_t seed = uint64_t(e.knobs.load_seed);
  for (int s = 1; s <= e.knobs.load; ++s) slots_.push_back({PlanFillerJob(seed, s, 0, pool_, max_cells_)});
}

int32_t FillerLoad::Greedy(int out) const {
  const float* lg = llama_get_logits_ith(e_.ctx, out);
  return ArgmaxLowest(std::span<const float>(lg, size_t(llama_vocab_n_tokens(e_.vocab))));
}

void FillerLoad::NextJob(Slot& s) {
  FillerJobRecord done = s.job.Record(pool_);
  done.prefilled = s.prefilled;
  done.generated = s.generated;
  ++n_jobs_;
  if (jobs_.size() < kMaxRecorded) jobs_.push_back(done);
  llama_memory_seq_rm(llama_get_memory(e_.ctx), s.job.slot, -1, -1);
  s = Slot{PlanFillerJob(uint64_t(e_.knobs.load_seed), s.job.slot, s.job.index + 1, pool_, max_cells_)};
}

Status FillerLoad::Start() {
  for (Slot& s : slots_) {
    if (!s.job.warm) continue;
    const auto& src = pool_[size_t(s.job.source)].tokens;
    auto prompt = std::span<const int32_t>(src).subspan(size_t(s.job.offset), size_t(s.job.length));
    for (int begin = 0; begin < s.job.length; begin += e_.knobs.n_batch) {
      const int end = std::min(s.job.length, begin + e_.knobs.n_batch);
      FS_RETURN_IF_ERROR(e_.DecodeChunk(prompt.subspan(size_t(begin), size_t(end - begin)), begin, s.job.slot,
                                        [&](int32_t p) { return p == s.job.length - 1; }));
    }
    s.prefilled = s.job.length;
    s.next = Greedy(-1);
  }
  return Status::Ok();
}

Status FillerLoad::Decode(std::span<const int32_t> chunk, int32_t pos0, const std::function<bool(int32_t)>& want_output,
                          int32_t* at) {
  llama_batch batch = llama_batch_init(e_.n_batch_ctx, 0, 1);
  auto add = [&](int32_t token, int32_t pos, int seq, bool output) {
    const int i = batch.n_tokens++;
    batch.token[i] = token;
    batch.pos[i] = pos;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = seq;
    batch.logits[i] = output;
    return i;
  };
  // The order llama-server builds its batches in: generating requests' tokens first, then
  // prompts; the physical batches (-ub) are cut from it in this order.
  int decoding = 0, prefilling = 0;
  for (Slot& s : slots_) {
    s.out = -1;
    if (s.next < 0) continue;
    s.out = add(s.next, s.job.length + s.generated, s.job.slot, true);
    ++decoding;
  }
  *at = batch.n_tokens;
  for (size_t i = 0; i < chunk.size(); ++i) add(chunk[i], pos0 + int32_t(i), 0, want_output(pos0 + int32_t(i)));
  for (Slot& s : slots_) {
    if (s.next >= 0) continue;
    const auto& src = pool_[size_t(s.job.source)].tokens;
    const int end = std::min(s.job.length, s.prefilled + s.job.chunk);
    for (int p = s.prefilled; p < end; ++p) {
      const bool last = p == s.job.length - 1 && s.job.generate > 0;
      const int i = add(src[size_t(s.job.offset + p)], p, s.job.slot, last);
      if (last) s.out = i;
    }
    prefilling += end - s.prefilled;
    s.prefilled = end;
  }
  ++n_steps_;
  if (steps_.size() < 2 * kMaxRecorded) steps_.push_back({decoding, int64_t(chunk.size()), prefilling});
  const int rc = llama_decode(e_.ctx, batch);
  llama_batch_free(batch);
  if (rc != 0) {
    std::string why = TakeLlamaLogTail();
    return Status::Error(fmt::format("llama_decode failed with code {} at positions {}..{} with {} fillers{}", rc, pos0,
                                     pos0 + int32_t(chunk.size()) - 1, slots_.size(),
                                     why.empty() ? "" : " (" + why + ")"));
  }
  Advance();
  return Status::Ok();
}

void FillerLoad::Advance() {
  for (Slot& s : slots_) {
    const bool was_decoding = s.next >= 0;
    if (was_decoding) ++s.generated;
    const bool prompt_done = s.prefilled == s.job.length;
    if (!prompt_done) continue;
    if (s.generated >= s.job.generate) {
      NextJob(s);
      continue;
    }
    const int32_t token = Greedy(s.out);
    if (llama_vocab_is_eog(e_.vocab, token)) {
      NextJob(s);
      continue;
    }
    s.next = token;
  }
}

LlamaLoadRecord FillerLoad::Finish() {
  for (Slot& s : slots_) NextJob(s);  // records the jobs in flight and drops their cells
  return {.fillers = int64_t(slots_.size()),
          .seed = e_.knobs.load_seed,
          .cells_per_filler = max_cells_,
          .context_batch = e_.n_batch_ctx,
          .jobs = jobs_,
          .jobs_total = n_jobs_,
          .batches = steps_,
          .batches_total = n_steps_};
}

}  // namespace flipscope
