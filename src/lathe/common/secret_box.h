// Authenticated encryption of small values at rest: AES-256-GCM (OpenSSL
// EVP) with a fresh random 96-bit nonce per value. What Seal returns is
// nonce || ciphertext || tag, and Open refuses anything that was changed,
// sealed with another key, or sealed with other associated data (`aad`: what
// the value is bound to, such as its owner and name, so a sealed value moved
// to another row does not open there).
//
// Thread-safe: a SecretBox holds only its key.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "lathe/common/status.h"

namespace lathe {

inline constexpr size_t kSecretKeyBytes = 32;  // AES-256
inline constexpr size_t kSecretNonceBytes = 12;
inline constexpr size_t kSecretTagBytes = 16;

// kSecretKeyBytes random bytes from OpenSSL's generator.
std::string NewSecretKey();

class SecretBox {
 public:
  // InvalidArgument unless `key` holds exactly kSecretKeyBytes bytes.
  static Result<SecretBox> FromKey(std::string key);

  Result<std::string> Seal(std::string_view plaintext, std::string_view aad) const;
  // Internal (never the value or the key in the message) when `sealed` does
  // not authenticate.
  Result<std::string> Open(std::string_view sealed, std::string_view aad) const;

 private:
  explicit SecretBox(std::string key) : key_(std::move(key)) {}
  std::string key_;
};

}  // namespace lathe
