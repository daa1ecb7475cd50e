// The pieces of the model writers shared by tiny_model.cpp (small models, in memory) and
// shaped_model.cpp (any shape, streamed): the generator, the vocabulary, the metadata, the tensor
// list and the values. Not an interface: tiny_model.h is.
#pragma once

#include <gguf.h>

#include <cstdint>
#include <string>
#include <vector>

#include "testing/tiny_model.h"

namespace flipscope::fixtures::detail {

// SplitMix64: a tiny, well-mixed deterministic generator.
struct Rng {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float Uniform() { return float(double(Next() >> 11) / double(1ull << 53)) * 2.0f - 1.0f; }
};

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  void Add(std::string t, float score, int32_t type) {
    tokens.push_back(std::move(t));
    scores.push_back(score);
    types.push_back(type);
  }
};

// One tensor of the model: its name, shape [ne0, ne1], and whether it is a weight matrix.
struct Spec {
  std::string name;
  int64_t ne0, ne1;
  bool matrix;
  int64_t ne2 = 1;  // experts: one [ne0, ne1] matrix each
};

// The SPM vocabulary of the tiny models (byte fallback, ChatML control tokens).
Vocab MakeVocab();
// Writes the model's metadata (o.arch of o's shapes, the vocabulary, ChatML when o asks) into g.
void SetMetadata(gguf_context* g, const TinyModelOptions& o, const Vocab& vocab);
// The tensors of o.arch of o's shapes over n_vocab tokens, in file order.
std::vector<Spec> TensorSpecs(const TinyModelOptions& o, int n_vocab);
// n values of tensor s drawn from rng: matrices uniform, scaled to their width (and by
// o.weight_scale; output.weight also by o.output_scale), norm weights near 1, biases near 0.
void Fill(const Spec& s, const TinyModelOptions& o, Rng& rng, float* v, int64_t n);

}  // namespace flipscope::fixtures::detail
