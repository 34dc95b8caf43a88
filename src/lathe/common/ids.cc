#include "lathe/common/ids.h"

#include <openssl/rand.h>

#include <cctype>
#include <random>

namespace lathe {
namespace {
void RandomBytes(unsigned char* buf, int n) {
  if (RAND_bytes(buf, n) != 1) {
    std::random_device rd;  // OpenSSL's pool should never fail; fall back anyway
    for (int i = 0; i < n; ++i) buf[i] = static_cast<unsigned char>(rd());
  }
}
}  // namespace

std::string NewId(std::string_view prefix) {
  static constexpr char kAlphabet[] = "0123456789abcdefghjkmnpqrstvwxyz";
  unsigned char buf[10];
  RandomBytes(buf, sizeof buf);
  std::string id(prefix);
  for (unsigned char b : buf) id += kAlphabet[b & 31];
  return id;
}

std::string NewSecret() {
  unsigned char buf[32];
  RandomBytes(buf, sizeof buf);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (unsigned char b : buf) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

bool IsValidName(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  if (!std::isalnum(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-' || (c >= 'A' && c <= 'Z');
    if (!ok) return false;
  }
  return true;
}

}  // namespace lathe
