// exact_dump: the exact engine's FP64 logits at every position of a workload's first N tokens, as
// raw little-endian files for the independent numpy reference (tests/ref/exact_ref.py):
// PREFIX.tokens (int32 [N]) and PREFIX.logits (float64 [N, n_vocab]).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>

#include "exact/exact.h"
#include "workload/workload.h"

int main(int argc, char** argv) {
  CLI::App app{"FP64 logits of the exact engine at every position of a workload prefix"};
  std::string model, workload, prefix;
  flipscope::WorkloadOptions wo;
  int n = 64;
  app.add_option("-m,--model", model, "GGUF model")->required();
  app.add_option("-w,--workload", workload, "workload file")->required();
  app.add_option("--chat-template", wo.chat_template, "template FILE or NAME");
  app.add_option("-n", n, "tokens of the prefix")->default_val(64);
  app.add_option("-o,--output", prefix, "output prefix")->required();
  CLI11_PARSE(app, argc, argv);
  flipscope::InitLlamaLogging(false);  // the tokenizer load stays quiet
  auto fail = [](const flipscope::Status& st) {
    std::fprintf(stderr, "exact_dump: error: %s\n", st.message().c_str());
    return 1;
  };
  auto w = flipscope::LoadWorkload(workload, model, wo);
  if (!w.ok()) return fail(w.status());
  std::vector<int32_t> tokens(w->tokens.begin(), w->tokens.begin() + std::min<size_t>(size_t(n), w->tokens.size()));
  auto e = flipscope::ExactEngine::Create(model);
  if (!e.ok()) return fail(e.status());
  std::vector<int32_t> probes(tokens.size());
  for (size_t i = 0; i < probes.size(); ++i) probes[i] = int32_t(i);
  std::ofstream logits(prefix + ".logits", std::ios::binary);
  flipscope::Status st = (*e)->PrefillF64(
      tokens, probes,
      [&](const flipscope::RowF64& r) {
        logits.write(reinterpret_cast<const char*>(r.logits.data()), std::streamsize(r.logits.size() * sizeof(double)));
        return flipscope::Status::Ok();
      },
      nullptr);
  if (!st.ok()) return fail(st);
  std::ofstream(prefix + ".tokens", std::ios::binary)
      .write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(tokens.size() * sizeof(int32_t)));
  return logits.good() ? 0 : fail(flipscope::Status::Error(prefix + ".logits: write failed"));
}
