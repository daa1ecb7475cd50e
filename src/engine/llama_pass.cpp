// LlamaEngine's teacher-forced pass: the prefill in its chunks, the rows at the probes, and the
// futures decoded at forks, each in a copy of the cache right after the chunk holding its point.
#include <fmt/format.h>
#include <llama.h>

#include <cmath>
#include <optional>
#include <utility>

#include "engine/engine.h"
#include "engine/llama_internal.h"
#include "runtime/runtime.h"
#include "util/util.h"

namespace flipscope {
namespace {

// Greedy token and its probability from a logits row (softmax in double).
std::pair<int32_t, float> GreedyWithProb(std::span<const float> row) {
  int32_t best = ArgmaxLowest(row);
  double mx = row[size_t(best)], sum = 0;
  for (float v : row) sum += std::exp(double(v) - mx);
  return {best, float(1.0 / sum)};
}

// Per position of a pass over n tokens, whether it hands over a row (a probe or a fork's point);
// an error names a position outside [0, n).
Result<std::vector<uint8_t>> OutputFlags(const PrefillRequest& r, int32_t n) {
  std::vector<uint8_t> out(size_t(n), 0);
  for (int32_t p : r.probes) {
    if (p < 0 || p >= n) return Status::Error(fmt::format("probe position {} outside 0..{}", p, n - 1));
    out[size_t(p)] = 1;
  }
  for (const ForkRequest& f : r.forks) {
    if (f.position < 0 || f.position >= n)
      return Status::Error(fmt::format("fork position {} outside 0..{}", f.position, n - 1));
    out[size_t(f.position)] = 1;
  }
  return out;
}

}  // namespace

float ProbOf(std::span<const float> row, int32_t token) {
  double mx = row[size_t(ArgmaxLowest(row))], sum = 0;
  for (float v : row) sum += std::exp(double(v) - mx);
  return float(std::exp(double(row[size_t(token)]) - mx) / sum);
}

Status LlamaEngine::Impl::DecodeChunk(std::span<const int32_t> tokens, int32_t pos0, int seq,
                                      const std::function<bool(int32_t)>& want_output) {
  llama_batch batch = llama_batch_init(int32_t(tokens.size()), 0, 1);
  for (size_t i = 0; i < tokens.size(); ++i) {
    batch.token[i] = tokens[i];
    batch.pos[i] = pos0 + int32_t(i);
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = seq;
    batch.logits[i] = want_output(pos0 + int32_t(i));
  }
  batch.n_tokens = int32_t(tokens.size());
  chunk_pos0 = pos0;
  chunk_end = pos0 + int32_t(tokens.size());
  ubatches_seen = 0;
  int rc = llama_decode(ctx, batch);
  llama_batch_free(batch);
  if (!tap_status.ok()) return std::exchange(tap_status, Status::Ok());
  if (rc != 0) {
    std::string why = TakeLlamaLogTail();
    return Status::Error(fmt::format("llama_decode failed with code {} at positions {}..{}{}", rc, pos0,
                                     pos0 + int32_t(tokens.size()) - 1, why.empty() ? "" : " (" + why + ")"));
  }
  return Status::Ok();
}

Status LlamaEngine::Prefill(std::span<const int32_t> tokens, std::span<const int32_t> probes, const RowSink& sink,
                            const ProgressFn& progress) {
  return impl_->Run({.tokens = tokens, .probes = probes, .sink = sink, .progress = progress});
}

Status LlamaEngine::Prefill(const PrefillRequest& req) { return impl_->Run(req); }

Status LlamaEngine::Impl::CheckPass(const PrefillRequest& r) const {
  for (size_t i = 1; i < r.forks.size(); ++i)
    if (r.forks[i].position < r.forks[i - 1].position) return Status::Error("fork requests must be sorted by position");
  if (int64_t(r.tokens.size()) > knobs.n_ctx)
    return Status::Error(fmt::format("the workload has {} tokens, more than the context of {} (ctx_size, -c)",
                                     r.tokens.size(), knobs.n_ctx));
  if ((!r.forks.empty() || r.plan) && n_seq_max < ForkSeq() + 1) return Status::Error("forking needs n_seq_max >= 2");
  return Status::Ok();
}

Status LlamaEngine::Impl::StartLoad(const PrefillRequest& r, std::optional<FillerLoad>* load) {
  if (knobs.load <= 0) return Status::Ok();
  // Forks decode in their own cells beside the fillers': room for a long future.
  const bool forks = !r.forks.empty() || r.plan;
  FS_ASSIGN_OR_RETURN(int cells, FillerCells(knobs.load, knobs.n_ctx, int32_t(r.tokens.size()), forks ? 1024 : 0));
  std::vector<FillerSource> pool = load_pool;
  if (pool.empty()) pool.push_back({"workload", std::vector<int32_t>(r.tokens.begin(), r.tokens.end())});
  load->emplace(*this, std::move(pool), cells);
  return (*load)->Start();
}

Result<std::vector<LlamaEngine::Impl::PendingFork>> LlamaEngine::Impl::HandRows(const PrefillRequest& r,
                                                                                std::span<const uint8_t> out_flag,
                                                                                const ReplayChunk& c, int32_t at,
                                                                                PassCursor* cur) {
  const int32_t nv = llama_vocab_n_tokens(vocab);
  std::vector<PendingFork> forks;
  for (int32_t p = c.begin; p < c.end; ++p) {
    if (!out_flag[size_t(p)]) continue;
    const float* lg = llama_get_logits_ith(ctx, at + p - c.begin);
    if (!lg) return Status::Error(fmt::format("no logits for position {}", p));
    std::span<const float> row(lg, size_t(nv));
    if (cur->next_probe < r.probes.size() && r.probes[cur->next_probe] == p) {
      Row out;
      out.index = cur->probe_index++;
      out.position = p;
      out.logits = row;
      // Only a fork planner reads the greedy token here; the capture's row workers take it
      // from the logits in their own scan, off this thread.
      out.argmax = r.plan ? ArgmaxLowest(row) : -1;
      FS_RETURN_IF_ERROR(r.sink(out));
      ++cur->next_probe;
      if (int32_t first = r.plan ? r.plan(out) : -1; first >= 0) {
        if (first >= nv) return Status::Error(fmt::format("fork at {}: token {} outside the vocabulary", p, first));
        FS_ASSIGN_OR_RETURN(ForkStart start, StartFork(r.tokens, p, row, first));
        forks.push_back({cur->n_planned++, {p, first}, true, std::move(start)});
      }
    }
    for (; cur->next_fork < r.forks.size() && r.forks[cur->next_fork].position == p; ++cur->next_fork) {
      FS_ASSIGN_OR_RETURN(ForkStart start, StartFork(r.tokens, p, row, r.forks[cur->next_fork].first));
      forks.push_back({cur->next_fork, r.forks[cur->next_fork], false, std::move(start)});
    }
  }
  return forks;
}

Status LlamaEngine::Impl::RunForks(const PrefillRequest& r, std::span<const PendingFork> forks) {
  llama_memory_t mem = llama_get_memory(ctx);
  for (const PendingFork& f : forks) {
    const int32_t p = f.req.position;
    llama_memory_seq_cp(mem, 0, ForkSeq(), 0, p + 1);
    auto fut = Greedy(ForkSeq(), p + 1, f.start, r.max_tokens, r.extend);
    llama_memory_seq_rm(mem, ForkSeq(), -1, -1);
    if (!fut.ok()) return fut.status();
    FS_RETURN_IF_ERROR(f.planned ? r.planned_sink(f.req, *fut) : r.fork_sink(f.index, *fut));
  }
  return Status::Ok();
}

Status LlamaEngine::Impl::Run(const PrefillRequest& r) {
  FS_RETURN_IF_ERROR(CheckPass(r));
  llama_memory_clear(llama_get_memory(ctx), true);
  const int32_t n = int32_t(r.tokens.size());
  FS_ASSIGN_OR_RETURN(const std::vector<uint8_t> out_flag, OutputFlags(r, n));
  std::optional<FillerLoad> load;
  load_record.reset();
  FS_RETURN_IF_ERROR(StartLoad(r, &load));
  FS_ASSIGN_OR_RETURN(const std::vector<ReplayChunk> chunks, Chunks(n));
  served_record.reset();
  double decode_s = 0;  // served: the decode steps, each from its llama_decode to its row handed over
  PassCursor cursor;
  for (const ReplayChunk& c : chunks) {
    const double t_chunk = c.single ? NowSeconds() : 0;
    auto want = [&](int32_t p) { return out_flag[size_t(p)] != 0; };
    auto chunk = r.tokens.subspan(size_t(c.begin), size_t(c.end - c.begin));
    int32_t at = 0;  // batch index of the chunk's first token (after the decoding fillers')
    FS_RETURN_IF_ERROR(load ? load->Decode(chunk, c.begin, want, &at) : DecodeChunk(chunk, c.begin, 0, want));
    // Hand over every row of the chunk first: a fork's decode replaces the context's outputs.
    FS_ASSIGN_OR_RETURN(const std::vector<PendingFork> forks, HandRows(r, out_flag, c, at, &cursor));
    if (r.rows_handed) FS_RETURN_IF_ERROR(r.rows_handed());
    if (c.single) decode_s += NowSeconds() - t_chunk;
    // The same chunks as a plain prefill, so the teacher-forced rows keep their numerics; each
    // fork copies the cache cells of [0, p] to its own sequence, decodes there and drops them.
    FS_RETURN_IF_ERROR(RunForks(r, forks));
    if (r.progress) r.progress(c.end);
  }
  if (load) load_record = load->Finish();
  if (knobs.replay == Replay::kServed) {
    served_record = ServedPlanOf(chunks, n, written);
    served_record->decode_s = decode_s;
    served_record->decode_tokens_per_s = decode_s > 0 ? double(served_record->fed_singly) / decode_s : 0.0;
  }
  return Status::Ok();
}

Result<Future> LlamaEngine::Impl::Greedy(int seq, int32_t pos, const ForkStart& start, int max_tokens,
                                         const ExtendFn& extend) {
  Future f;
  const double t0 = NowSeconds();
  int32_t tok = start.first;
  float prob = start.prob;
  GrammarState* g = start.grammar.get();
  f.decoding = g ? FutureDecoding::kGrammar : FutureDecoding::kFree;
  f.first_masked = start.first_masked;
  for (int i = 0; max_tokens > 0; ++i) {
    f.tokens.push_back(tok);
    f.probs.push_back(prob);
    if (const bool eog = llama_vocab_is_eog(vocab, tok); eog || pos + i + 1 >= knobs.n_ctx) {
      f.stop = eog ? FutureStop::kEnd : FutureStop::kContext;
      break;
    }
    if (i + 1 >= max_tokens && !(extend && extend(pos - 1, f.tokens))) break;  // kBudget
    int32_t one[1] = {tok};
    FS_RETURN_IF_ERROR(DecodeChunk(one, pos + i, seq, [](int32_t) { return true; }));
    const std::span<const float> row(llama_get_logits_ith(ctx, 0), size_t(llama_vocab_n_tokens(vocab)));
    if (g) {
      tok = g->Best(row);
      if (tok < 0) return Status::Error(fmt::format("future at {}: the grammar allows no token", pos - 1));
      g->Accept(tok);
      prob = ProbOf(row, tok);
    } else {
      std::tie(tok, prob) = GreedyWithProb(row);
    }
  }
  f.seconds = NowSeconds() - t0;
  return f;
}

Result<Future> LlamaEngine::DecodeFresh(std::span<const int32_t> prefix, int32_t first, int max_tokens,
                                        const ExtendFn& extend) {
  llama_memory_t mem = llama_get_memory(impl_->ctx);
  llama_memory_clear(mem, true);
  const int32_t n = int32_t(prefix.size());
  FS_ASSIGN_OR_RETURN(const std::vector<ReplayChunk> chunks, impl_->Chunks(n));  // the capture's own calls
  for (const ReplayChunk& c : chunks)
    FS_RETURN_IF_ERROR(impl_->DecodeChunk(prefix.subspan(size_t(c.begin), size_t(c.end - c.begin)), c.begin, 0,
                                          [&](int32_t p) { return p == n - 1; }));
  const float* lg = llama_get_logits_ith(impl_->ctx, -1);
  FS_ASSIGN_OR_RETURN(ForkStart start,
                      impl_->StartFork(prefix, n - 1, std::span<const float>(lg, size_t(n_vocab())), first));
  return impl_->Greedy(0, n, start, max_tokens, extend);
}

}  // namespace flipscope
