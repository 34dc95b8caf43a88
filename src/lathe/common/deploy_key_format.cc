#include "lathe/common/deploy_key_format.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <cstdlib>

namespace lathe {
namespace {

constexpr size_t kIdChars = 11;      // "k" + 10 base32
constexpr size_t kSecretChars = 64;  // 32 bytes as hex
constexpr std::string_view kIdAlphabet = "0123456789abcdefghjkmnpqrstvwxyz";
constexpr std::string_view kHex = "0123456789abcdef";

}  // namespace

std::optional<DeployKeyParts> ParseDeployKey(std::string_view key) {
  if (key.substr(0, kDeployKeyPrefix.size()) != kDeployKeyPrefix) return std::nullopt;
  key.remove_prefix(kDeployKeyPrefix.size());
  if (key.size() != kIdChars + 1 + kSecretChars || key[kIdChars] != '_') return std::nullopt;
  std::string_view id = key.substr(0, kIdChars), secret = key.substr(kIdChars + 1);
  if (id[0] != 'k' || id.substr(1).find_first_not_of(kIdAlphabet) != std::string_view::npos ||
      secret.find_first_not_of(kHex) != std::string_view::npos) {
    return std::nullopt;
  }
  return DeployKeyParts{std::string(id), std::string(secret)};
}

std::string FormatDeployKey(const DeployKeyParts& parts) {
  return std::string(kDeployKeyPrefix) + parts.id + "_" + parts.secret;
}

std::string HashDeployKeySecret(std::string_view secret) {
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

bool DeployKeySecretMatches(std::string_view secret, std::string_view sha256_hex) {
  const std::string mine = HashDeployKeySecret(secret);
  return sha256_hex.size() == mine.size() &&
         CRYPTO_memcmp(mine.data(), sha256_hex.data(), mine.size()) == 0;
}

}  // namespace lathe
