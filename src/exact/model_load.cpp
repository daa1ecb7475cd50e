// Loading a GGUF into the FP64 model: hyperparameters as llama.cpp reads them for llama, qwen2,
// qwen3, phi3, gemma2 and gemma3, every tensor checked for shape and accounted for (an unknown tensor means a graph
// feature this engine does not implement, so it refuses rather than compute another function).
#include <fcntl.h>
#include <fmt/format.h>
#include <gguf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <set>

#include "exact/internal.h"
#include "exact/reader.h"

namespace flipscope::exact {
namespace {

// The file's bytes, mapped read-only for the duration of the load.
struct Mapping {
  void* p = MAP_FAILED;
  size_t size = 0;
  ~Mapping() {
    if (p != MAP_FAILED) munmap(p, size);
  }
};

// The hyperparameters every architecture reads: shapes, heads, norm epsilon, rope base and scaling.
Status ReadSharedHparams(const Reader& r, int64_t n_vocab, Hparams& hp) {
  hp.arch = r.arch;
  hp.n_vocab = n_vocab;
  FS_ASSIGN_OR_RETURN(hp.n_layer, r.Int("block_count"));
  FS_ASSIGN_OR_RETURN(hp.n_embd, r.Int("embedding_length"));
  FS_ASSIGN_OR_RETURN(hp.n_ff, r.Int("feed_forward_length"));
  FS_ASSIGN_OR_RETURN(hp.n_head, r.Int("attention.head_count"));
  FS_ASSIGN_OR_RETURN(hp.n_head_kv, r.Int("attention.head_count_kv", hp.n_head));
  FS_ASSIGN_OR_RETURN(hp.head_k, r.Int("attention.key_length", hp.n_embd / hp.n_head));
  FS_ASSIGN_OR_RETURN(hp.head_v, r.Int("attention.value_length", hp.head_k));
  FS_ASSIGN_OR_RETURN(hp.n_rot, r.Int("rope.dimension_count", hp.head_k));
  FS_ASSIGN_OR_RETURN(hp.n_expert, r.Int("expert_count", 0));
  if ((hp.n_expert > 0) != (hp.arch == "qwen3moe"))
    return Status::Error(fmt::format("{}: {} with {} experts is not supported by the exact engine (experts: qwen3moe)",
                                     r.path, hp.arch, hp.n_expert));
  if (hp.n_head_kv <= 0 || hp.n_head % hp.n_head_kv != 0 || hp.n_rot > hp.head_k || hp.n_rot % 2 != 0)
    return Status::Error(fmt::format("{}: unsupported head layout ({} heads, {} kv heads, {} rotated of {})", r.path,
                                     hp.n_head, hp.n_head_kv, hp.n_rot, hp.head_k));
  hp.rms_eps = r.Float("attention.layer_norm_rms_epsilon", 0);
  if (!(hp.rms_eps > 0))
    return Status::Error(fmt::format("{}: missing key {}.attention.layer_norm_rms_epsilon", r.path, r.arch));
  hp.rope_base = r.Float("rope.freq_base", 10000);
  // Linear scaling divides positions by the factor; the other schemes change the angles' formula.
  int64_t st = r.Key("rope.scaling.type");
  std::string scaling = st >= 0 ? gguf_get_val_str(r.g, st) : "none";
  if (scaling == "linear")
    hp.rope_scale = 1.0 / r.Float("rope.scaling.factor", 1);
  else if (scaling != "none")
    return Status::Error(fmt::format("{}: rope scaling '{}' is not supported by the exact engine", r.path, scaling));
  hp.logit_softcap = r.Float("final_logit_softcapping", 0);
  return Status::Ok();
}

// qwen2, qwen3 and qwen3moe (with its experts' counts) as llama.cpp's qwen graphs read them.
Status ReadQwenHparams(const Reader& r, Hparams& hp) {
  if (hp.arch == "qwen3moe") {  // build_moe_ffn: softmax router, top-k, weights renormalized
    FS_ASSIGN_OR_RETURN(hp.n_expert_used, r.Int("expert_used_count"));
    if (hp.n_expert_used <= 0 || hp.n_expert_used > hp.n_expert)
      return Status::Error(fmt::format("{}: {} experts used of {}", r.path, hp.n_expert_used, hp.n_expert));
    FS_ASSIGN_OR_RETURN(hp.n_ff_exp, r.Int("expert_feed_forward_length", hp.n_ff / hp.n_expert_used));
    FS_ASSIGN_OR_RETURN(int64_t groups, r.Int("expert_group_count", 0));
    if (groups > 1)
      return Status::Error(fmt::format("{}: expert groups ({}) are not supported by the exact engine", r.path, groups));
    hp.expert_weights_scale = r.Float("expert_weights_scale", 0);
  }
  // llama.cpp's qwen graphs assert one head width rotated whole, rotate NeoX halves and scale Q.K
  // by the head width's root; they have no soft-capping.
  if (hp.n_rot != hp.head_k || hp.head_v != hp.head_k)
    return Status::Error(fmt::format("{}: {} needs the rope over the whole head (rotated {} of {}, value width {})",
                                     r.path, hp.arch, hp.n_rot, hp.head_k, hp.head_v));
  hp.rope_neox = true;
  hp.kq_scale = 1.0 / std::sqrt(double(hp.head_k));
  hp.logit_softcap = 0;
  return Status::Ok();
}

// gemma2 and gemma3: the embedding scale, Q scaled before attention (their 27B by n_embd /
// n_head), sliding layers with their own rope base. gemma2 also soft-caps the attention scores
// and always the logits (llama.cpp's defaults 50 and 30), slides every other layer from the
// first, with a 4096-token window unless the file says otherwise.
Status ReadGemmaHparams(const Reader& r, Hparams& hp) {
  const bool g2 = hp.arch == "gemma2";
  hp.gemma = true;
  hp.rope_neox = true;
  hp.embd_scale = std::sqrt(double(hp.n_embd));
  const bool is_27b = hp.n_layer == (g2 ? 46 : 62);
  hp.q_scale = is_27b ? 1.0 / std::sqrt(double(hp.n_embd / hp.n_head)) : 1.0 / std::sqrt(double(hp.head_k));
  FS_ASSIGN_OR_RETURN(hp.n_swa, r.Int("attention.sliding_window", g2 ? 4096 : 0));
  hp.rope_base_swa = r.Float("rope.freq_base_swa", g2 ? hp.rope_base : 10000);
  if (g2) {
    hp.rope_scale_swa = hp.rope_scale;  // gemma3's local layers keep scale 1
    hp.attn_softcap = r.Float("attn_logit_softcapping", 50);
    hp.logit_softcap = r.Float("final_logit_softcapping", 30);
  }
  return Status::Ok();
}

// The shared hyperparameters, then the architecture's own, as llama.cpp sets them.
Status ReadHparams(const Reader& r, int64_t n_vocab, Hparams& hp) {
  FS_RETURN_IF_ERROR(ReadSharedHparams(r, n_vocab, hp));
  if (hp.arch == "qwen35") return ReadQwen35Hparams(r, hp);
  if (hp.arch == "llama") {
    // llama.cpp's llama graph would use attention.scale, but its llama loader never reads the
    // key (only granite's do), so a llama file always runs with 1/sqrt(head width).
    hp.kq_scale = 1.0 / std::sqrt(double(hp.head_v));
    hp.logit_softcap = 0;  // llama.cpp's llama graph has none
    return Status::Ok();
  }
  if (hp.arch == "phi3") {
    // llama.cpp's phi3 graph: NeoX rope, Q scaled by 1/sqrt(head width) before attention, no
    // soft-capping; its sliding window is switched off at load (the GGUF's key is ignored).
    hp.rope_neox = true;
    hp.q_scale = 1.0 / std::sqrt(double(hp.head_k));
    hp.logit_softcap = 0;
    return Status::Ok();
  }
  if (hp.arch == "qwen2" || hp.arch == "qwen3" || hp.arch == "qwen3moe") return ReadQwenHparams(r, hp);
  return ReadGemmaHparams(r, hp);
}

// Which gemma layers slide: the GGUF's per-layer array, else every layer but each n-th (gemma3:
// n = 6 by default; gemma2: 2, so the even layers slide).
Result<std::vector<bool>> SwaLayers(const Reader& r, const Hparams& hp) {
  std::vector<bool> swa(size_t(hp.n_layer), false);
  if (!hp.gemma || hp.n_swa <= 0) return swa;
  int64_t id = r.Key("attention.sliding_window_pattern");
  if (id >= 0 && gguf_get_kv_type(r.g, id) == GGUF_TYPE_ARRAY) {
    if (gguf_get_arr_type(r.g, id) != GGUF_TYPE_BOOL || int64_t(gguf_get_arr_n(r.g, id)) < hp.n_layer)
      return Status::Error(
          fmt::format("{}: {}.attention.sliding_window_pattern is not one bool per layer", r.path, r.arch));
    const auto* b = static_cast<const bool*>(gguf_get_arr_data(r.g, id));
    for (int64_t il = 0; il < hp.n_layer; ++il) swa[size_t(il)] = b[il];
    return swa;
  }
  FS_ASSIGN_OR_RETURN(int64_t n_pattern, r.Int("attention.sliding_window_pattern", hp.arch == "gemma2" ? 2 : 6));
  for (int64_t il = 0; il < hp.n_layer; ++il) swa[size_t(il)] = n_pattern == 0 || il % n_pattern < n_pattern - 1;
  return swa;
}

// Q, K and V as llama.cpp's create_tensor_qkv finds them: three matrices with optional biases, or
// one fused attn_qkv (rows Q, then K, then V) with its bias or the three separate ones.
Status ReadQkv(Reader& r, const Hparams& hp, int64_t il, Layer& L) {
  auto n = [&](const char* what, const char* kind) { return fmt::format("blk.{}.{}.{}", il, what, kind); };
  const int64_t q = hp.n_head * hp.head_k, k = hp.n_head_kv * hp.head_k, v = hp.n_head_kv * hp.head_v;
  auto bias = [&](const char* what, int64_t len, std::vector<double>& out) -> Status {
    if (!r.Has(n(what, "bias"))) return Status::Ok();
    FS_ASSIGN_OR_RETURN(out, r.Vec(n(what, "bias"), len));
    return Status::Ok();
  };
  if (r.Has(n("attn_qkv", "weight"))) {
    FS_ASSIGN_OR_RETURN(Weight qkv, r.Mat(n("attn_qkv", "weight"), hp.n_embd, q + k + v));
    L.wq = Rows(qkv, 0, q), L.wk = Rows(qkv, q, k), L.wv = Rows(qkv, q + k, v);
    std::vector<double> b;
    FS_RETURN_IF_ERROR(bias("attn_qkv", q + k + v, b));
    if (!b.empty()) {
      L.bq.assign(b.begin(), b.begin() + q);
      L.bk.assign(b.begin() + q, b.begin() + q + k);
      L.bv.assign(b.begin() + q + k, b.end());
      return Status::Ok();
    }
    // llama.cpp adds separate biases to a fused product only when all three are there.
    const int present = r.Has(n("attn_q", "bias")) + r.Has(n("attn_k", "bias")) + r.Has(n("attn_v", "bias"));
    if (present != 0 && present != 3)
      return Status::Error(
          fmt::format("{}: blk.{}.attn_qkv has {} of the 3 separate Q/K/V biases", r.path, il, present));
  } else {
    FS_ASSIGN_OR_RETURN(L.wq, r.Mat(n("attn_q", "weight"), hp.n_embd, q));
    FS_ASSIGN_OR_RETURN(L.wk, r.Mat(n("attn_k", "weight"), hp.n_embd, k));
    FS_ASSIGN_OR_RETURN(L.wv, r.Mat(n("attn_v", "weight"), hp.n_embd, v));
  }
  FS_RETURN_IF_ERROR(bias("attn_q", q, L.bq));
  FS_RETURN_IF_ERROR(bias("attn_k", k, L.bk));
  return bias("attn_v", v, L.bv);
}

// The MLP's matrices: gate, up and down; phi3's fused gate-up; qwen3moe's router and experts.
Status ReadMlp(Reader& r, const Hparams& hp, int64_t il, Layer& L) {
  auto n = [&](const char* what) { return fmt::format("blk.{}.{}.weight", il, what); };
  if (hp.n_expert > 0) {  // a router [n_expert][n_embd] and n_expert stacked experts
    FS_ASSIGN_OR_RETURN(L.router, r.Mat(n("ffn_gate_inp"), hp.n_embd, hp.n_expert));
    FS_ASSIGN_OR_RETURN(L.gate, r.Mat(n("ffn_gate_exps"), hp.n_embd, hp.n_ff_exp, hp.n_expert));
    FS_ASSIGN_OR_RETURN(L.up, r.Mat(n("ffn_up_exps"), hp.n_embd, hp.n_ff_exp, hp.n_expert));
    FS_ASSIGN_OR_RETURN(L.down, r.Mat(n("ffn_down_exps"), hp.n_ff_exp, hp.n_embd, hp.n_expert));
    return Status::Ok();
  }
  if (hp.arch == "phi3") {  // one ffn_up of 2 n_ff rows: the first half gated by SiLU (ggml_swiglu)
    FS_ASSIGN_OR_RETURN(Weight up, r.Mat(n("ffn_up"), hp.n_embd, 2 * hp.n_ff));
    L.gate = Rows(up, 0, hp.n_ff), L.up = Rows(up, hp.n_ff, hp.n_ff);
  } else {
    FS_ASSIGN_OR_RETURN(L.gate, r.Mat(n("ffn_gate"), hp.n_embd, hp.n_ff));
    FS_ASSIGN_OR_RETURN(L.up, r.Mat(n("ffn_up"), hp.n_embd, hp.n_ff));
  }
  FS_ASSIGN_OR_RETURN(L.down, r.Mat(n("ffn_down"), hp.n_ff, hp.n_embd));
  return Status::Ok();
}

Status ReadLayer(Reader& r, const Hparams& hp, int64_t il, Layer& L) {
  auto n = [&](const char* what) { return fmt::format("blk.{}.{}.weight", il, what); };
  if (hp.arch == "qwen35") {
    FS_RETURN_IF_ERROR(ReadQwen35Layer(r, hp, il, L.recurrent, L));
    return ReadMlp(r, hp, il, L);
  }
  FS_ASSIGN_OR_RETURN(L.attn_norm, r.Vec(n("attn_norm"), hp.n_embd));
  FS_RETURN_IF_ERROR(ReadQkv(r, hp, il, L));
  FS_ASSIGN_OR_RETURN(L.wo, r.Mat(n("attn_output"), hp.n_head * hp.head_v, hp.n_embd));
  FS_ASSIGN_OR_RETURN(L.ffn_norm, r.Vec(n("ffn_norm"), hp.n_embd));
  FS_RETURN_IF_ERROR(ReadMlp(r, hp, il, L));
  if (hp.arch == "gemma3" || hp.arch == "qwen3" || hp.arch == "qwen3moe") {  // each head of Q and K normed
    FS_ASSIGN_OR_RETURN(L.q_norm, r.Vec(n("attn_q_norm"), hp.head_k));
    FS_ASSIGN_OR_RETURN(L.k_norm, r.Vec(n("attn_k_norm"), hp.head_k));
  }
  if (!hp.gemma) return Status::Ok();
  FS_ASSIGN_OR_RETURN(L.post_attn_norm, r.Vec(n("post_attention_norm"), hp.n_embd));
  FS_ASSIGN_OR_RETURN(L.post_ffn_norm, r.Vec(n("post_ffw_norm"), hp.n_embd));
  return Status::Ok();
}

// The whole file mapped read-only.
Result<std::shared_ptr<Mapping>> MapFile(const std::string& path) {
  auto map = std::make_shared<Mapping>();
  int fd = open(path.c_str(), O_RDONLY);
  struct stat sb {};
  if (fd < 0 || fstat(fd, &sb) != 0) {
    if (fd >= 0) close(fd);
    return Status::Error(path + ": cannot open");
  }
  map->size = size_t(sb.st_size);
  map->p = mmap(nullptr, map->size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map->p == MAP_FAILED) return Status::Error(path + ": cannot map");
  return map;
}

// Whether name belongs to a block after the layers run (qwen35's multi-token prediction).
bool InSkippedLayer(const std::string& name, const Hparams& hp) {
  int64_t il = -1;
  return hp.n_layer_skipped > 0 && std::sscanf(name.c_str(), "blk.%ld.", &il) == 1 && il >= hp.n_layer &&
         il < hp.n_layer + hp.n_layer_skipped;
}

// A tensor the load never read is a graph feature the engine does not implement: refused by name.
Status CheckEveryTensorUsed(const Reader& r, const Hparams& hp) {
  for (int64_t i = 0; i < gguf_get_n_tensors(r.g); ++i) {
    std::string name = gguf_get_tensor_name(r.g, i);
    if (!r.used.count(name) && !InSkippedLayer(name, hp))
      return Status::Error(
          fmt::format("{}: tensor {} ({} graph feature) is not implemented by the exact engine", r.path, name, r.arch));
  }
  return Status::Ok();
}

}  // namespace

Result<Model> LoadModel(const std::string& path, int threads) {
  ggml_context* meta = nullptr;
  gguf_init_params ip{/*no_alloc=*/true, &meta};
  std::unique_ptr<gguf_context, void (*)(gguf_context*)> g(gguf_init_from_file(path.c_str(), ip), gguf_free);
  if (!g) return Status::Error(path + ": not a readable GGUF file");
  std::unique_ptr<ggml_context, void (*)(ggml_context*)> meta_owner(meta, ggml_free);
  int64_t arch_id = gguf_find_key(g.get(), "general.architecture");
  std::string arch = arch_id >= 0 ? gguf_get_val_str(g.get(), arch_id) : "(none)";
  if (arch != "llama" && arch != "gemma2" && arch != "gemma3" && arch != "qwen2" && arch != "qwen3" &&
      arch != "qwen3moe" && arch != "qwen35" && arch != "phi3")
    return Status::Error(
        fmt::format("{}: architecture '{}' is not supported by the exact engine ({})", path, arch, kArchitectures));

  FS_ASSIGN_OR_RETURN(std::shared_ptr<Mapping> map, MapFile(path));
  Model m;
  m.path = path;
  m.mapping = map;
  Reader r{path, g.get(), meta,       static_cast<const uint8_t*>(map->p) + gguf_get_data_offset(g.get()),
           arch, {},      &m.dequant, threads};
  ggml_tensor* te = ggml_get_tensor(meta, "token_embd.weight");
  if (!te) return Status::Error(path + ": missing tensor token_embd.weight");
  FS_RETURN_IF_ERROR(ReadHparams(r, te->ne[1], m.hp));
  const Hparams& hp = m.hp;
  FS_ASSIGN_OR_RETURN(std::vector<bool> swa, SwaLayers(r, hp));
  std::vector<bool> recurrent(size_t(hp.n_layer), false);
  if (hp.arch == "qwen35") {
    FS_ASSIGN_OR_RETURN(recurrent, Qwen35RecurrentLayers(r, hp));
  }
  FS_ASSIGN_OR_RETURN(std::vector<float> embd, r.Floats("token_embd.weight", hp.n_embd, hp.n_vocab));
  m.embd = r.InFile("token_embd.weight", hp.n_vocab, hp.n_embd);
  FS_ASSIGN_OR_RETURN(m.output_norm, r.Vec("output_norm.weight", hp.n_embd));
  // The output matrix, or the embedding when tied (gemma2's graph always ties it: an output.weight
  // there is left unused and refused below).
  if (r.Has("output.weight") && hp.arch != "gemma2") {
    FS_ASSIGN_OR_RETURN(m.output, r.Floats("output.weight", hp.n_embd, hp.n_vocab));
  } else {
    m.output = std::move(embd);
  }
  if (hp.arch == "qwen2" && r.Has("output.bias")) {  // qwen2's graph adds it when present
    FS_ASSIGN_OR_RETURN(m.output_bias, r.Vec("output.bias", hp.n_vocab));
  }
  m.layers.resize(size_t(hp.n_layer));
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    m.layers[size_t(il)].recurrent = recurrent[size_t(il)];
    FS_RETURN_IF_ERROR(ReadLayer(r, hp, il, m.layers[size_t(il)]));
    m.layers[size_t(il)].swa = swa[size_t(il)];
  }
  FS_RETURN_IF_ERROR(CheckEveryTensorUsed(r, hp));
  return m;
}

}  // namespace flipscope::exact
