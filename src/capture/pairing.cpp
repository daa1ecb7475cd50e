// Two captures side by side: the same-workload check and the walk over their shared probes that
// compare, branch and layers all rest on.
#include <fmt/format.h>

#include <algorithm>

#include "capture/capture.h"

namespace flipscope {

int32_t VocabSize(const CaptureReader& cap) {
  if (cap.n_vocab() > 0) return cap.n_vocab();
  return int32_t(cap.manifest().model.n_vocab);
}

namespace {
// "SmolLM2 135M Instruct (llama, 49152 tokens)": how a capture's manifest names its model.
std::string ModelLabel(const CaptureReader& cap) {
  const ModelInfo& m = cap.manifest().model;
  const std::string& name = m.name.empty() ? m.path : m.name;
  return fmt::format("{} ({}, {} tokens)", name.empty() ? "?" : name, m.architecture.empty() ? "?" : m.architecture,
                     VocabSize(cap));
}
}  // namespace

Status CheckSameWorkload(const CaptureReader& a, const CaptureReader& b) {
  // The tokenizer first: captures of two models differ at token 0 for that reason alone.
  const int32_t va = VocabSize(a), vb = VocabSize(b);
  const std::string& ta_hash = a.manifest().tokenizer_sha256;
  const std::string& tb_hash = b.manifest().tokenizer_sha256;
  const bool other_tokenizer = !ta_hash.empty() && !tb_hash.empty() && ta_hash != tb_hash;
  if ((va > 0 && vb > 0 && va != vb) || other_tokenizer)
    return Status::Error(fmt::format(
        "{} and {} are captures of models with different tokenizers: {} vs {}; only captures of one tokenizer "
        "over one workload can be compared",
        a.path(), b.path(), ModelLabel(a), ModelLabel(b)));
  auto ta = a.tokens(), tb = b.tokens();
  auto [ia, ib] = std::mismatch(ta.begin(), ta.end(), tb.begin(), tb.end());
  if (ia != ta.end() || ib != tb.end()) {
    const auto at = ia - ta.begin();
    const std::string which = ia != ta.end() && ib != tb.end() ? fmt::format(": {} vs {}", *ia, *ib)
                                                               : fmt::format(": {} vs {} tokens", ta.size(), tb.size());
    return Status::Error(fmt::format(
        "{}: fed different tokens than {} (first difference at position {}{}); only captures of one workload "
        "can be compared",
        b.path(), a.path(), at, which));
  }
  return Status::Ok();
}

ProbePairs PairProbes(std::span<const int32_t> pa, std::span<const int32_t> pb) {
  ProbePairs p;
  for (size_t i = 0, j = 0; i < pa.size() && j < pb.size();) {
    if (pa[i] < pb[j])
      ++i;
    else if (pb[j] < pa[i])
      ++j;
    else
      p.base.push_back(int64_t(i++)), p.cand.push_back(int64_t(j++));
  }
  return p;
}

std::vector<Flip> Flips(std::span<const int32_t> pb, std::span<const int32_t> ab, std::span<const int32_t> pc,
                        std::span<const int32_t> ac) {
  const ProbePairs pairs = PairProbes(pb, pc);
  std::vector<Flip> out;
  for (size_t k = 0; k < pairs.base.size(); ++k) {
    const size_t i = size_t(pairs.base[k]), j = size_t(pairs.cand[k]);
    if (ab[i] != ac[j]) out.push_back({pb[i], ab[i], ac[j]});
  }
  return out;
}

std::vector<Flip> FirstNFlips(std::span<const int32_t> pb, std::span<const int32_t> ab, std::span<const int32_t> pc,
                              std::span<const int32_t> ac, int max, int64_t* available) {
  std::vector<Flip> all = Flips(pb, ab, pc, ac), out;
  *available = int64_t(all.size());
  FirstFlips rule(max);
  for (const Flip& f : all)
    if (rule.Take(f.position, f.base_token, f.cand_token)) out.push_back(f);
  return out;
}

ForkFilter ForkWhere(std::vector<Span> spans, ForkScope scope) {
  if (scope == ForkScope::kAll) return ForkFilter();
  return ForkFilter([spans = std::move(spans)](int32_t p) { return ModelWrites(spans, p + 1); });
}

Result<ForkFilter> ForkWhere(const CaptureReader& cap, ForkScope scope) {
  if (scope == ForkScope::kAll) return ForkFilter();
  const ManifestWorkload& w = cap.manifest().workload;
  if (!w.spans_status.ok()) return w.spans_status.Prefixed(cap.path() + ": manifest spans");
  return ForkWhere(w.spans, scope);
}

}  // namespace flipscope
