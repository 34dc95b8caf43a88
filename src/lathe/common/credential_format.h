// The form every credential the daemon issues shares (docs/security.md,
// "Credentials"): "<prefix><id>_<secret>". <id> is one letter naming the kind
// and 10 Crockford base32 characters: public (listings show it) and the key
// of the credential's row, so that checking one is a primary-key read, never
// a scan. <secret> is 64 lower-case hex characters (256 random bits), of
// which only the SHA-256 (of the 64 characters as written, as lower-case hex)
// is ever stored (state/credential_store.h).
//
//   API token        "lathe_"    + "t…"  (api/tokens.h)
//   browser session  ""          + "s…"  (the cookie's value, api/sessions.h)
//   deployment key   "lathe_dk_" + "k…"  (deploy_key_format.h)
//
// The prefixes and letters keep the kinds apart: none is taken for another.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace lathe {

struct CredentialParts {
  std::string id;      // the kind's letter + 10 base32 characters
  std::string secret;  // 64 lower-case hex characters
};

// The parts of "<prefix><id_letter>..._<secret>"; nullopt for anything else.
std::optional<CredentialParts> ParseCredential(std::string_view value, std::string_view prefix,
                                               char id_letter);
std::string FormatCredential(std::string_view prefix, const CredentialParts& parts);

// What is stored of a secret: SHA-256 of its characters, 64 lower-case hex
// characters.
std::string HashCredentialSecret(std::string_view secret);

// True when `secret` hashes to `sha256_hex` (HashCredentialSecret's form),
// compared in time that does not depend on where they differ.
bool CredentialSecretMatches(std::string_view secret, std::string_view sha256_hex);

}  // namespace lathe
