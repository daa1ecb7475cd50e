// capture/capture_file.h: the capture file (safetensors + manifest): its writer and reader.
// File format: docs/capture-format.md. Part of the capture stage (capture/capture.h is its interface).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "capture/manifest.h"
#include "checkpoint/model_info.h"
#include "engine/engine.h"
#include "records/records.h"
#include "util/names.h"
#include "util/status.h"
#include "util/util.h"
#include "workload/workload.h"

namespace flipscope {

// ---- Capture file ----------------------------------------------------------------------------

// What a writer needs up front; the tensor table is fixed by it.
struct CaptureLayout {
  std::vector<int32_t> tokens;     // every token fed
  std::vector<int32_t> positions;  // probe positions, strictly ascending, each < tokens.size()
  int32_t n_vocab = 0;             // full-vocabulary width (0 when truncated only)
  StoreDtype store = StoreDtype::kF32;
  int32_t topk = 0;  // > 0: truncated capture (topk_ids / topk_logprobs, no logits)
};

// Streams rows into a temporary file; Commit() writes the final manifest and renames it into
// place. Destroyed without Commit(), nothing remains under the final name.
class CaptureWriter {
 public:
  // Creates PATH's temporary file and writes the tensor table; manifest may grow later.
  static Result<std::unique_ptr<CaptureWriter>> Create(const std::string& path, const CaptureLayout& layout,
                                                       const nlohmann::json& manifest);
  virtual ~CaptureWriter() = default;
  // Writes probe row `index` (rows may come in any order, each exactly once). For full
  // captures `logits` has n_vocab values; argmax and digest are taken from them (native F32).
  virtual Status WriteRow(int64_t index, std::span<const float> logits) = 0;
  // Truncated captures: top-k ids/logprobs (descending) and the source's greedy token.
  virtual Status WriteTopK(int64_t index, std::span<const int32_t> ids, std::span<const float> logprobs,
                           int32_t argmax) = 0;
  // Replaces the manifest (e.g. to add timings); must be called before Commit().
  virtual void SetManifest(const nlohmann::json& manifest) = 0;
  // Checks every row was written, writes argmax/digest and the manifest, fsyncs and renames.
  virtual Status Commit() = 0;
};

// The `__metadata__` key whose string value is the manifest JSON.
inline constexpr const char* kManifestKey = "flipscope.manifest";

// One entry of a capture file's tensor table, as stored.
struct CaptureTensor {
  std::string name;
  std::string dtype;  // safetensors dtype name: "I32", "U64", "F32", "BF16"
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // byte offset within the data section
  uint64_t bytes = 0;
};

// A capture file opened for reading (memory-mapped; rows are read on demand).
class CaptureReader {
 public:
  // Opens and validates the header against the file size; errors name the file and the fault.
  static Result<std::unique_ptr<CaptureReader>> Open(const std::string& path);
  virtual ~CaptureReader() = default;
  virtual const std::string& path() const = 0;
  // The manifest, parsed once when the file is opened.
  virtual const CaptureManifest& manifest() const = 0;
  virtual std::span<const int32_t> tokens() const = 0;
  virtual std::span<const int32_t> positions() const = 0;
  virtual std::span<const int32_t> argmax() const = 0;
  virtual std::span<const uint64_t> digest() const = 0;
  virtual int32_t n_vocab() const = 0;
  virtual bool truncated() const = 0;
  virtual int32_t topk() const = 0;
  virtual StoreDtype store() const = 0;
  // The tensor table in data order, and the file's size in bytes.
  virtual const std::vector<CaptureTensor>& tensors() const = 0;
  virtual uint64_t file_size() const = 0;
  // Row i as F32 (BF16 widened) into out (n_vocab values). Full captures only.
  virtual Status ReadRow(int64_t i, std::span<float> out) const = 0;
  // Row i as FP64 into out. Full captures only.
  virtual Status ReadRowF64(int64_t i, std::span<double> out) const = 0;
  // Truncated captures: the top-k ids and logprobs of row i.
  virtual std::span<const int32_t> TopKIds(int64_t i) const = 0;
  virtual std::span<const float> TopKLogprobs(int64_t i) const = 0;
  // Row i's stored logits as they lie in the file (n_vocab little-endian F32 or BF16 values, per
  // store()), valid while the reader lives; empty for truncated captures, a bad index, or readers
  // without a mapping (then use ReadRow). Lets a caller widen and scan in one pass.
  virtual std::span<const uint8_t> StoredRow(int64_t i) const {
    (void)i;
    return {};
  }
  // Hint: rows [begin, end) will not be read again soon, so a streaming pass can drop their
  // memory-mapped pages (the file stays in the page cache; reading them again stays correct).
  virtual void ReleaseRows(int64_t begin, int64_t end) const {
    (void)begin;
    (void)end;
  }
};

// The capture format's name for a storage dtype (NameOf).
std::string StoreName(StoreDtype d);
// The dtype named name; else an error "store must be f32 or bf16, not '<name>'".
Result<StoreDtype> ParseStore(const std::string& name);

}  // namespace flipscope
