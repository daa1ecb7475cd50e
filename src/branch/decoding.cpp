// How futures are decoded: free greedy, or greedy under the tool-call grammar a llama.cpp server
// would constrain the workload's calls with (docs/branch.md, "Decoding the futures").
#include <memory>

#include "branch/branch.h"
#include "capture/capture.h"
#include "util/util.h"
#include "workload/workload.h"

namespace flipscope {
namespace {

using json = nlohmann::json;

// Per token position: the first position of the run of written tokens (ModelWrites) holding
// it, or the position itself when the model does not write it. A server's sampler sees a turn's
// tokens from the first one it generated.
std::vector<int32_t> TurnStarts(const std::vector<Span>& spans, int32_t n) {
  std::vector<int32_t> start(size_t(n) + 1);
  for (int32_t q = 0; q <= n; ++q) {
    const bool written = q < n && ModelWrites(spans, q);
    start[size_t(q)] = written && q > 0 && ModelWrites(spans, q - 1) ? start[size_t(q - 1)] : q;
  }
  return start;
}

// The workload's tools in the transcript's key order (`tools_text`, as the workload recorded it):
// llama.cpp lays out a call's arguments in its schema's property order, and the manifest's `tools`
// has its keys sorted. A capture without it gives the sorted tools, and `*sorted` says so.
nlohmann::ordered_json OrderedTools(const ManifestWorkload& w, const json& tools, bool* sorted) {
  const auto it = w.record.find("tools_text");
  const std::string text = it != w.record.end() && it->is_string() ? it->get<std::string>() : "";
  *sorted = true;
  if (!text.empty()) {
    try {
      auto t = nlohmann::ordered_json::parse(text);
      *sorted = false;
      return t;
    } catch (const std::exception&) {  // a damaged field: the sorted tools still give a grammar
    }
  }
  return nlohmann::ordered_json::parse(tools.dump());
}

}  // namespace

ForkDecodingInfo ServedDecodingInfo() {
  ForkDecodingInfo d;
  d.asked = d.used = NameOf(FutureDecoding::kFree);
  d.why =
      "a server's futures are plain completions of the token prompt at temperature 0 (vLLM "
      "/v1/completions, SGLang /generate) with no tools in the request, so neither the "
      "server's tool parser nor a grammar constrains them";
  return d;
}

Result<ForkDecoding> ResolveDecoding(const std::string& capture_path, DecodingMode mode) {
  ForkDecoding out;
  out.info.asked = NameOf(mode), out.info.used = NameOf(out.used);
  auto free_because = [&](const std::string& why) -> Result<ForkDecoding> {
    if (mode == DecodingMode::kGrammar) return Status::Error(capture_path + ": decoding grammar: " + why);
    out.info.why = why;
    return out;
  };
  if (mode == DecodingMode::kFree) return free_because("asked");
  FS_ASSIGN_OR_RETURN(auto cap, CaptureReader::Open(capture_path));
  const CaptureManifest& m = cap->manifest();
  const ManifestWorkload& w = m.workload;
  const json tools = w.tools.is_null() ? json::array() : w.tools;
  const std::string& form = w.tool_call_form;
  if (!tools.is_array() || tools.empty() || form.empty()) return free_because("the workload defines no tools");
  if (!m.engine.name.empty() && FromName<EngineKind>(m.engine.name) != EngineKind::kLlama)
    return free_because("a server's futures are its own completions (docs/branch.md)");
  const bool renders = form == "template";
  if (mode == DecodingMode::kAuto && !renders)
    return free_because(
        "the chat template does not render tool calls, so llama.cpp derives no grammar from it "
        "(--fork-decoding grammar takes the <tool_call> form's)");
  bool sorted = false;
  auto g = LoadToolGrammar(m.model.path, m.workload_options.chat_template, OrderedTools(w, tools, &sorted), renders);
  if (!g.ok()) return free_because(g.status().message());
  if (!w.spans_status.ok()) return w.spans_status.Prefixed(capture_path + ": manifest spans");
  auto starts = std::make_shared<std::vector<int32_t>>(TurnStarts(w.spans, int32_t(cap->tokens().size())));
  DecodeGrammar dg;
  dg.gbnf = g->gbnf;
  dg.lazy = g->lazy;
  dg.trigger_patterns = g->trigger_patterns;
  dg.trigger_tokens = g->trigger_tokens;
  dg.turn_start = [starts](int32_t p) {
    const size_t next = size_t(p) + 1;
    return next < starts->size() ? (*starts)[next] : p + 1;
  };
  out.used = FutureDecoding::kGrammar;
  out.grammar = std::move(dg);
  out.info.used = NameOf(out.used), out.info.source = g->source, out.info.lazy = g->lazy;
  out.info.triggers = g->triggers, out.info.gbnf_sha256 = Sha256Hex(g->gbnf);
  if (sorted)
    out.info.key_order =
        "sorted: the capture does not record the tools' own key order (tools_text), so the grammar "
        "lays out arguments alphabetically and calls written in the schema's order leave it";
  return out;
}

}  // namespace flipscope
