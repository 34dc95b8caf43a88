// The form of a deployment key, shared by the daemon, which issues and lists
// keys (api/deploy_keys.h), and the deployments' front, which checks them
// against the hashes the daemon hands it (gateway/front_routes.h).
//
// A key is "lathe_dk_<id>_<secret>" (credential_format.h): <id> is "k" and 10
// base32 characters, its public name; <secret> is 64 lower-case hex
// characters (256 random bits), of which only the SHA-256 (of the 64
// characters as written, in lower-case hex) is ever stored.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "lathe/common/credential_format.h"

namespace lathe {

inline constexpr std::string_view kDeployKeyPrefix = "lathe_dk_";

using DeployKeyParts = CredentialParts;  // id: "k" + 10 base32 characters

// The parts of a key of the form above; nullopt for anything else.
inline std::optional<DeployKeyParts> ParseDeployKey(std::string_view key) {
  return ParseCredential(key, kDeployKeyPrefix, 'k');
}
inline std::string FormatDeployKey(const DeployKeyParts& parts) {
  return FormatCredential(kDeployKeyPrefix, parts);
}

// What is stored of a key's secret: SHA-256 of its characters, as 64
// lower-case hex characters (the same hash as every credential's).
inline std::string HashDeployKeySecret(std::string_view secret) {
  return HashCredentialSecret(secret);
}

// True when `secret` hashes to `sha256_hex` (HashDeployKeySecret's form),
// compared in time that does not depend on where they differ.
inline bool DeployKeySecretMatches(std::string_view secret, std::string_view sha256_hex) {
  return CredentialSecretMatches(secret, sha256_hex);
}

}  // namespace lathe
