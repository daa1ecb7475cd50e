// Grammar-constrained futures: greedy decoding under the lazy tool-call grammar a llama.cpp
// server samples with (common_sampler: the grammar sees only what the model writes, and a greedy
// token the grammar rejects is replaced by the best token it allows).
#include <fmt/format.h>
#include <llama.h>

#include <cmath>
#include <stdexcept>

#include "engine/llama_internal.h"

namespace flipscope {

GrammarState::~GrammarState() {
  if (sampler_) llama_sampler_free(sampler_);
}

Result<std::unique_ptr<GrammarState>> GrammarState::Start(const llama_vocab* vocab, const DecodeGrammar& g) {
  std::vector<const char*> patterns;
  for (const std::string& p : g.trigger_patterns) patterns.push_back(p.c_str());
  std::vector<llama_token> tokens(g.trigger_tokens.begin(), g.trigger_tokens.end());
  llama_sampler* s = nullptr;
  try {
    // llama.cpp's parser reports a bad grammar by returning null (and logging why).
    s = g.lazy ? llama_sampler_init_grammar_lazy_patterns(vocab, g.gbnf.c_str(), "root", patterns.data(),
                                                          patterns.size(), tokens.data(), tokens.size())
               : llama_sampler_init_grammar(vocab, g.gbnf.c_str(), "root");
  } catch (const std::exception& e) {
    return Status::Error(std::string("the tool-call grammar: ") + e.what());
  }
  if (!s) return Status::Error("llama.cpp could not parse the tool-call grammar (GBNF)");
  return std::unique_ptr<GrammarState>(new GrammarState(s));
}

bool GrammarState::Accept(int32_t token) {
  if (!ok_) return false;
  try {
    llama_sampler_accept(sampler_, token);
  } catch (const std::exception&) {
    ok_ = false;  // the grammar has no way to continue after this token
  }
  return ok_;
}

bool GrammarState::Allows(int32_t token, float logit) {
  llama_token_data one{token, logit, 0.0f};
  llama_token_data_array arr{&one, 1, -1, false};
  llama_sampler_apply(sampler_, &arr);
  return !std::isinf(one.logit);
}

int32_t GrammarState::Best(std::span<const float> row) {
  // The server's order: the plain greedy token when the grammar allows it, else the grammar
  // applied to the whole vocabulary (much slower on a large vocabulary, so only then).
  const int32_t greedy = ArgmaxLowest(row);
  if (Allows(greedy, row[size_t(greedy)])) return greedy;
  std::vector<llama_token_data> cand(row.size());
  for (size_t i = 0; i < row.size(); ++i) cand[i] = {llama_token(i), row[i], 0.0f};
  llama_token_data_array arr{cand.data(), cand.size(), -1, false};
  llama_sampler_apply(sampler_, &arr);
  int32_t best = -1;
  for (size_t i = 0; i < arr.size; ++i)  // ties to the lowest id, the capture's argmax rule
    if (!std::isinf(arr.data[i].logit) && (best < 0 || arr.data[i].logit > cand[size_t(best)].logit))
      best = arr.data[i].id;
  return best;
}

Status LlamaEngine::SetGrammar(std::optional<DecodeGrammar> grammar) {
  if (grammar) {
    if (!grammar->turn_start) return Status::Error("a fork grammar needs turn_start");
    FS_ASSIGN_OR_RETURN(auto probe, GrammarState::Start(impl_->vocab, *grammar));  // parse errors now, not mid-pass
  }
  impl_->grammar = std::move(grammar);
  return Status::Ok();
}

Result<ForkStart> LlamaEngine::Impl::StartFork(std::span<const int32_t> tokens, int32_t p, std::span<const float> row,
                                                int32_t first) {
  ForkStart s;
  s.first = first;
  if (grammar) {
    FS_ASSIGN_OR_RETURN(s.grammar, GrammarState::Start(vocab, *grammar));
    // What the model wrote of this turn before the point, as the server's sampler accepted it
    // (a lazy grammar triggered by a call the turn opened earlier is active at the point).
    const int32_t from = std::max<int32_t>(0, grammar->turn_start(p));
    bool ok = true;
    for (int32_t i = from; i <= p && ok; ++i) ok = s.grammar->Accept(tokens[size_t(i)]);
    if (!ok) {
      s.grammar.reset();  // the transcript itself left the grammar: nothing to constrain with
    } else if (!s.grammar->Allows(first, row[size_t(first)])) {
      // The server would never have written this token here: its best allowed one instead.
      s.first = s.grammar->Best(row);
      s.first_masked = true;
      if (s.first < 0) return Status::Error(fmt::format("fork at {}: the grammar allows no token", p));
    }
    if (s.grammar) s.grammar->Accept(s.first);
  }
  s.prob = ProbOf(row, s.first);
  return s;
}

}  // namespace flipscope
