// exact engine internals shared by its files: the model held in FP64, the dequantization, the
// numeric kernels and the forward pass. Not part of the interface (exact.h is).
#pragma once

#include <ggml.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "exact/exact.h"
#include "util/status.h"

namespace flipscope::exact {

// A weight matrix in FP64, row-major [rows][cols]: GGUF's ne1 x ne0, i.e. [out][in].
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<double> w;
};

// A weight matrix as the file holds it, in the model's read-only mapping: `rows` rows of `cols`
// elements of `type` ([out][in]), each row whole blocks. The forward pass widens one layer's
// weights at a time (Widen), so memory holds the file plus one layer in FP64, not every weight at
// 8 bytes.
struct Weight {
  ggml_type type = GGML_TYPE_F32;
  const uint8_t* data = nullptr;
  int64_t rows = 0, cols = 0;
};

// The dequantization check of one ggml type: elements decoded, and elements where ggml's float
// result differs from the FP64 decode of the block format.
struct DequantTally {
  int64_t elements = 0;
  int64_t inexact = 0;
  bool checked = false;  // an FP64 decoder exists for the type
};
using DequantTallies = std::map<std::string, DequantTally>;

// The FP64 decode of n elements of a block-format type (n a multiple of its block size); false
// when there is no decoder for the type here.
bool DecodeF64(ggml_type type, const void* data, int64_t n, double* out);
// Dequantizes n elements through ggml's type traits (to_float), checks each against DecodeF64 and
// adds to tally[type name]; errors name the type ggml cannot convert.
// The work is shared among `threads` in whole chunks of blocks; the tally does not depend on it.
Status DequantizeChecked(ggml_type type, const void* data, int64_t n, std::vector<float>& out, DequantTallies& tally,
                         int threads = 1);

struct Hparams {
  std::string arch;    // the GGUF's architecture (kArchitectures)
  bool gemma = false;  // gemma2/3's graph: scaled embedding, GELU, post norms, sliding layers
  int64_t n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0, head_k = 0, head_v = 0, n_ff = 0, n_vocab = 0;
  int64_t n_rot = 0;                                 // rotated dimensions per head
  bool rope_neox = false;                            // gemma, qwen: pairs (i, i + n_rot/2); llama: (2i, 2i+1)
  double rope_base = 10000, rope_scale = 1;          // full-attention layers
  double rope_base_swa = 10000, rope_scale_swa = 1;  // sliding-window layers (gemma)
  double rms_eps = 1e-5;
  int64_t n_swa = 0;         // sliding window in tokens (0 = none)
  double embd_scale = 1;     // gemma: sqrt(n_embd)
  double q_scale = 1;        // multiplies Q before attention (gemma's attention scale)
  double kq_scale = 1;       // multiplies Q.K (llama: 1/sqrt(head dim))
  double logit_softcap = 0;  // final logit soft-capping (0 = none)
  double attn_softcap = 0;   // attention score soft-capping, cap * tanh(s / cap) (gemma2; 0 = none)
  // qwen3moe: experts, those used per token, each expert's MLP width, the weights' scale (0 or 1:
  // none; the chosen experts' probabilities are renormalized to sum 1 first).
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;
  double expert_weights_scale = 0;
  // qwen35 (Qwen 3.5 / 3.6): Gated DeltaNet layers (Layer::recurrent) with ssm_k_heads key heads
  // and ssm_v_heads value heads of width ssm_state and a causal convolution of ssm_conv taps;
  // its full-attention layers hold each head's output gate after its Q (attn_gate).
  int64_t ssm_conv = 0, ssm_state = 0, ssm_k_heads = 0, ssm_v_heads = 0;
  bool attn_gate = false;
  int64_t n_layer_skipped = 0;  // multi-token-prediction blocks after the n_layer run (not run)
  // Multi-section rope (rope.dimension_sections; all 0: none), interleaved as llama.cpp's IMROPE
  // when rope_imrope. For text every section but the 4th rotates by the position; the 4th by 0.
  std::array<int64_t, 4> rope_sections{};
  bool rope_imrope = false;
};

struct Layer {
  // A fused attn_qkv is split into wq, wk, wv and phi3's fused ffn_up into gate, up (row ranges).
  // With experts, gate, up and down hold n_expert stacked matrices and router the gating.
  Weight wq, wk, wv, wo, gate, up, down, router;
  std::vector<double> attn_norm, ffn_norm;
  std::vector<double> bq, bk, bv;                     // Q/K/V biases (empty: none)
  std::vector<double> q_norm, k_norm;                 // per-head norms (gemma3, qwen3)
  std::vector<double> post_attn_norm, post_ffn_norm;  // gemma2, gemma3
  bool swa = false;
  // qwen35's Gated DeltaNet layer: the mixed Q/K/V projection the convolution reads, the output
  // gate z, the write strength beta and the decay alpha per value head, the output projection;
  // the convolution's taps [channel][tap], dt bias, A (stored as -exp(A_log)) and the gated norm.
  bool recurrent = false;
  Weight ssm_qkv, ssm_z, ssm_beta, ssm_alpha, ssm_out;
  std::vector<double> ssm_conv, ssm_dt, ssm_a, ssm_norm;
};

// One layer's matrices widened to FP64 for the pass over it.
struct WideLayer {
  Matrix wq, wk, wv, wo, gate, up, down, router;        // router empty without experts
  Matrix ssm_qkv, ssm_z, ssm_beta, ssm_alpha, ssm_out;  // a Gated DeltaNet layer's (else empty)
};

struct Model {
  std::string path;
  std::shared_ptr<const void> mapping;  // the file's bytes, mapped read-only; every Weight points into it
  Hparams hp;
  std::vector<Layer> layers;
  std::vector<double> output_norm;
  // The embedding [n_vocab][n_embd] stays in the file (widened a row per token). The output
  // matrix (the embedding when tied) is kept in float, ggml's dequantization, checked exact: every
  // probe group's vocabulary projection reads all of it, and dequantizing it again for each group
  // cost Gemma 3 a third of its run time. It is widened 8192 rows at a time.
  Weight embd;
  std::vector<float> output;
  std::vector<double> output_bias;  // qwen2's optional output.bias (empty: none)
  DequantTallies dequant;
};

// The architectures the engine computes, as GGUF names them.
inline constexpr const char* kArchitectures = "llama, qwen2, qwen3, qwen3moe, qwen35, phi3, gemma2, gemma3";

// Reads the GGUF, checks the architecture and every tensor (dequantizing each once to check it),
// and keeps the file mapped for the pass.
Result<Model> LoadModel(const std::string& path, int threads = 1);

// The FP64 widening of w through ggml's float conversion (checked exact at load; F32 copied),
// its rows shared among `threads`.
Matrix Widen(const Weight& w, int threads = 1);
// Rows [r0, r0 + n) of w as a Weight of their own.
Weight Rows(const Weight& w, int64_t r0, int64_t n);
// Every matrix of L widened, each over `threads`.
WideLayer Widen(const Layer& L, int threads);

// ---- BLAS (blas.cpp) ----

// Loads OpenBLAS once (choosing its kernels, see blas.cpp) and sets its threads; the BLAS's
// description for the manifest, or an error naming the library.
Result<nlohmann::json> InitBlas(int threads);
// Sets the BLAS's threads for the calls that follow (process-wide).
void SetBlasThreads(int threads);
// c[m][n] = a[m][k] . (trans_b ? b[n][k]^T : b[k][n]), row-major with leading dimensions (dgemm).
void Gemm(bool trans_b, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb,
          double* c, int64_t ldc);

// ---- kernels (kernels.cpp) ----

// Runs fn(r0, r1) over rows [0, n) cut into at most `threads` contiguous ranges, one thread each
// (the caller's included); in one call when the work (n * width elements) is too small to pay for
// starting threads. A row-wise fn gives the same bits for any thread count.
void ParallelRows(int threads, int64_t n, int64_t width, const std::function<void(int64_t, int64_t)>& fn);
// y[n][W.rows] = x[n][W.cols] . W^T (cblas_dgemm).
void MatMulT(const double* x, int64_t n, const Matrix& w, double* y);
// Each of n rows of width d: x / sqrt(mean(x^2) + eps) * weight (weight empty: none).
void RmsNorm(double* x, int64_t n, int64_t d, std::span<const double> weight, double eps);
// e^x for x <= 0 in place, vectorized, within ~2 ulp; values below -700 give 0 (they are
// < 1e-304 of the row's maximum, which the caller subtracted).
void ExpNonPositive(double* x, int64_t n);
// max over i of x[i] * scale (-inf for n = 0): exact in any order, taken in eight lanes.
double ScaledMax(const double* x, int64_t n, double scale);
// The sum of x[0..n) in eight interleaved partial sums (lane l adds x[l], x[l + 8], ...), then
// those in a fixed tree: the same bits for the same n on every machine and thread layout, and a
// chain an eighth as long as a plain loop's (a softmax row's sum was latency-bound).
double LaneSum(const double* x, int64_t n);
// g = silu(g) * u (llama) or gelu_tanh(g) * u (gemma), n values.
void GatedActivation(bool gelu, double* g, const double* u, int64_t n);
// cos/sin of pos * scale * base^(-2i/n_rot) for positions [0, n) and pairs i < n_rot/2, in FP64.
struct RopeTable {
  int64_t half = 0;
  std::vector<double> cos, sin;  // [pos][i]
};
// With sections (any non-zero), a pair in the 4th section gets angle 0 (text positions there are
// 0), as llama.cpp's multi-section rope assigns pairs to sections (imrope: interleaved).
RopeTable MakeRopeTable(int64_t n, int64_t n_rot, double base, double scale,
                        const std::array<int64_t, 4>& sections = {}, bool imrope = false);
// Rotates heads of width head_dim at rows [row0, row0 + n) of x (row stride ld), n_heads per row.
void ApplyRope(double* x, int64_t row0, int64_t n, int64_t ld, int64_t n_heads, int64_t head_dim, int64_t n_rot,
               bool neox, const RopeTable& t);

// ---- experts (moe.cpp) ----

// Which tokens each expert takes and with what weight, from the router's logits [len][n_expert]
// (turned into probabilities in place): softmax, the n_expert_used most probable (ties to the
// lower id), renormalized to sum 1 and scaled by expert_weights_scale when set.
struct ExpertRoutes {
  std::vector<std::vector<int64_t>> tokens;  // [expert] ascending token indices
  std::vector<std::vector<double>> weights;  // [expert] the weight of each of those tokens
};
ExpertRoutes RouteExperts(const Hparams& hp, double* logits, int64_t len);
// out[len][n_embd] = qwen3moe's MLP of x[len][n_embd] as llama.cpp's build_moe_ffn computes it:
// softmax over the router's logits, the n_expert_used most probable experts, their probabilities
// renormalized to sum 1 (and scaled by expert_weights_scale when set), each chosen expert's
// SiLU-gated MLP weighted and summed.
void MoeMlp(const Hparams& hp, const WideLayer& W, const double* x, int64_t len, double* out);

// ---- qwen35 (qwen35.cpp) ----

// Reads qwen35's own hyperparameters (hp's shared ones already read): the DeltaNet shapes, the
// gated attention, the rope sections; refuses what llama.cpp's graph would not run.
Status ReadQwen35Hparams(const struct Reader& r, Hparams& hp);
// Which layers are recurrent: the file's attention.recurrent_layers, else all but every
// full_attention_interval-th (default 4).
Result<std::vector<bool>> Qwen35RecurrentLayers(const struct Reader& r, const Hparams& hp);
// Layer il of a qwen35 model: attention or DeltaNet tensors, the pre-MLP norm, the MLP.
Status ReadQwen35Layer(struct Reader& r, const Hparams& hp, int64_t il, bool recurrent, Layer& L);
// A DeltaNet layer's carried state between token chunks: the convolution's last ssm_conv - 1
// inputs per channel and the recurrent state per value head, zero at the sequence's start.
struct DeltaNetState {
  std::vector<double> conv;   // [ssm_conv - 1][channels], oldest first
  std::vector<double> state;  // [value head][key i][value j]
};
// out[len][n_embd] = the DeltaNet mixer (before the residual) over normed rows x[len][n_embd],
// continuing st over the chunk; value heads shared among threads.
void DeltaNetMixer(const Hparams& hp, const Layer& L, const WideLayer& W, const double* x, int64_t len,
                   DeltaNetState& st, int threads, double* out);

// ---- attention (attention.cpp) ----

struct AttentionShape {
  int64_t n = 0;  // tokens
  int64_t n_head = 0, n_head_kv = 0, head_k = 0, head_v = 0;
  double kq_scale = 1;
  double softcap = 0;  // scores become softcap * tanh(kq_scale * Q.K / softcap) before the softmax (0 = none)
  int64_t window = 0;  // sliding window (key p0 is seen from p1 when p1 - p0 < window); 0 = causal only
  int64_t block = 256;
  int threads = 1;  // worker threads over (query block, head) items
};
// out[n][n_head*head_v] = softmax(kq_scale * Q K^T + causal/window mask) V per head, with query
// head h reading kv head h / (n_head / n_head_kv), as ggml broadcasts; query blocks of `block`.
void Attention(const AttentionShape& s, const double* q, const double* k, const double* v, double* out);

// ---- forward (forward.cpp) ----

// Runs the layers over tokens (attention on `threads` workers) and returns the final-normed hidden states at probes
// [n_probes][n_embd]; progress gets the layers done (0..n_layer). With watch_sink, every point's row
// (exact.h: PointSink) at the probes goes to it as the pass computes it.
// Wall seconds of each part of a pass, summed over the layers (the manifest's engine.timing).
struct PassTimes {
  double embed = 0, widen = 0, project = 0, attention = 0, mlp = 0, logits = 0, rows = 0;
  double recurrent = 0;  // qwen35's DeltaNet mixers (their projections, convolution and delta rule)
};
Result<std::vector<double>> HiddenAtProbes(const Model& m, const ExactOptions& o, int threads,
                                           std::span<const int32_t> tokens, std::span<const int32_t> probes,
                                           const std::function<void(int64_t)>& layers_done,
                                           const PointSink* watch_sink = nullptr, PassTimes* times = nullptr);
// logits[n_rows][n_vocab] of hidden rows h[n_rows][n_embd], soft-capped where the model says.
void Logits(const Model& m, int threads, const double* h, int64_t n_rows, double* logits);

}  // namespace flipscope::exact
