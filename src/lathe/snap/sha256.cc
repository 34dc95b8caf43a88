#include "lathe/snap/sha256.h"

#include <openssl/evp.h>

#include <cstdlib>

namespace lathe::snap {
namespace {
// Fetched once: an implicit fetch per call (EVP_sha256()) costs a lock and a
// lookup in OpenSSL 3, noticeable at tens of thousands of chunks per GiB.
const EVP_MD* Md() {
  static const EVP_MD* md = [] {
    EVP_MD* m = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    return m != nullptr ? m : EVP_sha256();
  }();
  return md;
}
}  // namespace

Digest Sha256(const void* data, size_t n) {
  Digest d{};
  unsigned int len = 0;
  if (EVP_Digest(data, n, d.data(), &len, Md(), nullptr) != 1 || len != d.size()) {
    std::abort();  // cannot happen with a working libcrypto
  }
  return d;
}

std::string ToHex(const Digest& d) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s(64, '0');
  for (size_t i = 0; i < d.size(); ++i) {
    s[2 * i] = kHex[d[i] >> 4];
    s[2 * i + 1] = kHex[d[i] & 15];
  }
  return s;
}

namespace {
int HexVal(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}
}  // namespace

std::optional<Digest> DigestFromHex(std::string_view hex) {
  if (hex.size() != 64) return std::nullopt;
  Digest d{};
  for (size_t i = 0; i < d.size(); ++i) {
    int hi = HexVal(hex[2 * i]), lo = HexVal(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    d[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return d;
}

bool IsHexPrefix(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (HexVal(c) < 0) return false;
  }
  return true;
}

}  // namespace lathe::snap
