// bare_prefill: the reference for capture's overhead. A plain libllama prefill of a token file
// with the same knobs as `flipscope capture`, in the same chunks, that keeps no logits but the
// last row's, or with --outputs those of the positions listed in a file (a capture's probes: the
// output rows llama.cpp then computes and copies out, without anything done with them).
// Prints "tokens seconds tok/s".
//   bare_prefill MODEL TOKENS.txt [-fa on|off] [-ctk T] [-ctv T] [-b N] [-ub N] [-t N] [-c N]
//                [--outputs POSITIONS.txt]
#include <llama.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

static ggml_type KvType(const std::string& n) {
  if (n == "f32") return GGML_TYPE_F32;
  if (n == "bf16") return GGML_TYPE_BF16;
  if (n == "q8_0") return GGML_TYPE_Q8_0;
  if (n == "q4_0") return GGML_TYPE_Q4_0;
  return GGML_TYPE_F16;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: bare_prefill MODEL TOKENS.txt [-fa on|off] [-ctk T] [-ctv T] [-b N] [-ub N] [-t N] [-c N] "
                 "[--outputs POSITIONS.txt]\n");
    return 2;
  }
  std::vector<llama_token> tokens;
  std::ifstream in(argv[2]);
  for (long v; in >> v;) tokens.push_back(llama_token(v));
  std::vector<char> out_flag;  // empty: only the last position
  for (int i = 3; i + 1 < argc; i += 2)
    if (std::string(argv[i]) == "--outputs") {
      std::ifstream pin(argv[i + 1]);
      out_flag.assign(tokens.size(), 0);
      for (long p; pin >> p;)
        if (p >= 0 && size_t(p) < tokens.size()) out_flag[size_t(p)] = 1;
    }
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 8192;
  cp.n_threads = cp.n_threads_batch = 2;
  cp.kv_unified = true;
  cp.swa_full = true;
  cp.no_perf = true;
  for (int i = 3; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "-fa")
      cp.flash_attn_type = v == "on" ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    else if (k == "-ctk")
      cp.type_k = KvType(v);
    else if (k == "-ctv")
      cp.type_v = KvType(v);
    else if (k == "-b")
      cp.n_batch = uint32_t(std::stoi(v));
    else if (k == "-ub")
      cp.n_ubatch = uint32_t(std::stoi(v));
    else if (k == "-t")
      cp.n_threads = cp.n_threads_batch = std::stoi(v);
    else if (k == "-c")
      cp.n_ctx = uint32_t(std::stoi(v));
  }
  auto t0 = std::chrono::steady_clock::now();
  llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (!model) return 1;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;
  auto t1 = std::chrono::steady_clock::now();
  const int n = int(tokens.size()), nb = int(cp.n_batch);
  llama_batch batch = llama_batch_init(nb, 0, 1);
  for (int begin = 0; begin < n; begin += nb) {
    int end = std::min(n, begin + nb);
    batch.n_tokens = end - begin;
    for (int i = begin; i < end; ++i) {
      int j = i - begin;
      batch.token[j] = tokens[size_t(i)];
      batch.pos[j] = i;
      batch.n_seq_id[j] = 1;
      batch.seq_id[j][0] = 0;
      batch.logits[j] = out_flag.empty() ? i == n - 1 : out_flag[size_t(i)] != 0;
    }
    if (llama_decode(ctx, batch) != 0) return 1;
  }
  auto t2 = std::chrono::steady_clock::now();
  double load = std::chrono::duration<double>(t1 - t0).count(), run = std::chrono::duration<double>(t2 - t1).count();
  std::printf("%d %.3f %.1f load %.3f\n", n, run, n / run, load);
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
