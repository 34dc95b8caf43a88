// The deployment keys of the one credential store (credential_store.h), as
// the deployments' loop reads them (the hashes it hands the front) and
// removes them with their deployment. Issuing, checking and revoking keys is
// api/deploy_keys.h's.
//
// Not thread-safe: callers serialise access (as CredentialStore).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/state/credential_store.h"

namespace lathe::state {

// A key's row: its deployment is its scope.
using DeployKeyRecord = CredentialRecord;

class DeployKeyStore {
 public:
  // Opens the database (applying missing migrations, as RunStore does).
  static Result<std::unique_ptr<DeployKeyStore>> Open(const std::string& db_path) {
    ASSIGN_OR_RETURN(auto store, CredentialStore::Open(db_path));
    return std::unique_ptr<DeployKeyStore>(new DeployKeyStore(std::move(store)));
  }

  // Newest first: the keys of `deployment`, only those of `uid` unless nullopt.
  Result<std::vector<DeployKeyRecord>> List(const std::string& deployment,
                                            std::optional<uid_t> uid) {
    return store_->List({CredentialKind::kDeployKey, uid, deployment, 0});
  }
  // Deletes every key of `deployment`; how many.
  Result<int64_t> DeleteAll(const std::string& deployment) {
    return store_->DeleteScope(CredentialKind::kDeployKey, deployment);
  }

 private:
  explicit DeployKeyStore(std::unique_ptr<CredentialStore> store) : store_(std::move(store)) {}

  std::unique_ptr<CredentialStore> store_;
};

}  // namespace lathe::state
