// The capture file reader: maps the file and validates the header, the tensor table, the shapes
// and the small tensors' values against the file size before handing out any data, so a hostile
// or damaged file gives one clear error and never an out-of-bounds read. Format:
// docs/capture-format.md.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "capture/capture.h"

namespace flipscope {
namespace {

// What each known tensor may be: its dtypes and rank. Anything else is refused.
struct Expected {
  const char* name;
  std::vector<std::string> dtypes;
  size_t rank;
};
const std::vector<Expected>& KnownTensors() {
  static const std::vector<Expected> known = {
      {"tokens", {"I32"}, 1},         {"positions", {"I32"}, 1}, {"argmax", {"I32"}, 1},       {"digest", {"U64"}, 1},
      {"logits", {"F32", "BF16"}, 2}, {"topk_ids", {"I32"}, 2},  {"topk_logprobs", {"F32"}, 2}};
  return known;
}

uint64_t DtypeSize(const std::string& d) { return d == "U64" ? 8 : d == "BF16" ? 2 : 4; }

template <typename T>
void Widen(const uint8_t* src, bool bf16, std::span<T> out) {
  for (size_t i = 0; i < out.size(); ++i) {
    if (bf16) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      out[i] = T(std::bit_cast<float>(uint32_t(h) << 16));
    } else {
      float f;
      std::memcpy(&f, src + 4 * i, 4);
      out[i] = T(f);
    }
  }
}

class FileReader final : public CaptureReader {
 public:
  ~FileReader() override {
    if (base_ != nullptr) ::munmap(const_cast<uint8_t*>(base_), size_);
  }

  Status Open(const std::string& path) {
    path_ = path;
    FS_RETURN_IF_ERROR(Map());
    FS_ASSIGN_OR_RETURN(nlohmann::json header, ParseHeader());
    FS_RETURN_IF_ERROR(ReadTable(header));
    FS_RETURN_IF_ERROR(CheckShapes());
    FS_RETURN_IF_ERROR(CheckValues());
    return ReadManifest(header);
  }

  const std::string& path() const override { return path_; }
  const CaptureManifest& manifest() const override { return manifest_; }
  std::span<const int32_t> tokens() const override { return tokens_; }
  std::span<const int32_t> positions() const override { return positions_; }
  std::span<const int32_t> argmax() const override { return argmax_; }
  std::span<const uint64_t> digest() const override { return digest_; }
  int32_t n_vocab() const override { return n_vocab_; }
  bool truncated() const override { return topk_ > 0; }
  int32_t topk() const override { return topk_; }
  StoreDtype store() const override { return bf16_ ? StoreDtype::kBF16 : StoreDtype::kF32; }
  const std::vector<CaptureTensor>& tensors() const override { return tensors_; }
  uint64_t file_size() const override { return size_; }

  Status ReadRow(int64_t i, std::span<float> out) const override { return Row(i, out); }
  Status ReadRowF64(int64_t i, std::span<double> out) const override { return Row(i, out); }

  std::span<const int32_t> TopKIds(int64_t i) const override { return TopKRow(topk_ids_, i); }
  std::span<const float> TopKLogprobs(int64_t i) const override { return TopKRow(topk_logprobs_, i); }

  std::span<const uint8_t> StoredRow(int64_t i) const override {
    if (truncated() || logits_ == nullptr || i < 0 || i >= int64_t(positions_.size())) return {};
    const uint64_t row_bytes = uint64_t(n_vocab_) * (bf16_ ? 2 : 4);
    return {logits_ + uint64_t(i) * row_bytes, size_t(row_bytes)};
  }

  // Drops the mapping's pages lying wholly inside the rows' logits (MADV_DONTNEED on a read-only
  // private file mapping: later reads fault them back in from the page cache).
  void ReleaseRows(int64_t begin, int64_t end) const override {
    if (truncated() || logits_ == nullptr || begin < 0 || end > int64_t(positions_.size()) || begin >= end) return;
    const uint64_t row_bytes = uint64_t(n_vocab_) * (bf16_ ? 2 : 4);
    const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
    const uintptr_t lo = (uintptr_t(logits_ + uint64_t(begin) * row_bytes) + page - 1) / page * page;
    const uintptr_t hi = uintptr_t(logits_ + uint64_t(end) * row_bytes) / page * page;
    if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
  }

 private:
  Status Err(const std::string& what) const { return Status::Error(path_ + ": " + what); }

  Status Map() {
    int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Err(errno == ENOENT ? "no such file" : std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return Err("not a regular file");
    }
    size_ = uint64_t(st.st_size);
    if (size_ < 8) {
      ::close(fd);
      return Err(fmt::format("{} bytes: too short for a safetensors file", size_));
    }
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    ::close(fd);
    if (p == MAP_FAILED) return Err(std::string("cannot map: ") + std::strerror(map_errno));
    base_ = static_cast<const uint8_t*>(p);
    return Status::Ok();
  }

  Result<nlohmann::json> ParseHeader() {
    uint64_t n = 0;
    std::memcpy(&n, base_, 8);
    if (n == 0 || n > size_ - 8)
      return Err(
          fmt::format("header length {} does not fit the file ({} bytes): not a safetensors file "
                      "or truncated",
                      n, size_));
    data_start_ = 8 + n;
    auto text = reinterpret_cast<const char*>(base_ + 8);
    nlohmann::json h = nlohmann::json::parse(text, text + n, nullptr, /*allow_exceptions=*/false);
    if (h.is_discarded()) return Err("header is not valid JSON");
    if (!h.is_object()) return Err("header is not a JSON object");
    return h;
  }

  // Validates every entry's name, dtype, rank, byte range and alignment, then that no two overlap.
  Status ReadTable(const nlohmann::json& header) {
    const uint64_t data_size = size_ - data_start_;
    for (const auto& item : header.items()) {
      // Not a structured binding: clang 14 (the fuzz and sanitizer build) cannot capture one.
      const std::string& name = item.key();
      const nlohmann::json& v = item.value();
      if (name == "__metadata__") continue;
      auto known =
          std::find_if(KnownTensors().begin(), KnownTensors().end(), [&](const Expected& e) { return name == e.name; });
      if (known == KnownTensors().end()) return Err(fmt::format("unexpected tensor '{}'", name));
      const std::string where = fmt::format("tensor '{}'", name);
      if (!v.is_object() || !v.contains("dtype") || !v["dtype"].is_string() || !v.contains("shape") ||
          !v["shape"].is_array() || !v.contains("data_offsets") || !v["data_offsets"].is_array())
        return Err(where + ": needs dtype, shape and data_offsets");
      CaptureTensor t{name, v["dtype"].get<std::string>(), {}};
      if (std::find(known->dtypes.begin(), known->dtypes.end(), t.dtype) == known->dtypes.end())
        return Err(fmt::format("{}: dtype {}, expected {}", where, t.dtype, fmt::join(known->dtypes, " or ")));
      if (v["shape"].size() != known->rank)
        return Err(fmt::format("{}: rank {}, expected {}", where, v["shape"].size(), known->rank));
      uint64_t elems = 1;
      for (const auto& d : v["shape"]) {
        if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(INT32_MAX))
          return Err(where + ": shape entries must be integers in [0, 2^31)");
        t.shape.push_back(d.get<int64_t>());
        if (__builtin_mul_overflow(elems, d.get<uint64_t>(), &elems)) return Err(where + ": shape overflows");
      }
      const auto& off = v["data_offsets"];
      if (off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
        return Err(where + ": data_offsets must be two non-negative integers");
      const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
      if (begin > end || end > data_size)
        return Err(
            fmt::format("{}: data_offsets [{}, {}] outside the data section ({} bytes)", where, begin, end, data_size));
      uint64_t bytes = 0;
      if (__builtin_mul_overflow(elems, DtypeSize(t.dtype), &bytes) || bytes != end - begin)
        return Err(fmt::format("{}: data_offsets span {} bytes, shape and dtype need {}", where, end - begin,
                               elems * DtypeSize(t.dtype)));
      if ((data_start_ + begin) % DtypeSize(t.dtype) != 0) return Err(where + ": data not aligned to its dtype");
      t.offset = begin;
      t.bytes = bytes;
      tensors_.push_back(std::move(t));
    }
    std::sort(tensors_.begin(), tensors_.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
    for (size_t i = 1; i < tensors_.size(); ++i) {
      const CaptureTensor &a = tensors_[i - 1], &b = tensors_[i];
      if (b.offset < a.offset + a.bytes) return Err(fmt::format("tensors '{}' and '{}' overlap", a.name, b.name));
    }
    const uint64_t used = tensors_.empty() ? 0 : tensors_.back().offset + tensors_.back().bytes;
    if (used != data_size) return Err(fmt::format("{} bytes after the last tensor", data_size - used));
    return Status::Ok();
  }

  const CaptureTensor* Find(std::string_view name) const {
    auto t = std::find_if(tensors_.begin(), tensors_.end(), [&](const CaptureTensor& e) { return e.name == name; });
    return t == tensors_.end() ? nullptr : &*t;
  }
  template <typename T>
  std::span<const T> View(const CaptureTensor& t) const {
    return {reinterpret_cast<const T*>(base_ + data_start_ + t.offset), t.bytes / sizeof(T)};
  }

  // Presence of the right tensors and consistent shapes.
  Status CheckShapes() {
    for (const char* name : {"tokens", "positions", "argmax", "digest"})
      if (Find(name) == nullptr) return Err(fmt::format("missing tensor '{}'", name));
    const CaptureTensor *logits = Find("logits"), *ids = Find("topk_ids"), *lps = Find("topk_logprobs");
    if ((logits != nullptr) == (ids != nullptr || lps != nullptr))
      return Err("needs either 'logits' or both 'topk_ids' and 'topk_logprobs'");
    if (logits == nullptr && (ids == nullptr || lps == nullptr))
      return Err("needs both 'topk_ids' and 'topk_logprobs'");
    const int64_t n = Find("positions")->shape[0];
    for (const char* name : {"argmax", "digest"})
      if (Find(name)->shape[0] != n)
        return Err(fmt::format("'{}' has {} entries, 'positions' has {}", name, Find(name)->shape[0], n));
    if (logits != nullptr) {
      if (logits->shape[0] != n || logits->shape[1] == 0)
        return Err(
            fmt::format("'logits' shape [{}, {}] does not match {} probes", logits->shape[0], logits->shape[1], n));
      n_vocab_ = int32_t(logits->shape[1]);
      bf16_ = logits->dtype == "BF16";
      logits_ = base_ + data_start_ + logits->offset;
    } else {
      if (ids->shape != lps->shape || ids->shape[0] != n || ids->shape[1] == 0)
        return Err(fmt::format("'topk_ids' and 'topk_logprobs' must both be [{}, k] with k > 0", n));
      topk_ = int32_t(ids->shape[1]);
      topk_ids_ = View<int32_t>(*ids);
      topk_logprobs_ = View<float>(*lps);
    }
    tokens_ = View<int32_t>(*Find("tokens"));
    positions_ = View<int32_t>(*Find("positions"));
    argmax_ = View<int32_t>(*Find("argmax"));
    digest_ = View<uint64_t>(*Find("digest"));
    return Status::Ok();
  }

  // The small tensors' values: ids in range, positions strictly ascending inside the tokens.
  Status CheckValues() const {
    const int32_t id_end = truncated() ? INT32_MAX : n_vocab_;
    auto bad_id = [&](int32_t id) { return id < 0 || id >= id_end; };
    for (auto [name, ids] : {std::pair{"tokens", tokens_}, {"argmax", argmax_}, {"topk_ids", topk_ids_}}) {
      auto bad = std::find_if(ids.begin(), ids.end(), bad_id);
      if (bad != ids.end())
        return Err(fmt::format("'{}' holds token id {} outside the vocabulary [0, {})", name, *bad, id_end));
    }
    for (size_t i = 0; i < positions_.size(); ++i) {
      if (positions_[i] < 0 || size_t(positions_[i]) >= tokens_.size())
        return Err(fmt::format("probe position {} outside the {} tokens", positions_[i], tokens_.size()));
      if (i > 0 && positions_[i] <= positions_[i - 1])
        return Err(fmt::format("probe positions not strictly ascending at index {}", i));
    }
    return Status::Ok();
  }

  Status ReadManifest(const nlohmann::json& header) {
    auto meta = header.find("__metadata__");
    if (meta == header.end() || !meta->is_object() || !meta->contains(kManifestKey))
      return Err(fmt::format("no manifest (__metadata__ key '{}'): not a flipscope capture", kManifestKey));
    const auto& text = (*meta)[kManifestKey];
    if (!text.is_string()) return Err(fmt::format("__metadata__ '{}' is not a string", kManifestKey));
    const auto manifest = nlohmann::json::parse(text.get_ref<const std::string&>(), nullptr, false);
    if (manifest.is_discarded() || !manifest.is_object()) return Err("the manifest is not a JSON object");
    manifest_ = CaptureManifest::FromJson(manifest);
    return Status::Ok();
  }

  template <typename T>
  Status Row(int64_t i, std::span<T> out) const {
    if (truncated()) return Err("truncated capture: no logits rows (use the top-k accessors)");
    if (i < 0 || uint64_t(i) >= positions_.size())
      return Err(fmt::format("row {} outside the {} probes", i, positions_.size()));
    if (out.size() != size_t(n_vocab_))
      return Err(fmt::format("row buffer of {} values, n_vocab is {}", out.size(), n_vocab_));
    const uint64_t row_bytes = uint64_t(n_vocab_) * (bf16_ ? 2 : 4);
    Widen(logits_ + uint64_t(i) * row_bytes, bf16_, out);
    return Status::Ok();
  }

  template <typename T>
  std::span<const T> TopKRow(std::span<const T> all, int64_t i) const {
    if (!truncated() || i < 0 || uint64_t(i) >= positions_.size()) return {};
    return all.subspan(size_t(i) * size_t(topk_), size_t(topk_));
  }

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0, data_start_ = 0;
  std::vector<CaptureTensor> tensors_;
  CaptureManifest manifest_;
  std::span<const int32_t> tokens_, positions_, argmax_, topk_ids_;
  std::span<const uint64_t> digest_;
  std::span<const float> topk_logprobs_;
  const uint8_t* logits_ = nullptr;
  int32_t n_vocab_ = 0, topk_ = 0;
  bool bf16_ = false;
};

}  // namespace

Result<std::unique_ptr<CaptureReader>> CaptureReader::Open(const std::string& path) {
  auto r = std::make_unique<FileReader>();
  FS_RETURN_IF_ERROR(r->Open(path));
  return std::unique_ptr<CaptureReader>(std::move(r));
}

}  // namespace flipscope
