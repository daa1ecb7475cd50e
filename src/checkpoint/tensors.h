// checkpoint: GGUF and safetensors checkpoints opened for reading, and their tensor-by-tensor
// diff (`flipscope tensors`).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "util/names.h"
#include "util/status.h"
#include "util/util.h"

namespace flipscope {

// ---- Checkpoints opened for tensor-by-tensor reading (GGUF and safetensors) -------------------

// A whole file mapped read-only. Release() drops pages a reader is done with, so that walking a
// checkpoint larger than RAM keeps the process's resident memory bounded.
class MappedFile {
 public:
  // Maps path read-only; errors name the file.
  static Result<std::shared_ptr<const MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Tells the kernel this process no longer needs bytes [offset, offset + n) (they stay in the
  // page cache); a later read faults them back in.
  void Release(uint64_t offset, uint64_t n) const;

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

// One stored tensor of a checkpoint.
struct TensorEntry {
  std::string name;            // as stored
  std::string dtype;           // as stored: ggml type name ("q4_1") for GGUF, "BF16" etc. for safetensors
  int ggml_type = -1;          // the ggml type that decodes it to F32; -1: not a float type (bytes only)
  std::vector<int64_t> shape;  // outermost first, as numpy shows it (GGUF's ne0..neN reversed)
  int64_t row_elements = 1;    // elements per stored row (GGUF ne0, the last safetensors dim)
  uint64_t row_bytes = 0;      // bytes per stored row
  uint64_t bytes = 0;
  int file = 0;         // index into Checkpoint::files
  uint64_t offset = 0;  // byte offset of the data within that file
  // The product of the shape (1 for a scalar).
  int64_t Elements() const;
};

// A checkpoint's file format; the name is what the tensors report shows.
enum class CheckpointFormat { kGguf, kSafetensors };
template <>
struct Names<CheckpointFormat> {
  static constexpr std::pair<CheckpointFormat, const char*> v[] = {{CheckpointFormat::kGguf, "gguf"},
                                                                   {CheckpointFormat::kSafetensors, "safetensors"}};
};

// A checkpoint: one GGUF file, one .safetensors file, or the shards of a sharded safetensors
// checkpoint (model.safetensors.index.json).
struct Checkpoint {
  std::string path;
  CheckpointFormat format = CheckpointFormat::kGguf;
  std::string architecture;          // GGUF general.architecture ("" for safetensors)
  int n_head = 0, n_head_kv = 0;     // GGUF attention head counts (0 when unknown)
  std::vector<TensorEntry> tensors;  // in file order
  std::vector<std::shared_ptr<const MappedFile>> files;
  // The bytes of all tensors.
  uint64_t TotalBytes() const;
  // The bytes of one tensor.
  const uint8_t* Data(const TensorEntry& t) const { return files[size_t(t.file)]->data() + t.offset; }
};

// Opens a GGUF file, a .safetensors file, a model.safetensors.index.json, or a folder holding
// model.safetensors.index.json or model.safetensors; checks that every tensor lies within its
// file and has the size its dtype and shape imply. Errors name the file and the fault.
Result<Checkpoint> OpenCheckpoint(const std::string& path);

// Opens one .safetensors file (header, dtypes and offsets checked against the file size).
Result<Checkpoint> OpenSafetensors(const std::string& path);
// Opens a sharded safetensors checkpoint from its index (model.safetensors.index.json): every
// shard its weight_map names, each listed tensor checked to be in its shard.
Result<Checkpoint> OpenSafetensorsIndex(const std::string& path);

// ---- `tensors`: tensor-by-tensor diff of two checkpoints -------------------------------------

// The llama.cpp (GGUF) name of a Hugging Face tensor name, e.g. model.layers.3.mlp.up_proj.weight
// -> blk.3.ffn_up.weight; "" when the convention has no single counterpart. arch (the GGUF's
// general.architecture) selects per-architecture names (Gemma 2/3 norms).
std::string GgufNameOf(const std::string& hf_name, const std::string& arch);

// The component a tensor belongs to, from a GGUF or a Hugging Face name: "token embedding",
// "attention", "MLP / experts", "norms", "output head", "vision", "MTP" or "other".
std::string TensorComponent(const std::string& name);

struct TensorsOptions {
  // JSON object {"name in A": "name in B", ...}; pairs listed there bypass the automatic naming.
  std::string map_path;
  int threads = 0;  // worker threads; 0 = all hardware threads
  Log log;          // status lines and progress bars (bars on a terminal only)
};

enum class TensorState {
  kIdentical,      // same encoding, same bytes
  kSameValues,     // equal after decoding to F32 (other encoding, or after undoing Q/K permutation)
  kDifferent,      // values differ (metrics say by how much)
  kBytesDiffer,    // not a float type and the bytes differ
  kShapeMismatch,  // paired by name, shapes differ (not compared)
  kMissing,        // in A only
  kExtra,          // in B only
};
// "identical", "same values", "different", "bytes differ", "shape mismatch", "missing", "extra".
const char* TensorStateName(TensorState s);

struct TensorDiff {
  std::string name_a, name_b;  // empty on the side that lacks it
  std::string component;
  TensorState state = TensorState::kMissing;
  std::string dtype_a, dtype_b;
  std::vector<int64_t> shape_a, shape_b;
  uint64_t hash_a = 0, hash_b = 0;  // XXH3-64 of the stored bytes (docs/checkpoints.md)
  bool compared = false;            // the metrics below were computed (decoded to F32, in FP64)
  double rel_l2 = 0;                // ||a - b|| / ||a||
  double max_abs = 0;               // max |a - b|
  double cosine = 1;                // a.b / (||a|| ||b||)
  int64_t n_differ = 0;             // elements whose decoded values differ
  int64_t nonfinite_mismatch = 0;   // elements finite on one side only, or NaN on one side
  // Q/K tensors compared across formats: the metrics above are after undoing llama.cpp's
  // convert_hf_to_gguf permutation because that matched better; rel_l2_raw is without it.
  bool qk_unpermuted = false;
  double rel_l2_raw = 0;
  std::string note;
};

struct TensorsReport {
  std::string path_a, path_b;
  CheckpointFormat format_a = CheckpointFormat::kGguf, format_b = CheckpointFormat::kGguf;
  uint64_t bytes_a = 0, bytes_b = 0;
  int n_tensors_a = 0, n_tensors_b = 0;
  std::vector<TensorDiff> tensors;  // A's order, then B's extras
  double seconds = 0;
  struct Group {
    std::string component;
    int total = 0, identical = 0, same_values = 0, different = 0, shape_mismatch = 0, missing = 0, extra = 0;
    double max_rel_l2 = 0, min_cosine = 1;
  };
  // Per component in a fixed order, plus "overall" last; "identical" counts kIdentical and
  // kSameValues (the "N of M identical" figure).
  std::vector<Group> Groups() const;
  // Every tensor is identical or holds the same values, and none is missing or extra.
  bool Same() const;
  // The entry whose A or B name is name, or nullptr.
  const TensorDiff* Find(const std::string& name) const;
  // Both checkpoints, the groups and every tensor (docs/checkpoints.md).
  nlohmann::json ToJson() const;
  // The group table and the non-identical tensors, 20 per section, for a terminal.
  std::string ToText() const;
};

// Diffs two checkpoints tensor by tensor (any mix of GGUF and safetensors). Bounded memory: both
// are memory-mapped and read in chunks that are released after use; work is spread over threads.
Result<TensorsReport> DiffCheckpoints(const std::string& path_a, const std::string& path_b,
                                      const TensorsOptions& opts = {});

}  // namespace flipscope
