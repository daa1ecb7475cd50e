// Requantize: a GGUF's weights converted to another type by llama.cpp's own quantizer.
#include <fmt/format.h>
#include <llama.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "checkpoint/model_info.h"
#include "runtime/runtime.h"
#include "util/util.h"

namespace flipscope {
namespace {

// The weight types a model may be requantized to, as llama.cpp's file types.
const std::map<std::string, llama_ftype>& Ftypes() {
  static const std::map<std::string, llama_ftype> m = {
      {"F32", LLAMA_FTYPE_ALL_F32},          {"F16", LLAMA_FTYPE_MOSTLY_F16},   {"BF16", LLAMA_FTYPE_MOSTLY_BF16},
      {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},     {"Q6_K", LLAMA_FTYPE_MOSTLY_Q6_K}, {"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M},
      {"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M}, {"Q4_0", LLAMA_FTYPE_MOSTLY_Q4_0}};
  return m;
}

}  // namespace

std::vector<std::string> RequantizeTypes() {
  std::vector<std::string> out;
  for (const auto& [name, ft] : Ftypes()) out.push_back(name);
  return out;
}

Status Requantize(const std::string& in, const std::string& type, const std::string& out) {
  namespace fs = std::filesystem;
  auto it = Ftypes().find(type);
  if (it == Ftypes().end())
    return Status::InvalidArgument(
        fmt::format("requantize: unknown type '{}' ({})", type, fmt::join(RequantizeTypes(), " ")));
  EnsureLlamaInit();
  llama_model_quantize_params qp = llama_model_quantize_default_params();
  qp.ftype = it->second;
  qp.allow_requantize = true;
  qp.nthread = 0;
  // Written under a temporary name and renamed, so an interrupted run never leaves a partial
  // model under the final name (the next run would take it as made); a missing folder is said
  // of the final name, before llama.cpp fails on the temporary one.
  FS_RETURN_IF_ERROR(CheckFolderOf(out));
  const std::string tmp = fmt::format("{}.tmp.{}", out, ::getpid());
  if (llama_model_quantize(in.c_str(), tmp.c_str(), &qp) != 0) {
    std::error_code ec;
    fs::remove(tmp, ec);
    std::string why = TakeLlamaLogTail();
    return Status::Error(
        fmt::format("{}: llama.cpp could not requantize to {}{}", in, type, why.empty() ? "" : " (" + why + ")"));
  }
  std::error_code ec;
  fs::rename(tmp, out, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return Status::Io(fmt::format("{}: rename failed: {}", out, ec.message()));
  }
  return Status::Ok();
}

}  // namespace flipscope
