// SHA-256 (FIPS 180-4, through libcrypto) and the xxHash row digest.
#include <openssl/evp.h>
#include <xxhash.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "util/util.h"

namespace flipscope {

// libcrypto fails these calls only when out of memory or misbuilt: no caller could recover.
Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr) != 1) std::abort();
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256::Update(const void* data, size_t n) {
  if (EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, n) != 1) std::abort();
}

std::string Sha256::HexDigest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), md, &len) != 1) std::abort();
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

std::string Sha256Hex(std::string_view data) {
  Sha256 h;
  h.Update(data.data(), data.size());
  return h.HexDigest();
}

Result<std::string> Sha256File(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(path + ": cannot open for reading");
  Sha256 h;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), std::streamsize(buf.size()));
    h.Update(buf.data(), size_t(in.gcount()));
  }
  if (in.bad()) return Status::Error(path + ": read error");
  return h.HexDigest();
}

uint64_t Digest64(const void* data, size_t n) { return XXH3_64bits(data, n); }

}  // namespace flipscope
