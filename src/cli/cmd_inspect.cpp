// `flipscope inspect CAPTURE [--json] [--row I]`: a capture's facts, tensor table and manifest, or
// one probe's row as the reader sees it.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>

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

// Probe i as the reader sees it: position, the token it predicts, argmax, digest and the top 5
// (by logit for full rows, ties to the lower id; as stored for truncated ones).
Result<nlohmann::json> DescribeRow(const CaptureReader& r, int64_t i) {
  const int64_t n = int64_t(r.positions().size());
  if (i < 0 || i >= n) return Status::Error(fmt::format("{}: --row {} outside its {} probes", r.path(), i, n));
  const int32_t p = r.positions()[size_t(i)];
  nlohmann::json top = nlohmann::json::array();
  if (r.truncated()) {
    auto ids = r.TopKIds(i);
    auto lps = r.TopKLogprobs(i);
    for (size_t j = 0; j < std::min<size_t>(5, ids.size()); ++j) top.push_back({ids[j], lps[j]});
  } else {
    std::vector<float> row(size_t(r.n_vocab()));
    FS_RETURN_IF_ERROR(r.ReadRow(i, row));
    std::vector<int32_t> order(row.size());
    std::iota(order.begin(), order.end(), 0);
    const size_t k = std::min<size_t>(5, order.size());
    std::partial_sort(order.begin(), order.begin() + long(k), order.end(), [&](int32_t a, int32_t b) {
      return row[size_t(a)] != row[size_t(b)] ? row[size_t(a)] > row[size_t(b)] : a < b;
    });
    for (size_t j = 0; j < k; ++j) top.push_back({order[j], row[size_t(order[j])]});
  }
  const auto tokens = r.tokens();
  return nlohmann::json{{"index", i},
                        {"position", p},
                        {"next_token", size_t(p) + 1 < tokens.size() ? nlohmann::json(tokens[size_t(p) + 1]) : nullptr},
                        {"argmax", r.argmax()[size_t(i)]},
                        {"digest", fmt::format("{:016x}", r.digest()[size_t(i)])},
                        {"top", top},
                        {"top_of", r.truncated() ? "logprobs" : "logits"}};
}

void PrintRow(const nlohmann::json& d) {
  fmt::print("row {}  position {}  next token {}  argmax {}  digest {}\n", d["index"].dump(), d["position"].dump(),
             d["next_token"].dump(), d["argmax"].dump(), d["digest"].get<std::string>());
  for (const auto& t : d["top"]) fmt::print("  {:>8}  {:.9g}\n", t[0].get<int32_t>(), t[1].get<double>());
}

}  // namespace

Action DefineInspect(CLI::App* cmd) {
  struct Opts {
    std::string capture;
    bool json = false;
    int64_t row = -1;
  };
  auto opts = std::make_shared<Opts>();
  cmd->add_option("capture", opts->capture, "Capture file (.safetensors)")->required();
  cmd->add_flag("--json", opts->json, "Print one JSON object");
  cmd->add_option("--row", opts->row, "Print probe I's row instead: position, argmax, digest, top 5 (0-based)");
  return [opts]() -> int {
    auto reader = CaptureReader::Open(opts->capture);
    if (!reader.ok()) return Fail(reader.status());
    if (opts->row >= 0) {
      auto row = DescribeRow(**reader, opts->row);
      if (!row.ok()) return Fail(row.status());
      if (opts->json)
        fmt::print("{}\n", row->dump(2));
      else
        PrintRow(*row);
      return 0;
    }
    nlohmann::json d = Describe(**reader);
    if (opts->json)
      fmt::print("{}\n", d.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    else
      PrintText(d);
    return 0;
  };
}

}  // namespace flipscope::cli
