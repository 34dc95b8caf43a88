// Deployment keys: what a client presents to call a deployment's endpoint
// that is not public (docs/security.md, "Credentials"). Issuing, checking,
// listing and revoking them; the deployments that use them come later.
//
// A key is "lathe_dk_<id>_<secret>" (common/credential_format.h): <id> ("k"
// and 10 base32 characters) is its public name and the key of its row in the
// credential store (state/credential_store.h, its deployment the row's
// scope), so that checking a key is one primary-key read; <secret> is 64 hex
// characters (256 random bits), of which only the SHA-256 is stored, as for
// API tokens (tokens.h). The
// "lathe_dk_" prefix keeps a key apart from a user's token: neither is ever
// taken for the other (ParseToken refuses a key, ParseDeployKey a token).
//
// A key is bound to one deployment's name and to the user who holds it: the
// deployment's owner, or a user it is shared with (role use or more,
// daemon/sharing.h), whose keys stop opening it when the share goes; it
// opens that deployment's endpoint and nothing else — never the API. At most
// Options::max_live_per_deployment (two) are live at once per deployment and
// holder, so a key can be replaced without a gap: issue the new
// one, move the clients, revoke the old one. A third is refused; nothing is
// revoked implicitly. Deployment names are unique across users, and when a
// deployment is removed its keys go with it (RevokeAll), so a name taken
// again later starts with none.
//
// Expiry and revocation take effect at the next request: every check reads
// the row and the clock.
//
// Thread-safe: calls are serialised on one mutex (one SQLite connection).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/deploy_key_format.h"
#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/os/clock.h"
#include "lathe/state/credential_store.h"

namespace lathe::api {

// The key's form lives in common/deploy_key_format.h (the deployments' front
// checks keys too).
using lathe::DeployKeyParts;
using lathe::FormatDeployKey;
using lathe::kDeployKeyPrefix;
using lathe::ParseDeployKey;

inline constexpr int64_t kMaxLiveDeployKeys = 2;

struct DeployKeyRequest {
  std::string deployment;  // the deployment's name (IsValidName)
  uid_t uid = 0;           // its owner
  std::string user;        // that user's name
  std::string name;        // at most kMaxTokenNameBytes printable characters; "" allowed
  // "" (never expires) or a duration ("30d", "12h") from 1s to 3650d.
  std::string expires;
  std::string created_by;  // "socket", "token <id>"
};

struct IssuedDeployKey {
  state::CredentialRecord record;  // its deployment is record.scope
  std::string key;                 // the whole key; shown once
};

// What the API shows of a key: never its secret or its hash.
Json DeployKeyToJson(const state::CredentialRecord& r, int64_t now_ms);

class DeployKeyService {
 public:
  struct Options {
    // Live keys a deployment may have at once: two, for rotation.
    int64_t max_live_per_deployment = kMaxLiveDeployKeys;
    // A use is written to the database at most this often per key.
    int64_t touch_every_ms = 60'000;
  };

  // Opens the daemon's database at `db_path`. `clock` (wall time, for
  // expiry) is not owned and must outlive the service.
  static Result<std::unique_ptr<DeployKeyService>> Open(const std::string& db_path,
                                                        os::Clock& clock, Options options);
  static Result<std::unique_ptr<DeployKeyService>> Open(const std::string& db_path,
                                                        os::Clock& clock) {
    return Open(db_path, clock, Options());
  }

  // InvalidArgument naming the field: deploy_key.bad_deployment,
  // token.bad_name, token.bad_expires. ResourceExhausted
  // (deploy_key.too_many) when the deployment has the most live keys: one
  // must be revoked first.
  Result<IssuedDeployKey> Issue(const DeployKeyRequest& req);
  // The record of a live key of `deployment`. PermissionDenied (401):
  // deploy_key.malformed when `key` is not of the form
  // "lathe_dk_<id>_<secret>"; deploy_key.invalid when no key has that id,
  // its secret differs (revoked, mistyped) or it belongs to another
  // deployment — one answer for all three; deploy_key.expired when it is
  // past its expiry.
  Result<state::CredentialRecord> Verify(std::string_view key, std::string_view deployment);
  // Newest first: `deployment`'s keys, only `owner`'s unless nullopt (an
  // admin). Expired ones included.
  Result<std::vector<state::CredentialRecord>> List(const std::string& deployment,
                                                    std::optional<uid_t> owner);
  // Deletes key `id` when `owner` is nullopt (an admin) or issued it; the
  // deleted record. NotFound (deploy_key.not_found) otherwise: another
  // user's key is "not found" to a user.
  Result<state::CredentialRecord> Revoke(const std::string& id, std::optional<uid_t> owner);
  // Deletes every key of `deployment` (it is being removed); how many.
  Result<int64_t> RevokeAll(const std::string& deployment);

 private:
  DeployKeyService(std::unique_ptr<state::CredentialStore> store, os::Clock& clock, Options o)
      : store_(std::move(store)), clock_(clock), opts_(o) {}

  std::mutex mu_;
  std::unique_ptr<state::CredentialStore> store_;  // guarded by mu_
  os::Clock& clock_;
  const Options opts_;
};

}  // namespace lathe::api
