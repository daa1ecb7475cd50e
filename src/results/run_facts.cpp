// The recorded facts' tolerant readers (run_facts.h).
#include "results/run_facts.h"

#include "util/read.h"

namespace flipscope {

using nlohmann::json;

WorkloadFacts WorkloadFacts::FromJson(const json& j) {
  WorkloadFacts w;
  w.path = read::Str(j, "path"), w.format = read::Str(j, "format"), w.sha256 = read::Str(j, "sha256");
  w.text_sha256 = read::Str(j, "text_sha256");
  w.tool_call_form = read::Str(j, "tool_call_form"), w.tool_result_form = read::Str(j, "tool_result_form");
  w.n_tokens = read::Opt<int64_t>(j, "n_tokens");
  const json& tpl = read::Sub(j, "template");
  w.template_name = read::Opt<std::string>(tpl, "name");
  w.template_source = read::Str(tpl, "source"), w.template_sha256 = read::Str(tpl, "sha256");
  w.warnings = read::Values<std::string>(j, "warnings");
  return w;
}

ProbePlanFacts ProbePlanFacts::FromJson(const json& j) {
  ProbePlanFacts p;
  p.recorded = j.is_object();
  p.stride = read::Opt<int64_t>(j, "stride"), p.n_probes = read::Opt<int64_t>(j, "n_probes");
  p.full = read::Opt<std::string>(j, "full");
  if (const json& parts = read::Sub(j, "full"); parts.is_array()) {
    std::string joined;
    for (const std::string& part : read::Values<std::string>(j, "full")) joined += (joined.empty() ? "" : ", ") + part;
    p.full = joined;
  }
  return p;
}

KnobsFacts KnobsFacts::FromJson(const json& j) {
  KnobsFacts k;
  if (auto read = Knobs::FromJson(j); read.ok()) k.knobs = *read;
  return k;
}

}  // namespace flipscope
