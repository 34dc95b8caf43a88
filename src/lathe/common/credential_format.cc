#include "lathe/common/credential_format.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <cstdlib>

namespace lathe {
namespace {

constexpr size_t kIdChars = 11;      // the kind's letter + 10 base32
constexpr size_t kSecretChars = 64;  // 32 bytes as hex
constexpr std::string_view kIdAlphabet = "0123456789abcdefghjkmnpqrstvwxyz";
constexpr std::string_view kHex = "0123456789abcdef";

}  // namespace

std::optional<CredentialParts> ParseCredential(std::string_view value, std::string_view prefix,
                                               char id_letter) {
  if (value.substr(0, prefix.size()) != prefix) return std::nullopt;
  value.remove_prefix(prefix.size());
  if (value.size() != kIdChars + 1 + kSecretChars || value[kIdChars] != '_') return std::nullopt;
  std::string_view id = value.substr(0, kIdChars), secret = value.substr(kIdChars + 1);
  if (id[0] != id_letter || id.substr(1).find_first_not_of(kIdAlphabet) != std::string_view::npos ||
      secret.find_first_not_of(kHex) != std::string_view::npos) {
    return std::nullopt;
  }
  return CredentialParts{std::string(id), std::string(secret)};
}

std::string FormatCredential(std::string_view prefix, const CredentialParts& parts) {
  return std::string(prefix) + parts.id + "_" + parts.secret;
}

std::string HashCredentialSecret(std::string_view secret) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(secret.data(), secret.size(), d, &len, EVP_sha256(), nullptr) != 1 || len != 32) {
    std::abort();  // cannot happen with a working libcrypto
  }
  std::string hex(2 * len, '0');
  for (unsigned i = 0; i < len; ++i) {
    hex[2 * i] = kHex[d[i] >> 4];
    hex[2 * i + 1] = kHex[d[i] & 15];
  }
  return hex;
}

bool CredentialSecretMatches(std::string_view secret, std::string_view sha256_hex) {
  const std::string mine = HashCredentialSecret(secret);
  return sha256_hex.size() == mine.size() &&
         CRYPTO_memcmp(mine.data(), sha256_hex.data(), mine.size()) == 0;
}

}  // namespace lathe
