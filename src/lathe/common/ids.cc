#include "lathe/common/ids.h"

#include <unistd.h>

#include <cctype>
#include <random>

namespace lathe {
namespace {
// The kernel's generator (getentropy(3), i.e. getrandom(2)), which OpenSSL's
// own pool is seeded from: asking OpenSSL instead initialises the library
// (its configuration file, its providers) in every process that needs an
// id — each run's monitor names its temporary files with one — which cost
// ~10 ms and ~0.7 MB of touched code per process.
void RandomBytes(unsigned char* buf, size_t n) {
  if (::getentropy(buf, n) != 0) {  // n <= 256; fails only without getrandom(2)
    std::random_device rd;
    for (size_t i = 0; i < n; ++i) buf[i] = static_cast<unsigned char>(rd());
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
