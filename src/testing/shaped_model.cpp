// Models at any shape, streamed to disk (tiny_model.h: WriteShapedModel): the GGUF header and
// tensor table first (ggml's writer, metadata only), then each tensor's rows generated, quantized
// and written a slab at a time, every row from its own seed so that the bytes do not depend on the
// thread count.
#include <fmt/format.h>
#include <ggml.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "testing/tiny_model_parts.h"

namespace flipscope::fixtures {
namespace {

using detail::Rng;
using detail::Spec;

Result<ggml_type> MatrixType(const std::string& name) {
  for (auto [n, t] : {std::pair{"f32", GGML_TYPE_F32}, {"f16", GGML_TYPE_F16}, {"bf16", GGML_TYPE_BF16},
                      {"q8_0", GGML_TYPE_Q8_0}, {"q4_k", GGML_TYPE_Q4_K}})
    if (name == n) return t;
  return Status::InvalidArgument("matrix type " + name + ": expected f32, f16, bf16, q8_0 or q4_k");
}

// The seed of row r of tensor i: the model's seed mixed with both.
uint64_t RowSeed(uint64_t seed, size_t i, int64_t r) {
  Rng mix{seed ^ (uint64_t(i) * 0x9e3779b97f4a7c15ull)};
  mix.Next();
  return mix.Next() ^ (uint64_t(r) * 0xbf58476d1ce4e5b9ull);
}

// Rows [r0, r1) of tensor i (spec s, type t) into out, shared among threads.
void MakeRows(const Spec& s, size_t i, ggml_type t, const TinyModelOptions& o, int64_t r0, int64_t r1, int threads,
              uint8_t* out) {
  const size_t row_bytes = ggml_row_size(t, s.ne0);
  auto work = [&](int64_t a, int64_t b) {
    std::vector<float> v(size_t(s.ne0));
    for (int64_t r = a; r < b; ++r) {
      Rng rng{RowSeed(o.seed, i, r)};
      detail::Fill(s, o, rng, v.data(), s.ne0);
      ggml_quantize_chunk(t, v.data(), out + size_t(r - r0) * row_bytes, 0, 1, s.ne0, nullptr);
    }
  };
  const int64_t n = r1 - r0, parts = std::min<int64_t>(std::max(1, threads), n);
  std::vector<std::thread> pool;
  for (int64_t p = 1; p < parts; ++p) pool.emplace_back(work, r0 + n * p / parts, r0 + n * (p + 1) / parts);
  work(r0, r0 + n / parts);
  for (auto& th : pool) th.join();
}

}  // namespace

Status WriteShapedModel(const std::string& path, const TinyModelOptions& o, int threads) {
  FS_ASSIGN_OR_RETURN(ggml_type mtype, MatrixType(o.matrix_type));
  detail::Vocab vocab = detail::MakeVocab();
  for (int i = int(vocab.tokens.size()); i < o.n_vocab; ++i) vocab.Add(fmt::format("<|seed_{}|>", i), -1000.0f, 1);
  std::unique_ptr<gguf_context, void (*)(gguf_context*)> g(gguf_init_empty(), gguf_free);
  detail::SetMetadata(g.get(), o, vocab);
  const std::vector<Spec> specs = detail::TensorSpecs(o, int(vocab.tokens.size()));
  ggml_init_params ip = {ggml_tensor_overhead() * (specs.size() + 1), nullptr, true};
  std::unique_ptr<ggml_context, void (*)(ggml_context*)> ctx(ggml_init(ip), ggml_free);
  std::vector<ggml_type> types;
  for (const Spec& s : specs) {
    const ggml_type t = s.matrix ? mtype : GGML_TYPE_F32;
    if (s.ne0 % ggml_blck_size(t) != 0)
      return Status::InvalidArgument(fmt::format("{}: rows of {} do not split into {} blocks", s.name, s.ne0,
                                                 ggml_type_name(t)));
    ggml_tensor* x = s.ne2 > 1    ? ggml_new_tensor_3d(ctx.get(), t, s.ne0, s.ne1, s.ne2)
                     : s.ne1 == 1 ? ggml_new_tensor_1d(ctx.get(), t, s.ne0)
                                  : ggml_new_tensor_2d(ctx.get(), t, s.ne0, s.ne1);
    ggml_set_name(x, s.name.c_str());
    gguf_add_tensor(g.get(), x);
    types.push_back(t);
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(tmp.c_str(), "wb"), std::fclose);
  if (!f) return Status::Io(tmp + ": cannot write");
  if (!gguf_write_to_file_ptr(g.get(), f.get(), /*only_meta=*/true)) return Status::Io(tmp + ": cannot write");
  const size_t align = gguf_get_alignment(g.get());
  std::vector<uint8_t> slab;
  for (size_t i = 0; i < specs.size(); ++i) {
    const Spec& s = specs[i];
    const size_t row_bytes = ggml_row_size(types[i], s.ne0);
    const int64_t rows = s.ne1 * s.ne2, per_slab = std::max<int64_t>(1, (int64_t(1) << 26) / s.ne0);
    for (int64_t r0 = 0; r0 < rows; r0 += per_slab) {
      const int64_t r1 = std::min(rows, r0 + per_slab);
      slab.resize(size_t(r1 - r0) * row_bytes);
      MakeRows(s, i, types[i], o, r0, r1, threads, slab.data());
      if (std::fwrite(slab.data(), 1, slab.size(), f.get()) != slab.size()) return Status::Io(tmp + ": write failed");
    }
    const size_t bytes = size_t(rows) * row_bytes, pad = (align - bytes % align) % align;
    const std::vector<uint8_t> zeros(pad, 0);
    if (pad && std::fwrite(zeros.data(), 1, pad, f.get()) != pad) return Status::Io(tmp + ": write failed");
  }
  if (std::fflush(f.get()) != 0) return Status::Io(tmp + ": write failed");
  f.reset();
  std::filesystem::rename(tmp, path);
  return Status::Ok();
}

}  // namespace flipscope::fixtures
