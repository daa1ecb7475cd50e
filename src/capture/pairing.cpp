// Two captures side by side: the same-workload check and the walk over their shared probes that
// compare, branch and layers all rest on.
#include <fmt/format.h>

#include <algorithm>

#include "capture/capture.h"

namespace flipscope {

int32_t VocabSize(const CaptureReader& cap) {
  if (cap.n_vocab() > 0) return cap.n_vocab();
  const nlohmann::json model = cap.manifest().value("model", nlohmann::json::object());
  return model.is_object() && model.contains("n_vocab") && model["n_vocab"].is_number_integer()
             ? model["n_vocab"].get<int32_t>()
             : 0;
}

Status CheckSameWorkload(const CaptureReader& a, const CaptureReader& b) {
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
  const int32_t va = VocabSize(a), vb = VocabSize(b);
  if (va > 0 && vb > 0 && va != vb)
    return Status::Error(
        fmt::format("{} and {} have different vocabularies ({} vs {} entries)", a.path(), b.path(), va, vb));
  const nlohmann::json& ma = a.manifest();
  const nlohmann::json& mb = b.manifest();
  if (ma.contains("tokenizer_sha256") && mb.contains("tokenizer_sha256") &&
      ma["tokenizer_sha256"] != mb["tokenizer_sha256"])
    return Status::Error(b.path() + ": its tokenizer differs from " + a.path() + "'s");
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

Result<ForkFilter> ForkWhere(const CaptureReader& cap, std::string_view fork_where) {
  if (fork_where == "all") return ForkFilter();
  if (fork_where != "assistant")
    return Status::Error(fmt::format("fork_where must be assistant or all, not '{}'", fork_where));
  const nlohmann::json w = cap.manifest().value("workload", nlohmann::json::object());
  std::vector<Span> spans;
  if (w.is_object() && w.contains("spans")) {
    auto read = SpansFromJson(w["spans"]);
    if (!read.ok()) return read.status().Prefixed(cap.path() + ": manifest spans");
    spans = std::move(*read);
  }
  return ForkFilter([spans = std::move(spans)](int32_t p) { return ModelWrites(spans, p + 1); });
}

}  // namespace flipscope
