// The capture file: a safetensors file whose tensor table is fixed up front by the layout. Rows
// stream to their final offsets; the header (holding the manifest) is rewritten in place at
// Commit inside a generously reserved, space-padded slot, so the data is written exactly once.
// The reader maps the file and validates the whole table against the file size before any
// data is touched. Format: docs/capture-format.md.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "capture/capture.h"
#include "capture/row_pipeline.h"
#include "engine/engine.h"
#include "util/util.h"

namespace flipscope {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

// Room left in the header for the manifest to grow between Create and Commit (timings, ...).
constexpr uint64_t kHeaderSlack = 64 * 1024;

uint64_t AlignUp8(uint64_t n) { return (n + 7) / 8 * 8; }

// The tensor table of a layout in data order: digest first (8-byte aligned at the start of the
// data section), then the 4-byte tensors, and the large logits last.
std::vector<CaptureTensor> TableFor(const CaptureLayout& l) {
  const int64_t n = int64_t(l.positions.size());
  std::vector<CaptureTensor> t = {{"digest", "U64", {n}},
                                  {"tokens", "I32", {int64_t(l.tokens.size())}},
                                  {"positions", "I32", {n}},
                                  {"argmax", "I32", {n}}};
  if (l.topk > 0) {
    t.push_back({"topk_ids", "I32", {n, l.topk}});
    t.push_back({"topk_logprobs", "F32", {n, l.topk}});
  } else {
    t.push_back({"logits", l.store == StoreDtype::kBF16 ? "BF16" : "F32", {n, l.n_vocab}});
  }
  uint64_t offset = 0;
  for (CaptureTensor& e : t) {
    uint64_t elems = 1;
    for (int64_t d : e.shape) elems *= uint64_t(d);
    e.offset = offset;
    e.bytes = elems * (e.dtype == "U64" ? 8 : e.dtype == "BF16" ? 2 : 4);
    offset += e.bytes;
  }
  return t;
}

// The header JSON (unpadded) for a table and a manifest.
std::string HeaderJson(const std::vector<CaptureTensor>& table, const nlohmann::json& manifest) {
  constexpr auto kReplace = nlohmann::json::error_handler_t::replace;  // never throw on bad UTF-8
  nlohmann::json h = nlohmann::json::object();
  h["__metadata__"] = {{kManifestKey, manifest.dump(-1, ' ', false, kReplace)}};
  for (const CaptureTensor& e : table)
    h[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {e.offset, e.offset + e.bytes}}};
  return h.dump(-1, ' ', false, kReplace);
}

Status CheckLayout(const CaptureLayout& l) {
  if (l.tokens.empty()) return Status::Error("no tokens");
  if (l.tokens.size() > size_t(INT32_MAX)) return Status::Error("too many tokens for I32 positions");
  if ((l.topk > 0) == (l.n_vocab > 0))
    return Status::Error("exactly one of n_vocab (full logits) and topk (truncated) must be > 0");
  if (l.topk < 0 || l.n_vocab < 0) return Status::Error("negative n_vocab or topk");
  const int32_t id_end = l.topk > 0 ? INT32_MAX : l.n_vocab;  // what the reader accepts
  auto bad = std::find_if(l.tokens.begin(), l.tokens.end(), [&](int32_t t) { return t < 0 || t >= id_end; });
  if (bad != l.tokens.end())
    return Status::Error(fmt::format("token id {} outside the vocabulary [0, {})", *bad, id_end));
  for (size_t i = 0; i < l.positions.size(); ++i) {
    int32_t p = l.positions[i];
    if (p < 0 || size_t(p) >= l.tokens.size())
      return Status::Error(fmt::format("probe position {} outside the {} tokens", p, l.tokens.size()));
    if (i > 0 && p <= l.positions[i - 1])
      return Status::Error(fmt::format("probe positions not strictly ascending at {}", p));
  }
  return Status::Ok();
}

class FileWriter final : public CaptureWriter {
 public:
  Status Init(const std::string& path, const CaptureLayout& layout, const nlohmann::json& manifest) {
    path_ = path;
    FS_RETURN_IF_ERROR(CheckLayout(layout).Prefixed(path));
    if (!manifest.is_object()) return Err("the manifest must be a JSON object");
    positions_ = layout.positions;
    n_vocab_ = layout.n_vocab;
    topk_ = layout.topk;
    store_ = layout.store;
    manifest_ = manifest;
    table_ = TableFor(layout);
    header_len_ = AlignUp8(HeaderJson(table_, manifest_).size() + kHeaderSlack);
    argmax_.assign(positions_.size(), -1);
    digest_.assign(positions_.size(), 0);
    written_.assign(positions_.size(), false);
    claimed_.assign(positions_.size(), false);
    FS_RETURN_IF_ERROR(file_.Open(path));
    FS_RETURN_IF_ERROR(CheckSpace());
    FS_RETURN_IF_ERROR(WriteHeader());
    FS_RETURN_IF_ERROR(Put("tokens", 0, layout.tokens.data(), layout.tokens.size() * 4));
    return Put("positions", 0, positions_.data(), positions_.size() * 4);
  }

  // Safe to call from several threads at once for distinct indices (RowPipeline): the checks and
  // the bookkeeping are under mu_, the scan, rounding, digest and pwrite are not.
  Status WriteRow(int64_t index, std::span<const float> logits) override {
    if (topk_ > 0) return Err("WriteRow on a truncated capture (use WriteTopK)");
    FS_RETURN_IF_ERROR(Claim(index));
    if (logits.size() != size_t(n_vocab_))
      return Unclaim(index, fmt::format("{}: {} logits, expected n_vocab = {}", Probe(index), logits.size(), n_vocab_));
    const RowScan scan = ScanRow(logits);
    if (scan.first_bad >= 0)
      return Unclaim(index, fmt::format("{}: non-finite logit {} at token {}", Probe(index),
                                        logits[size_t(scan.first_bad)], scan.first_bad));
    const uint64_t row_at = uint64_t(index) * uint64_t(n_vocab_);
    Status put;
    if (store_ == StoreDtype::kBF16) {
      thread_local std::vector<uint16_t> bf16;  // one per writing thread, reused across rows
      bf16.resize(logits.size());
      RoundToBf16(logits, bf16);
      put = Put("logits", row_at * 2, bf16.data(), bf16.size() * 2);
    } else {
      put = Put("logits", row_at * 4, logits.data(), logits.size_bytes());
    }
    if (!put.ok()) return Unclaim(index, put);
    return Done(index, scan.argmax, Digest64(logits.data(), logits.size_bytes()));
  }

  Status WriteTopK(int64_t index, std::span<const int32_t> ids, std::span<const float> logprobs,
                   int32_t argmax) override {
    if (topk_ == 0) return Err("WriteTopK on a full-logits capture (use WriteRow)");
    {
      std::lock_guard lock(mu_);
      FS_RETURN_IF_ERROR(CheckIndex(index));
    }
    if (ids.size() != size_t(topk_) || logprobs.size() != size_t(topk_))
      return Err(
          fmt::format("{}: {} ids and {} logprobs, expected k = {}", Probe(index), ids.size(), logprobs.size(), topk_));
    if (argmax < 0 || std::any_of(ids.begin(), ids.end(), [](int32_t id) { return id < 0; }))
      return Err(fmt::format("{}: negative token id", Probe(index)));
    if (std::any_of(logprobs.begin(), logprobs.end(), [](float v) { return std::isnan(v) || v == INFINITY; }))
      return Err(fmt::format("{}: NaN or +Inf logprob", Probe(index)));
    if (!std::is_sorted(logprobs.begin(), logprobs.end(), std::greater<float>()))
      return Err(fmt::format("{}: top-k logprobs not in descending order", Probe(index)));
    const uint64_t row_at = uint64_t(index) * uint64_t(topk_) * 4;
    FS_RETURN_IF_ERROR(Put("topk_ids", row_at, ids.data(), ids.size_bytes()));
    FS_RETURN_IF_ERROR(Put("topk_logprobs", row_at, logprobs.data(), logprobs.size_bytes()));
    // The digest covers ids then logprobs, as stored.
    scratch_.resize(ids.size_bytes() + logprobs.size_bytes());
    std::memcpy(scratch_.data(), ids.data(), ids.size_bytes());
    std::memcpy(scratch_.data() + ids.size_bytes(), logprobs.data(), logprobs.size_bytes());
    return Done(index, argmax, Digest64(scratch_.data(), scratch_.size()));
  }

  void SetManifest(const nlohmann::json& manifest) override { manifest_ = manifest; }

  Status Commit() override {
    std::lock_guard lock(mu_);
    if (committed_) return Err("already committed");
    auto missing = std::find(written_.begin(), written_.end(), false);
    if (missing != written_.end()) {
      int64_t first = missing - written_.begin();
      return Err(fmt::format("{} of {} rows never written (first: {})", written_.size() - size_t(n_written_),
                             written_.size(), Probe(first)));
    }
    if (!manifest_.is_object()) return Err("the manifest must be a JSON object");
    FS_RETURN_IF_ERROR(Put("argmax", 0, argmax_.data(), argmax_.size() * 4));
    FS_RETURN_IF_ERROR(Put("digest", 0, digest_.data(), digest_.size() * 8));
    FS_RETURN_IF_ERROR(WriteHeader());
    FS_RETURN_IF_ERROR(file_.Commit());
    committed_ = true;
    return Status::Ok();
  }

 private:
  Status Err(const std::string& what) const { return Status::Error(path_ + ": " + what); }
  std::string Probe(int64_t index) const {
    return fmt::format("probe {} (position {})", index, positions_[size_t(index)]);
  }

  Status CheckIndex(int64_t index) const {
    if (committed_) return Err("row written after Commit");
    if (index < 0 || uint64_t(index) >= positions_.size())
      return Err(fmt::format("probe index {} outside the {} probes", index, positions_.size()));
    if (written_[size_t(index)] || claimed_[size_t(index)])
      return Err(fmt::format("{}: row written twice", Probe(index)));
    return Status::Ok();
  }

  // A capture that cannot fit fails before its rows are computed, not minutes into them: the
  // file's full size against the space free where it goes (after Open, which removed the
  // temporary files of killed runs). Where the filesystem cannot say, the writes will.
  Status CheckSpace() const {
    const uint64_t need = 8 + header_len_ + table_.back().offset + table_.back().bytes;
    const std::string dir = std::filesystem::path(path_).parent_path().string();
    struct statvfs fs;
    if (::statvfs(dir.empty() ? "." : dir.c_str(), &fs) != 0) return Status::Ok();
    const uint64_t free = uint64_t(fs.f_bavail) * uint64_t(fs.f_frsize);
    if (free >= need) return Status::Ok();
    return Err(fmt::format("not enough space: the capture needs {} and its disk has {} free{}",
                           HumanBytes(double(need)), HumanBytes(double(free)),
                           store_ == StoreDtype::kF32 && n_vocab_ > 0 ? " (BF16 rows take half)" : ""));
  }

  // Reserves row `index` for one WriteRow (a second concurrent call for it is "written twice").
  Status Claim(int64_t index) {
    std::lock_guard lock(mu_);
    FS_RETURN_IF_ERROR(CheckIndex(index));
    claimed_[size_t(index)] = true;
    return Status::Ok();
  }
  // Gives row `index` back after a failed write (it may be written again), returning the error.
  Status Unclaim(int64_t index, const Status& why) {
    std::lock_guard lock(mu_);
    claimed_[size_t(index)] = false;
    return why;
  }
  Status Unclaim(int64_t index, const std::string& why) { return Unclaim(index, Err(why)); }

  Status Done(int64_t index, int32_t argmax, uint64_t digest) {
    std::lock_guard lock(mu_);
    argmax_[size_t(index)] = argmax;
    digest_[size_t(index)] = digest;
    written_[size_t(index)] = true;
    ++n_written_;
    return Status::Ok();
  }

  // Writes n bytes at byte `at` inside tensor `name`.
  Status Put(std::string_view name, uint64_t at, const void* data, size_t n) {
    auto t = std::find_if(table_.begin(), table_.end(), [&](const CaptureTensor& e) { return e.name == name; });
    return file_.WriteAt(8 + header_len_ + t->offset + at, data, n);
  }

  // Writes the length prefix and the header JSON padded with spaces to the reserved length.
  Status WriteHeader() {
    std::string json = HeaderJson(table_, manifest_);
    if (json.size() > header_len_)
      return Err(
          fmt::format("the manifest grew to a {}-byte header, past the {} bytes reserved at Create "
                      "(keep the manifest small: hashes, not contents)",
                      json.size(), header_len_));
    json.resize(header_len_, ' ');
    uint64_t len = header_len_;
    FS_RETURN_IF_ERROR(file_.WriteAt(0, &len, 8));
    return file_.WriteAt(8, json.data(), json.size());
  }

  std::string path_;
  AtomicFile file_;
  std::vector<int32_t> positions_;
  int32_t n_vocab_ = 0, topk_ = 0;
  StoreDtype store_ = StoreDtype::kF32;
  nlohmann::json manifest_;
  std::vector<CaptureTensor> table_;
  uint64_t header_len_ = 0;
  // Kept in memory (12 bytes a probe) and written at Commit; rows go straight to the file.
  std::vector<int32_t> argmax_;
  std::vector<uint64_t> digest_;
  std::vector<bool> written_;
  std::vector<bool> claimed_;  // taken by a WriteRow in progress
  int64_t n_written_ = 0;
  bool committed_ = false;
  std::vector<char> scratch_;  // WriteTopK's digest input (top-k rows are written from one thread)
  std::mutex mu_;              // guards the bookkeeping above against concurrent WriteRow calls
};

}  // namespace

Result<std::unique_ptr<CaptureWriter>> CaptureWriter::Create(const std::string& path, const CaptureLayout& layout,
                                                             const nlohmann::json& manifest) {
  auto w = std::make_unique<FileWriter>();
  FS_RETURN_IF_ERROR(w->Init(path, layout, manifest));
  return std::unique_ptr<CaptureWriter>(std::move(w));
}

}  // namespace flipscope
