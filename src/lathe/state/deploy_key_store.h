// Durable records of deployment keys, in the daemon's SQLite database (table
// deploy_keys, schema v8 of state/schema.h).
//
// As with API tokens (token_store.h), only the SHA-256 of a key's secret is
// stored, never the key: whoever reads the database cannot call a
// deployment with what they read. A revoked key's row is deleted; an expired
// one stays until it is revoked, so that its owner sees it listed as expired.
//
// Not thread-safe: the API serialises calls under its own mutex. It holds its
// own connection to the database the daemon's RunStore uses.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/state/db.h"

namespace lathe::state {

struct DeployKeyRecord {
  std::string id;           // the key's public part ("k" + 10 base32 characters)
  std::string deployment;   // the deployment it opens (names are unique across users)
  uid_t uid = 0;            // the deployment's owner, who issued it
  std::string user;         // that user's name when it was issued
  std::string name;         // what its owner called it ("" when unnamed)
  std::string secret_hash;  // SHA-256 of the secret part, 64 hex characters
  int64_t created_at_ms = 0;
  int64_t expires_at_ms = 0;    // 0: never
  int64_t last_used_at_ms = 0;  // 0: never used
  std::string created_by;       // how it was issued: "socket", "token <id>"

  // Live at `now_ms`: not past its expiry.
  bool LiveAt(int64_t now_ms) const { return expires_at_ms == 0 || now_ms < expires_at_ms; }
};

class DeployKeyStore {
 public:
  // Opens the database (applying missing migrations, as RunStore does).
  static Result<std::unique_ptr<DeployKeyStore>> Open(const std::string& db_path);

  // AlreadyExists when a key with r.id exists.
  Status Insert(const DeployKeyRecord& r);
  // nullopt when no key has this id.
  Result<std::optional<DeployKeyRecord>> Get(const std::string& id);
  // Newest first: the keys of `deployment`, only those of `uid` unless nullopt.
  Result<std::vector<DeployKeyRecord>> List(const std::string& deployment,
                                            std::optional<uid_t> uid);
  // How many keys of `deployment` are live at `now_ms`.
  Result<int64_t> CountLive(const std::string& deployment, int64_t now_ms);
  // Deletes the key; false when there was none with this id.
  Result<bool> Delete(const std::string& id);
  // Deletes every key of `deployment`; how many.
  Result<int64_t> DeleteAll(const std::string& deployment);
  // Records a use at `now_ms`.
  Status Touch(const std::string& id, int64_t now_ms);

 private:
  explicit DeployKeyStore(std::unique_ptr<Db> db) : db_(std::move(db)) {}
  Result<int64_t> Changes();

  std::unique_ptr<Db> db_;
};

}  // namespace lathe::state
