// Per-user secrets: what `lathe secret set|ls|rm` keeps and what a run's
// `secrets: [NAME]` puts into its environment (docs/security.md, "Secrets").
//
// Values are sealed (AES-256-GCM, common/secret_box.h) in the daemon's
// database (state/secret_store.h) with a key kept in the daemon's home
// (HomePaths::key: 32 random bytes as hex, 0600, the daemon's own),
// created when the first secret is set. A user sees and uses only their own
// secrets: every call names the uid it acts for, and nothing here takes
// another's. No Status made here carries a value.
//
// Thread-safe: one mutex around the store (its own database connection).
// The daemon calls it under its own mutex too, so nothing here calls back
// into the daemon.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/daemon/home.h"
#include "lathe/os/clock.h"
#include "lathe/state/secret_store.h"

namespace lathe::daemon {

inline constexpr size_t kMaxSecretValueBytes = 64 * 1024;
inline constexpr int64_t kMaxSecretsPerUser = 200;

class Secrets {
 public:
  // Opens nothing yet: the key and the store are opened at first use.
  Secrets(HomePaths paths, os::Clock& clock) : paths_(std::move(paths)), clock_(clock) {}

  // Sets `uid`'s secret: true when new, false when it replaced a value.
  // InvalidArgument for a bad name (secret.bad_name) or value
  // (secret.bad_value: empty, NUL, not UTF-8, over kMaxSecretValueBytes);
  // ResourceExhausted (secret.too_many) past kMaxSecretsPerUser.
  Result<bool> Set(uid_t uid, const std::string& user, const std::string& name,
                   std::string_view value);
  Result<std::vector<state::SecretRecord>> List(uid_t uid);
  // NotFound (secret.not_found) when `uid` has no secret `name`.
  Status Remove(uid_t uid, const std::string& name);

  // At submit: NotFound (secret.missing) naming the first of `names` that
  // `uid` has not set.
  Status CheckSet(uid_t uid, const std::string& user, const std::vector<std::string>& names);
  // At each start: the values by name. FailedPrecondition (secret.gone) for
  // one removed since, Internal (secret.unreadable) for one the key does not
  // open.
  Result<std::map<std::string, std::string>> SecretEnv(uid_t uid, const std::string& user,
                                                       const std::vector<std::string>& names);
  // The values of those of `names` that `uid` has, for masking them in what
  // is shown of the run (its log); errors leave a value out.
  std::vector<std::string> Values(uid_t uid, const std::vector<std::string>& names);

 private:
  // Opens the store; with `create`, makes the key first when there is none.
  // Without, and with no key yet, leaves store_ null (no secret exists).
  Status OpenStore(bool create);  // mu_ held

  // Constant after construction.
  const HomePaths paths_;
  os::Clock& clock_;

  std::mutex mu_;
  std::unique_ptr<state::SecretStore> store_;  // guarded by mu_; null until first use
};

}  // namespace lathe::daemon
