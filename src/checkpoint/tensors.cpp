// `tensors`: pairs the tensors of two checkpoints by name (across GGUF / safetensors through
// llama.cpp's naming, or a user map), hashes both sides, and for pairs whose bytes differ
// decodes both to F32 in chunks and accumulates the difference in FP64.
#include "checkpoint/tensors.h"

#include <fmt/format.h>
#include <ggml.h>
#include <xxhash.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <thread>

#include "runtime/runtime.h"
#include "util/util.h"

namespace flipscope {
namespace {

constexpr uint64_t kHashChunk = 64ull << 20;         // bytes per hashing work item (fixes the digest)
constexpr int64_t kCompareChunk = int64_t(1) << 20;  // elements per comparison work item

// A paired (or unpaired) tensor and what the walk needs to know about it.
struct Job {
  TensorDiff diff;
  const TensorEntry* a = nullptr;
  const TensorEntry* b = nullptr;
  int perm_heads = 0;      // > 0: also compare with llama.cpp's Q/K permutation undone
  bool a_is_gguf = false;  // which side holds the permuted layout
  std::vector<uint64_t> chunk_hash[2];
};

// FP64 sums over decoded elements; raw, and with B's rows permuted (perm_*).
struct Sums {
  double dd = 0, aa = 0, bb = 0, ab = 0, max_abs = 0;
  int64_t n_differ = 0, nonfinite = 0;
  double dd_p = 0, ab_p = 0, max_p = 0;
  int64_t n_differ_p = 0;
  void Add(const Sums& o) {
    dd += o.dd, aa += o.aa, bb += o.bb, ab += o.ab, max_abs = std::max(max_abs, o.max_abs);
    n_differ += o.n_differ, nonfinite += o.nonfinite;
    dd_p += o.dd_p, ab_p += o.ab_p, max_p = std::max(max_p, o.max_p), n_differ_p += o.n_differ_p;
  }
};

std::vector<int64_t> TrimmedShape(std::vector<int64_t> s) {
  while (s.size() > 1 && s.front() == 1) s.erase(s.begin());  // [1, n] and [n] are the same tensor
  return s;
}

bool SameEncoding(const TensorEntry& a, const TensorEntry& b) {
  return a.ggml_type >= 0 ? a.ggml_type == b.ggml_type : (b.ggml_type < 0 && a.dtype == b.dtype);
}

// Runs fn(i) for i in [0, n) on worker threads while this thread draws the progress bar.
// fn returns the bytes it read; bar may be null (no progress shown).
void ParallelFor(size_t n, int threads, const std::function<uint64_t(size_t)>& fn, Progress* bar) {
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> done{0};
  std::atomic<int> running{threads};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < n;) done += fn(i);
      --running;
    });
  while (running.load() > 0) {
    if (bar) bar->Update(done.load() >> 20);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& th : pool) th.join();
  if (bar) bar->Finish();
}

// Decodes elements [e0, e0 + n) of t (e0 and n whole rows) to F32 and releases the pages.
void Decode(const Checkpoint& c, const TensorEntry& t, int64_t e0, int64_t n, float* out) {
  const uint64_t off = uint64_t(e0 / t.row_elements) * t.row_bytes, len = uint64_t(n / t.row_elements) * t.row_bytes;
  const uint8_t* src = c.Data(t) + off;
  if (t.ggml_type == GGML_TYPE_F32)
    std::memcpy(out, src, size_t(n) * 4);
  else
    ggml_get_type_traits(ggml_type(t.ggml_type))->to_float(src, out, n);
  c.files[size_t(t.file)]->Release(t.offset + off, len);
}

// Row of B that holds row r of A once llama.cpp's permute() (convert_hf_to_gguf.py: rows of each
// head reordered as reshape(heads, 2, hd/2).swapaxes(1, 2)) is undone.
int64_t PermutedRow(int64_t r, int64_t hd, bool a_is_gguf) {
  const int64_t h = r / hd, w = r % hd, half = hd / 2;
  return a_is_gguf ? h * hd + (w % 2) * half + w / 2  // GGUF row (h, j, i) <- HF row (h, i, j)
                   : h * hd + (w % half) * 2 + w / half;
}

void Accumulate(double x, double y, double& dd, double& max_abs, int64_t& n_differ) {
  double d = x - y;
  dd += d * d;
  max_abs = std::max(max_abs, std::fabs(d));
  n_differ += d != 0;
}

// Compares elements [e0, e0 + n) of a job's pair.
Sums CompareChunk(const Checkpoint& ca, const Checkpoint& cb, const Job& job, int64_t e0, int64_t n) {
  thread_local std::vector<float> va, vb;
  va.resize(size_t(n));
  vb.resize(size_t(n));
  Decode(ca, *job.a, e0, n, va.data());
  Decode(cb, *job.b, e0, n, vb.data());
  Sums s;
  const int64_t g = job.a->Elements() / std::max<int64_t>(1, job.a->shape.empty() ? 1 : job.a->shape[0]);
  const int64_t hd = job.perm_heads ? job.a->shape[0] / job.perm_heads : 0;
  for (int64_t k = 0; k < n; ++k) {
    double x = va[size_t(k)], y = vb[size_t(k)];
    if (!std::isfinite(x) || !std::isfinite(y)) {
      bool same = (std::isnan(x) && std::isnan(y)) || x == y;
      s.nonfinite += !same;
      continue;
    }
    Accumulate(x, y, s.dd, s.max_abs, s.n_differ);
    s.aa += x * x, s.bb += y * y, s.ab += x * y;
    if (hd) {
      int64_t r = (e0 + k) / g, col = (e0 + k) % g;
      double yp = vb[size_t(PermutedRow(r, hd, job.a_is_gguf) * g + col - e0)];
      if (!std::isfinite(yp)) continue;
      Accumulate(x, yp, s.dd_p, s.max_p, s.n_differ_p);
      s.ab_p += x * yp;
    }
  }
  return s;
}

Result<std::map<std::string, std::string>> ReadMap(const std::string& path) {
  std::map<std::string, std::string> m;
  if (path.empty()) return m;
  FS_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Status::Error(path + ": not a JSON object of {\"tensor in A\": \"tensor in B\"}");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_string()) return Status::Error(path + ": the value of '" + it.key() + "' is not a tensor name");
    m[it.key()] = it.value().get<std::string>();
  }
  return m;
}

// Q/K projections of a GGUF made from Hugging Face weights may be permuted (llama-style archs).
int PermutationHeads(const std::string& gguf_name, const Checkpoint& gguf, const TensorEntry& t) {
  auto ends = [&](const char* s) { return gguf_name.ends_with(s); };
  int heads = (ends(".attn_q.weight") || ends(".attn_q.bias"))   ? gguf.n_head
              : (ends(".attn_k.weight") || ends(".attn_k.bias")) ? gguf.n_head_kv
                                                                 : 0;
  if (heads <= 0 || t.shape.empty() || t.shape[0] % heads != 0) return 0;
  int64_t hd = t.shape[0] / heads;
  return hd >= 2 && hd % 2 == 0 ? heads : 0;
}

// Pairs A's tensors with B's: the user map first, then by name (llama.cpp's names across formats).
Result<std::vector<Job>> PairTensors(const Checkpoint& ca, const Checkpoint& cb, const std::string& map_path) {
  FS_ASSIGN_OR_RETURN(auto user_map, ReadMap(map_path));
  const bool cross = ca.format != cb.format;
  const Checkpoint& gguf = ca.format == CheckpointFormat::kGguf ? ca : cb;
  auto key = [&](const Checkpoint& c, const TensorEntry& t) {
    if (!cross || c.format == CheckpointFormat::kGguf) return t.name;
    std::string g = GgufNameOf(t.name, gguf.architecture);
    return g.empty() ? t.name : g;
  };
  std::map<std::string, const TensorEntry*> b_by_name, b_by_key;
  for (const auto& t : cb.tensors) b_by_name[t.name] = &t, b_by_key.emplace(key(cb, t), &t);
  std::map<std::string, const TensorEntry*> a_by_name;
  for (const auto& t : ca.tensors) a_by_name[t.name] = &t;
  for (const auto& [na, nb] : user_map) {
    if (!a_by_name.count(na))
      return Status::Error(fmt::format("{}: '{}' is not a tensor of {}", map_path, na, ca.path));
    if (!b_by_name.count(nb))
      return Status::Error(fmt::format("{}: '{}' is not a tensor of {}", map_path, nb, cb.path));
  }
  std::map<const TensorEntry*, bool> b_taken;
  for (const auto& [na, nb] : user_map) b_taken[b_by_name[nb]] = true;
  std::vector<Job> jobs;
  for (const auto& t : ca.tensors) {
    Job j;
    j.a = &t;
    std::string k = key(ca, t);
    if (auto m = user_map.find(t.name); m != user_map.end())
      j.b = b_by_name[m->second];
    else if (auto it = b_by_key.find(k); it != b_by_key.end() && !b_taken[it->second])
      j.b = it->second;
    if (j.b) b_taken[j.b] = true;
    j.diff.component = TensorComponent(k);
    if (cross && j.b) {
      j.a_is_gguf = ca.format == CheckpointFormat::kGguf;
      j.perm_heads = PermutationHeads(j.a_is_gguf ? t.name : j.b->name, gguf, t);
    }
    jobs.push_back(std::move(j));
  }
  for (const auto& t : cb.tensors)
    if (!b_taken[&t]) {
      Job j;
      j.b = &t;
      j.diff.component = TensorComponent(key(cb, t));
      jobs.push_back(std::move(j));
    }
  for (auto& j : jobs) {
    TensorDiff& d = j.diff;
    if (j.a) d.name_a = j.a->name, d.dtype_a = j.a->dtype, d.shape_a = j.a->shape;
    if (j.b) d.name_b = j.b->name, d.dtype_b = j.b->dtype, d.shape_b = j.b->shape;
    d.state = !j.b ? TensorState::kMissing : !j.a ? TensorState::kExtra : TensorState::kDifferent;
    if (j.a && j.b && TrimmedShape(j.a->shape) != TrimmedShape(j.b->shape)) {
      d.state = TensorState::kShapeMismatch;
      if (j.a->Elements() == j.b->Elements()) d.note = "same number of elements: reshaped or transposed";
    }
  }
  return jobs;
}

// Turns a pair's sums into its state and metrics.
void Finish(Job& j, const Sums& s) {
  TensorDiff& d = j.diff;
  const bool use_perm = j.perm_heads > 0 && s.dd_p < s.dd;
  auto rel = [&](double dd) { return s.aa > 0 ? std::sqrt(dd / s.aa) : dd == 0 ? 0.0 : INFINITY; };
  auto cos = [&](double ab) { return s.aa > 0 && s.bb > 0 ? ab / std::sqrt(s.aa * s.bb) : s.aa == s.bb ? 1.0 : 0.0; };
  d.compared = true;
  d.rel_l2 = rel(use_perm ? s.dd_p : s.dd);
  d.max_abs = use_perm ? s.max_p : s.max_abs;
  d.cosine = cos(use_perm ? s.ab_p : s.ab);
  d.n_differ = use_perm ? s.n_differ_p : s.n_differ;
  d.nonfinite_mismatch = s.nonfinite;
  d.state = d.n_differ == 0 && s.nonfinite == 0 ? TensorState::kSameValues : TensorState::kDifferent;
  if (use_perm) {
    d.qk_unpermuted = true;
    d.rel_l2_raw = rel(s.dd);
    d.note = fmt::format(
        "stored in llama.cpp's permuted Q/K row order (convert_hf_to_gguf.py, heads: {}); "
        "compared with it undone; rel L2 as stored {:.3g}",
        j.perm_heads, d.rel_l2_raw);
  }
}

// Hashes both sides of every pair of equal shapes in fixed-size chunks, on worker threads.
void HashPairs(std::vector<Job>& jobs, const Checkpoint& ca, const Checkpoint& cb, int threads, bool progress) {
  const Checkpoint* side_ckpt[2] = {&ca, &cb};
  struct HashItem {
    Job* job;
    int side;
    size_t chunk;
  };
  std::vector<HashItem> hash_items;
  uint64_t hash_bytes = 0;
  for (auto& j : jobs) {
    if (j.diff.state != TensorState::kDifferent) continue;
    for (int side = 0; side < 2; ++side) {
      const TensorEntry* t = side ? j.b : j.a;
      size_t chunks = std::max<size_t>(1, size_t((t->bytes + kHashChunk - 1) / kHashChunk));
      j.chunk_hash[side].assign(chunks, 0);
      for (size_t c = 0; c < chunks; ++c) hash_items.push_back({&j, side, c});
      hash_bytes += t->bytes;
    }
  }
  std::optional<Progress> hash_bar;
  if (progress) hash_bar.emplace("hashing", hash_bytes >> 20, "MiB");
  ParallelFor(
      hash_items.size(), threads,
      [&](size_t i) -> uint64_t {
        const HashItem& h = hash_items[i];
        const TensorEntry& t = h.side ? *h.job->b : *h.job->a;
        const uint64_t off = h.chunk * kHashChunk, len = std::min(kHashChunk, t.bytes - std::min(t.bytes, off));
        h.job->chunk_hash[h.side][h.chunk] = XXH3_64bits(side_ckpt[h.side]->Data(t) + off, len);
        side_ckpt[h.side]->files[size_t(t.file)]->Release(t.offset + off, len);
        return len;
      },
      hash_bar ? &*hash_bar : nullptr);
}

// Settles every pair whose bytes match as identical, and decodes and compares the others in
// chunks on worker threads.
void CompareDifferent(std::vector<Job>& jobs, const Checkpoint& ca, const Checkpoint& cb, int threads, bool progress) {
  struct CompareItem {
    Job* job;
    int64_t e0, n;
    size_t slot;
  };
  std::vector<CompareItem> items;
  std::vector<Sums> partial;
  uint64_t compare_bytes = 0;
  for (auto& j : jobs) {
    if (j.diff.state != TensorState::kDifferent) continue;
    for (int side = 0; side < 2; ++side) {
      auto& ch = j.chunk_hash[side];
      (side ? j.diff.hash_b : j.diff.hash_a) = ch.size() == 1 ? ch[0] : XXH3_64bits(ch.data(), ch.size() * 8);
    }
    if (SameEncoding(*j.a, *j.b) && j.a->bytes == j.b->bytes && j.diff.hash_a == j.diff.hash_b) {
      j.diff.state = TensorState::kIdentical;
      continue;
    }
    if (j.a->ggml_type < 0 || j.b->ggml_type < 0) {
      j.diff.state = TensorState::kBytesDiffer;
      j.diff.note = fmt::format("{} vs {}: not a float type, compared by bytes only", j.a->dtype, j.b->dtype);
      continue;
    }
    const int64_t n = j.a->Elements(), outer = j.a->shape.empty() ? 1 : j.a->shape[0];
    int64_t unit = j.a->row_elements > 0 ? j.a->row_elements : 1;
    if (j.perm_heads) unit = std::lcm(unit, outer / j.perm_heads * (n / outer));  // whole heads per chunk
    const int64_t step = std::max<int64_t>(unit, kCompareChunk / unit * unit);
    for (int64_t e0 = 0; e0 < n; e0 += step)
      items.push_back({&j, e0, std::min(step, n - e0), partial.size()}), partial.emplace_back();
    compare_bytes += j.a->bytes + j.b->bytes;
  }
  std::optional<Progress> compare_bar;
  if (progress) compare_bar.emplace("comparing", compare_bytes >> 20, "MiB");
  ParallelFor(
      items.size(), threads,
      [&](size_t i) -> uint64_t {
        const CompareItem& it = items[i];
        partial[it.slot] = CompareChunk(ca, cb, *it.job, it.e0, it.n);
        return uint64_t(it.n) * (it.job->a->bytes + it.job->b->bytes) / uint64_t(it.job->a->Elements());
      },
      compare_bar ? &*compare_bar : nullptr);

  // Chunks are reduced in order, so the sums do not depend on the thread count.
  std::map<Job*, Sums> sums;
  for (const auto& it : items) sums[it.job].Add(partial[it.slot]);
  for (auto& j : jobs)
    if (j.diff.state == TensorState::kDifferent) Finish(j, sums[&j]);
}

}  // namespace

Result<TensorsReport> DiffCheckpoints(const std::string& path_a, const std::string& path_b,
                                      const TensorsOptions& opts) {
  const double t0 = NowSeconds();
  EnsureLlamaInit();  // ggml's GGUF reader logs through llama.cpp's logger
  FS_ASSIGN_OR_RETURN(Checkpoint ca, OpenCheckpoint(path_a));
  FS_ASSIGN_OR_RETURN(Checkpoint cb, OpenCheckpoint(path_b));
  FS_ASSIGN_OR_RETURN(std::vector<Job> jobs, PairTensors(ca, cb, opts.map_path));
  const int threads = opts.threads > 0 ? opts.threads : int(std::max(1u, std::thread::hardware_concurrency()));

  HashPairs(jobs, ca, cb, threads, opts.log.bars);
  CompareDifferent(jobs, ca, cb, threads, opts.log.bars);

  TensorsReport r;
  r.path_a = ca.path, r.path_b = cb.path, r.format_a = ca.format, r.format_b = cb.format;
  r.bytes_a = ca.TotalBytes(), r.bytes_b = cb.TotalBytes();
  r.n_tensors_a = int(ca.tensors.size()), r.n_tensors_b = int(cb.tensors.size());
  for (auto& j : jobs) r.tensors.push_back(std::move(j.diff));
  r.seconds = NowSeconds() - t0;
  return r;
}

}  // namespace flipscope
