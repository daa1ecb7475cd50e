// What llama.cpp ran, as opposed to what was asked: every setting it resolves (-fa auto) or
// adjusts (clamped batches, the padded context, threads, offload without a GPU, repacking without
// a repacked type) is read back or re-derived here, recorded with the rule that decided it.
#include <fmt/format.h>
#include <ggml-backend.h>
#include <llama.h>

#include <cstring>
#include <thread>

#include "engine/engine.h"
#include "engine/llama_internal.h"
#include "runtime/runtime.h"

namespace flipscope {

FlashAttnRule FlashAttnByRule(FlashAttn requested, const FlashAttnFacts& f) {
  // The order and the conditions are llama_init_from_model's (src/llama-context.cpp); the test
  // FlashAttnRules.MatchThePinnedTree fails when that function's rules change.
  if (requested != FlashAttn::kOff && f.arch == "grok")
    return {FlashAttn::kOff, "llama.cpp forces flash attention off for the grok architecture"};
  if (requested == FlashAttn::kAuto && f.split_mode == SplitMode::kTensor)
    return {FlashAttn::kOn, "split mode tensor (-sm tensor) requires it"};
  if (requested == FlashAttn::kAuto && f.v_quantized)
    return {FlashAttn::kOn, "quantized V cache (-ctv " + f.cache_type_v + ") requires it"};
  if (requested != FlashAttn::kAuto) return {requested, "requested"};
  return {std::nullopt, ""};
}

std::optional<FlashAttnRule> FlashAttnFromProbeLog(const std::string& log) {
  // resolve_fused_ops logs "<probe>: Flash Attention enabled" or, after a warning naming the
  // layer whose device lacks it, "<probe>: Flash Attention not supported, set to disabled".
  if (log.find("Flash Attention not supported") != std::string::npos) {
    size_t at = log.find("but Flash Attention is assigned to device");
    std::string why = "device probe: a layer's device does not run it";
    if (at != std::string::npos) {
      size_t begin = log.rfind("layer ", at), end = log.find('\n', at);
      if (begin != std::string::npos) why = "device probe: " + log.substr(begin, end - begin);
    }
    return FlashAttnRule{FlashAttn::kOff, why};
  }
  if (log.find("Flash Attention enabled") != std::string::npos)
    return FlashAttnRule{FlashAttn::kOn, "device probe: every layer's device runs it"};
  return std::nullopt;
}

namespace {

// The logits of a few tokens decoded in a fresh small context with flash attention as given.
Result<std::vector<float>> ProbeRows(llama_model* model, llama_context_params cp, llama_flash_attn_type fa) {
  constexpr int kTokens = 8;
  cp.flash_attn_type = fa;
  cp.n_ctx = 256;
  cp.n_batch = cp.n_ubatch = kTokens;
  cp.n_seq_max = 1;
  cp.cb_eval = nullptr;
  cp.cb_eval_user_data = nullptr;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return Status::Error("the flash-attention check could not create its context");
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int32_t nv = llama_vocab_n_tokens(vocab);
  llama_batch batch = llama_batch_init(kTokens, 0, 1);
  for (int i = 0; i < kTokens; ++i) {
    batch.token[i] = (1 + 37 * i) % nv;  // any ids: the check compares two contexts on the same input
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = true;
  }
  batch.n_tokens = kTokens;
  const int rc = llama_decode(ctx, batch);
  llama_batch_free(batch);
  std::vector<float> rows;
  if (rc == 0) {
    const float* l = llama_get_logits(ctx);
    rows.assign(l, l + size_t(kTokens) * size_t(nv));
  }
  llama_free(ctx);
  if (rc != 0) return Status::Error(fmt::format("the flash-attention check's decode failed with code {}", rc));
  return rows;
}

}  // namespace

Result<FlashAttnRule> FlashAttnByBehaviour(llama_model* model, const llama_context_params& cp) {
  FS_ASSIGN_OR_RETURN(auto as_asked, ProbeRows(model, cp, LLAMA_FLASH_ATTN_TYPE_AUTO));
  FS_ASSIGN_OR_RETURN(auto on, ProbeRows(model, cp, LLAMA_FLASH_ATTN_TYPE_ENABLED));
  FS_ASSIGN_OR_RETURN(auto off, ProbeRows(model, cp, LLAMA_FLASH_ATTN_TYPE_DISABLED));
  auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  const bool is_on = same(as_asked, on), is_off = same(as_asked, off);
  if (is_on && !is_off) return FlashAttnRule{FlashAttn::kOn, "behavioural check: auto gives on's rows bit for bit"};
  if (is_off && !is_on) return FlashAttnRule{FlashAttn::kOff, "behavioural check: auto gives off's rows bit for bit"};
  if (is_on)  // both: the kernel does not change these rows, so either value reproduces them
    return FlashAttnRule{FlashAttn::kOn, "behavioural check: on and off give the same rows here"};
  return Status::Error("-fa auto: the behavioural check matched neither -fa on nor -fa off; run with -fa on or off");
}

Status ResolveKnobs(LlamaEngine::Impl& e, const Knobs& asked, const llama_context_params& cp,
                    const std::string& init_log) {
  Knobs& k = e.knobs;
  // The knob as asked against as it ran, recorded with the rule when they differ.
  auto record = [&](const char* key, std::string reason) {
    const KnobInfo* info = FindKnob(key);
    KnobValue requested = info->get(asked), effective = info->get(k);
    if (requested != effective) e.resolutions.push_back({key, std::move(requested), effective, std::move(reason)});
  };

  char arch[128] = "";
  llama_model_meta_val_str(e.model, "general.architecture", arch, sizeof(arch));
  FlashAttnRule fa = FlashAttnByRule(asked.flash_attn, {arch, asked.split_mode, ggml_is_quantized(cp.type_v),
                                                        std::string(NameOf(asked.cache_type_v))});
  if (!fa.value) {
    if (auto from_log = FlashAttnFromProbeLog(init_log)) {
      fa = *from_log;
    } else {
      FS_ASSIGN_OR_RETURN(fa, FlashAttnByBehaviour(e.model, cp));
    }
  }
  k.flash_attn = *fa.value;
  record("flash_attn", fa.reason);

  const int train = int(llama_model_n_ctx_train(e.model));
  k.n_ctx = int(llama_n_ctx(e.ctx));
  record("ctx_size", asked.n_ctx == 0 ? fmt::format("0: the model's training context ({}){}", train,
                                                    k.n_ctx != train ? ", rounded up to a multiple of 256" : "")
                                      : "llama.cpp rounds the context up to a multiple of 256");
  // Under load the context's batch also holds the fillers' tokens; the measured chunk stays -b.
  if (asked.load == 0) {
    k.n_batch = int(llama_n_batch(e.ctx));
    record("batch_size", "clamped to the context size (causal attention)");
  }
  k.n_ubatch = int(llama_n_ubatch(e.ctx));
  record("ubatch_size", "clamped to the logical batch (-b)");
  k.n_threads = int(llama_n_threads(e.ctx));
  record("threads", fmt::format("0: every hardware thread ({})", std::max(1u, std::thread::hardware_concurrency())));
  if (Backends().size() == 1) {
    k.n_gpu_layers = 0;
    record("n_gpu_layers", "this build has no GPU backend: every layer runs on the CPU");
  }
  if (asked.repack == Repack::kOn && ExtraBufferTypes(e.weight_buffers).empty()) {
    k.repack = Repack::kOff;
    record("repack",
           "no weight of this model went into a repacked buffer type here (its types have no repacked layout "
           "on this CPU, or its weights are on a GPU)");
  }
  return Status::Ok();
}

}  // namespace flipscope
