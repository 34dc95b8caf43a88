// Container images as users know them, in the daemon's SQLite database
// (tables images and image_grants, schema v14 of state/schema.h).
//
// The images themselves live once in podman's store under the daemon's home
// (exec/container/podman.h), shared by everyone: a layer two users pull is
// stored once. What is per user is here:
//   - names: (uid, name) -> id. A user's `pytorch:latest` never shadows
//     another's; the same name may point at different ids for two users.
//   - grants: (uid, id). The ids a user may run: what they imported, pulled
//     or built, kept when a name moves on (a run recorded with the old id,
//     retried or run again with --like, still runs those bytes).
//
// Not thread-safe: daemon::Images serialises calls under its own mutex. It
// holds its own connection to the database the daemon's RunStore uses.
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

struct ImageName {
  uid_t uid = 0;
  std::string name;    // as the user gave it, with its tag: "pytorch:2.1"
  std::string id;      // 64 hex digits
  std::string source;  // "import rootfs.tar", "pull REF", "build DIR"
  int64_t created_at_ms = 0;
};

struct ImageGrant {
  uid_t uid = 0;
  std::string id;
  int64_t granted_at_ms = 0;
  int64_t last_used_at_ms = 0;  // the last run started in it; 0 = never
};

class ImageStore {
 public:
  static Result<std::unique_ptr<ImageStore>> Open(const std::string& db_path);

  // Points `uid`'s `name` at `id` (replacing what it pointed at) and grants
  // `id` to `uid`. Returns the id the name pointed at before, if any.
  Result<std::optional<std::string>> Put(const ImageName& n, int64_t now_ms);
  Result<std::optional<ImageName>> Find(uid_t uid, const std::string& name);
  Result<std::vector<ImageName>> List(uid_t uid);  // by name
  Result<std::vector<ImageName>> ListAll();        // every user's, by uid and name
  // Names of `uid`'s that point at `id`.
  Result<std::vector<std::string>> NamesOf(uid_t uid, const std::string& id);
  // False when there was no such name.
  Result<bool> RemoveName(uid_t uid, const std::string& name);

  Result<bool> HasGrant(uid_t uid, const std::string& id);
  Result<std::vector<ImageGrant>> Grants(uid_t uid);
  Status RevokeGrant(uid_t uid, const std::string& id);
  Status TouchGrant(uid_t uid, const std::string& id, int64_t now_ms);
  // Every id anyone holds a name or a grant for, with its last use by anyone.
  Result<std::vector<ImageGrant>> AllIds();
  // Forgets `id` for everyone (its image is gone from the store).
  Status Forget(const std::string& id);

 private:
  explicit ImageStore(std::unique_ptr<Db> db) : db_(std::move(db)) {}
  std::unique_ptr<Db> db_;
};

}  // namespace lathe::state
