// Safetensors checkpoints: single files and sharded ones (model.safetensors.index.json).
// Format: 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}},
// then the data section the offsets point into.
#include <fmt/format.h>
#include <ggml.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "checkpoint/tensors.h"
#include "util/util.h"

namespace flipscope {
namespace {

struct Dtype {
  const char* name;
  int bytes;
  int ggml_type;  // -1: not decoded to F32, compared by bytes only
};
constexpr Dtype kDtypes[] = {{"F64", 8, -1},
                             {"F32", 4, GGML_TYPE_F32},
                             {"F16", 2, GGML_TYPE_F16},
                             {"BF16", 2, GGML_TYPE_BF16},
                             {"I64", 8, -1},
                             {"I32", 4, -1},
                             {"I16", 2, -1},
                             {"I8", 1, -1},
                             {"U64", 8, -1},
                             {"U32", 4, -1},
                             {"U16", 2, -1},
                             {"U8", 1, -1},
                             {"BOOL", 1, -1},
                             {"F8_E4M3", 1, -1},
                             {"F8_E5M2", 1, -1}};

const Dtype* FindDtype(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

// One header entry -> TensorEntry; data_begin is where the data section starts in the file.
Result<TensorEntry> ParseEntry(const std::string& path, const std::string& name, const nlohmann::json& e,
                               uint64_t data_begin, uint64_t file_size) {
  auto bad = [&](const std::string& what) {
    return Status::Error(fmt::format("{}: tensor '{}': {}", path, name, what));
  };
  if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
    return bad("header entry lacks dtype, shape or data_offsets");
  if (!e["dtype"].is_string()) return bad("dtype is not a string");
  const Dtype* dt = FindDtype(e["dtype"].get<std::string>());
  if (!dt) return bad("unknown dtype '" + e["dtype"].get<std::string>() + "'");
  TensorEntry t;
  t.name = name;
  t.dtype = dt->name;
  t.ggml_type = dt->ggml_type;
  if (!e["shape"].is_array()) return bad("shape is not an array");
  uint64_t elements = 1;
  for (const auto& d : e["shape"]) {
    if (!d.is_number_unsigned()) return bad("shape holds a negative or non-integer dimension");
    uint64_t v = d.get<uint64_t>();
    if (v != 0 && elements > (uint64_t(1) << 62) / v) return bad("shape is implausibly large");
    elements *= v;
    t.shape.push_back(int64_t(v));
  }
  const auto& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    return bad("data_offsets is not a pair of byte offsets");
  uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
  if (end < begin) return bad("data_offsets end before they begin");
  if (end - begin != elements * uint64_t(dt->bytes))
    return bad(fmt::format("holds {} bytes, its dtype and shape need {}", end - begin, elements * uint64_t(dt->bytes)));
  if (data_begin + end > file_size)
    return bad(fmt::format("truncated: data ends at byte {}, the file has {}", data_begin + end, file_size));
  t.row_elements = t.shape.empty() ? 1 : t.shape.back();
  t.row_bytes = uint64_t(t.row_elements) * uint64_t(dt->bytes);
  t.bytes = end - begin;
  t.offset = data_begin + begin;
  return t;
}

// Parses one safetensors file's tensors into c (as file index c.files.size()).
Status AddSafetensorsFile(Checkpoint& c, const std::string& path) {
  FS_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  const uint64_t size = file->size();
  if (size < 8) return Status::Error(path + ": not a safetensors file (shorter than its 8-byte header length)");
  uint64_t header_len = 0;
  std::memcpy(&header_len, file->data(), 8);  // little-endian on every platform we build for
  if (header_len > size - 8)
    return Status::Error(fmt::format("{}: not a safetensors file or truncated (header of {} bytes, file of {})", path,
                                     header_len, size));
  std::string_view header(reinterpret_cast<const char*>(file->data()) + 8, header_len);
  nlohmann::json j = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Status::Error(path + ": not a safetensors file (header is not a JSON object)");
  const int index = int(c.files.size());
  std::vector<TensorEntry> entries;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    FS_ASSIGN_OR_RETURN(TensorEntry t, ParseEntry(path, it.key(), it.value(), 8 + header_len, size));
    t.file = index;
    entries.push_back(std::move(t));
  }
  // Data order, so that a walk over the checkpoint reads each file front to back.
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
  for (auto& t : entries) c.tensors.push_back(std::move(t));
  c.files.push_back(std::move(file));
  return Status::Ok();
}

}  // namespace

Result<Checkpoint> OpenSafetensors(const std::string& path) {
  Checkpoint c;
  c.path = path;
  c.format = CheckpointFormat::kSafetensors;
  FS_RETURN_IF_ERROR(AddSafetensorsFile(c, path));
  return c;
}

Result<Checkpoint> OpenSafetensorsIndex(const std::string& path) {
  FS_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    return Status::Error(path + ": not a safetensors index (no \"weight_map\" object)");
  std::map<std::string, std::string> wanted;  // tensor -> shard file name
  std::set<std::string> shards;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it.value().is_string())
      return Status::Error(path + ": weight_map entry '" + it.key() + "' is not a file name");
    wanted[it.key()] = it.value().get<std::string>();
    shards.insert(it.value().get<std::string>());
  }
  if (shards.empty()) return Status::Error(path + ": weight_map is empty");
  Checkpoint c;
  c.path = path;
  c.format = CheckpointFormat::kSafetensors;
  const auto dir = std::filesystem::path(path).parent_path();
  std::map<std::string, std::string> found;  // tensor -> shard it was found in
  for (const auto& shard : shards) {
    size_t before = c.tensors.size();
    FS_RETURN_IF_ERROR(AddSafetensorsFile(c, (dir / shard).string()).Prefixed(path));
    for (size_t i = before; i < c.tensors.size(); ++i)
      if (!found.emplace(c.tensors[i].name, shard).second)
        return Status::Error(fmt::format("{}: tensor '{}' is stored in both {} and {}", path, c.tensors[i].name,
                                         found[c.tensors[i].name], shard));
  }
  for (const auto& [name, shard] : wanted) {
    auto it = found.find(name);
    if (it == found.end() || it->second != shard)
      return Status::Error(fmt::format("{}: weight_map puts '{}' in {}, which does not hold it", path, name, shard));
  }
  return c;
}

}  // namespace flipscope
