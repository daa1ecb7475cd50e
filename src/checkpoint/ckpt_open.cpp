// Opening checkpoints for tensor-by-tensor reading: memory maps, GGUF tensor tables, and the
// dispatch between GGUF, safetensors files, sharded indexes and folders.
#include <fcntl.h>
#include <fmt/format.h>
#include <ggml.h>
#include <gguf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "checkpoint/model_info.h"
#include "checkpoint/tensors.h"

namespace flipscope {

Result<std::shared_ptr<const MappedFile>> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Error(path + (errno == ENOENT ? ": no such file" : ": cannot open for reading"));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::Error(path + ": not a regular file");
  }
  std::shared_ptr<MappedFile> m(new MappedFile());
  m->path_ = path;
  m->size_ = uint64_t(st.st_size);
  if (m->size_ > 0) {
    void* p = ::mmap(nullptr, m->size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return Status::Error(fmt::format("{}: cannot map the file ({})", path, std::strerror(errno)));
    }
    m->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file open
  return std::shared_ptr<const MappedFile>(std::move(m));
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

void MappedFile::Release(uint64_t offset, uint64_t n) const {
  // Only whole pages inside the range: a neighbouring chunk may still be reading the edges.
  const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
  uint64_t begin = (offset + page - 1) / page * page, end = std::min(offset + n, size_) / page * page;
  if (data_ && end > begin) ::madvise(const_cast<uint8_t*>(data_) + begin, end - begin, MADV_DONTNEED);
}

int64_t TensorEntry::Elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

uint64_t Checkpoint::TotalBytes() const {
  uint64_t n = 0;
  for (const auto& t : tensors) n += t.bytes;
  return n;
}

namespace {

// A scalar or first-array-element integer of the GGUF metadata; 0 when absent or not an integer.
int64_t GgufFirstInt(const gguf_context* g, const std::string& key) {
  int64_t id = gguf_find_key(g, key.c_str());
  if (id < 0) return 0;
  gguf_type t = gguf_get_kv_type(g, id);
  const void* p = nullptr;
  if (t == GGUF_TYPE_ARRAY) {
    if (gguf_get_arr_n(g, id) == 0) return 0;
    t = gguf_get_arr_type(g, id);
    p = gguf_get_arr_data(g, id);
  } else {
    p = gguf_get_val_data(g, id);
  }
  if (t == GGUF_TYPE_UINT32) return *static_cast<const uint32_t*>(p);
  if (t == GGUF_TYPE_INT32) return *static_cast<const int32_t*>(p);
  if (t == GGUF_TYPE_UINT64) return int64_t(*static_cast<const uint64_t*>(p));
  return 0;
}

Result<Checkpoint> OpenGguf(const std::string& path) {
  FS_RETURN_IF_ERROR(CheckGguf(path));  // magic, header, every tensor within the file
  // Shapes come from the metadata context (ggml_tensor::ne), which every supported ggml has;
  // gguf_get_tensor_ne is newer than some releases a history worker is built against.
  ggml_context* meta = nullptr;
  gguf_init_params ip = {true, &meta};
  std::unique_ptr<gguf_context, void (*)(gguf_context*)> g(gguf_init_from_file(path.c_str(), ip), gguf_free);
  if (!g) return Status::Error(path + ": corrupt GGUF header");
  std::unique_ptr<ggml_context, void (*)(ggml_context*)> meta_owner(meta, ggml_free);
  Checkpoint c;
  c.path = path;
  c.format = CheckpointFormat::kGguf;
  FS_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  c.files.push_back(file);
  if (int64_t id = gguf_find_key(g.get(), "general.architecture");
      id >= 0 && gguf_get_kv_type(g.get(), id) == GGUF_TYPE_STRING)
    c.architecture = gguf_get_val_str(g.get(), id);
  c.n_head = int(GgufFirstInt(g.get(), c.architecture + ".attention.head_count"));
  c.n_head_kv = int(GgufFirstInt(g.get(), c.architecture + ".attention.head_count_kv"));
  if (c.n_head_kv == 0) c.n_head_kv = c.n_head;
  const uint64_t data = gguf_get_data_offset(g.get());
  for (int64_t i = 0; i < gguf_get_n_tensors(g.get()); ++i) {
    TensorEntry t;
    t.name = gguf_get_tensor_name(g.get(), i);
    ggml_type type = gguf_get_tensor_type(g.get(), i);
    t.dtype = ggml_type_name(type);
    const ggml_type_traits* tr = ggml_get_type_traits(type);
    t.ggml_type = (type == GGML_TYPE_F32 || tr->to_float) ? int(type) : -1;
    const ggml_tensor* tensor = ggml_get_tensor(meta, t.name.c_str());
    if (!tensor) return Status::Error(path + ": tensor '" + t.name + "' is listed but has no shape");
    const int64_t* ne = tensor->ne;
    int n_dims = GGML_MAX_DIMS;
    while (n_dims > 1 && ne[n_dims - 1] == 1) --n_dims;  // GGUF pads unused dims with 1
    for (int d = n_dims - 1; d >= 0; --d) t.shape.push_back(ne[d]);
    t.row_elements = ne[0];
    t.row_bytes = ggml_row_size(type, ne[0]);
    t.bytes = gguf_get_tensor_size(g.get(), i);
    t.offset = data + gguf_get_tensor_offset(g.get(), i);
    c.tensors.push_back(std::move(t));
  }
  return c;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Result<Checkpoint> OpenCheckpoint(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::Error(path + ": no such file");
  if (fs::is_directory(path, ec)) {
    for (const char* name : {"model.safetensors.index.json", "model.safetensors"}) {
      fs::path p = fs::path(path) / name;
      if (fs::exists(p, ec)) return OpenCheckpoint(p.string());
    }
    return Status::Error(path + ": folder holds neither model.safetensors.index.json nor model.safetensors");
  }
  if (EndsWith(path, ".json")) return OpenSafetensorsIndex(path);
  char magic[4] = {0};
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    size_t got = std::fread(magic, 1, 4, f);
    std::fclose(f);
    if (got == 4 && std::memcmp(magic, "GGUF", 4) == 0) return OpenGguf(path);
  } else {
    return Status::Error(path + ": cannot open for reading");
  }
  if (EndsWith(path, ".gguf")) return Status::Error(path + ": not a GGUF file (bad magic)");
  return OpenSafetensors(path);
}

}  // namespace flipscope
