// `flipscope inspect CAPTURE [--json]`: a capture's facts, tensor table and manifest.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "capture/capture.h"
#include "cli/commands.h"
#include "util/util.h"

namespace flipscope::cli {
namespace {

// The facts both output modes print, as one JSON object.
nlohmann::json Describe(const CaptureReader& r) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const CaptureTensor& t : r.tensors())
    tensors.push_back({{"name", t.name}, {"dtype", t.dtype}, {"shape", t.shape}, {"bytes", t.bytes}});
  nlohmann::json store = nullptr;  // no logits stored in a truncated capture
  if (!r.truncated()) store = r.store() == StoreDtype::kBF16 ? "bf16" : "f32";
  return {{"path", r.path()},
          {"file_bytes", r.file_size()},
          {"n_tokens", r.tokens().size()},
          {"n_probes", r.positions().size()},
          {"n_vocab", r.n_vocab()},
          {"store", store},
          {"truncated", r.truncated()},
          {"topk", r.topk()},
          {"tensors", tensors},
          {"manifest", r.manifest().raw}};
}

void PrintText(const nlohmann::json& d) {
  fmt::print("capture    {}\n", d["path"].get<std::string>());
  fmt::print("file       {} ({} bytes)\n", HumanBytes(d["file_bytes"].get<double>()), d["file_bytes"].dump());
  fmt::print("tokens     {}\nprobes     {}\n", d["n_tokens"].dump(), d["n_probes"].dump());
  if (d["truncated"].get<bool>())
    fmt::print("vocab      unknown\nstore      none\ntruncated  yes: top-{} ids and logprobs per probe\n",
               d["topk"].dump());
  else
    fmt::print("vocab      {}\nstore      {}\ntruncated  no\n", d["n_vocab"].dump(), d["store"].get<std::string>());
  fmt::print("tensors\n");
  for (const auto& t : d["tensors"]) {
    std::string shape = fmt::format("[{}]", fmt::join(t["shape"].get<std::vector<int64_t>>(), ", "));
    fmt::print("  {:<14} {:<5} {:<16} {}\n", t["name"].get<std::string>(), t["dtype"].get<std::string>(), shape,
               HumanBytes(t["bytes"].get<double>()));
  }
  fmt::print("manifest\n{}\n", d["manifest"].dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace

Action DefineInspect(CLI::App* cmd) {
  struct Opts {
    std::string capture;
    bool json = false;
  };
  auto opts = std::make_shared<Opts>();
  cmd->add_option("capture", opts->capture, "Capture file (.safetensors)")->required();
  cmd->add_flag("--json", opts->json, "Print one JSON object");
  return [opts]() -> int {
    auto reader = CaptureReader::Open(opts->capture);
    if (!reader.ok()) return Fail(reader.status());
    nlohmann::json d = Describe(**reader);
    if (opts->json)
      fmt::print("{}\n", d.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    else
      PrintText(d);
    return 0;
  };
}

}  // namespace flipscope::cli
