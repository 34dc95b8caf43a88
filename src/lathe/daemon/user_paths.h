// Paths that a user names to the daemon: a run's checkpoint directory and
// workdir, a restore target.
//
// A root daemon acts on such a path with the user's file-system identity
// (os::AccessAs), so the kernel's permission checks are the user's. Before
// it accepts the path at all, CheckNamedPath refuses what no run may use —
// the daemon's home, its store and its socket directory, or (for a directory
// the daemon writes into or reads whole) one that contains them — and checks,
// with the user's identity, that the user could have made or entered it
// themselves. Errors name the field and the path, in the user's words.
//
// Thread-safe: everything here is immutable after construction.
#pragma once

#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/daemon/home.h"
#include "lathe/os/users.h"

namespace lathe::daemon {

enum class PathUse {
  kCheckpointDir,  // created if missing, watched, read whole, restored into
  kWorkdir,        // entered by the run
  kRestoreTarget,  // written into (with force: its old contents replaced)
  kReadSource,     // read whole, never written (a model's --from-dir): it must exist
};

class ReservedPaths {
 public:
  // The daemon's home, store and socket directory, resolved now.
  explicit ReservedPaths(const HomePaths& home);

  // OK when `path` (absolute) may be used as `use` by the user whose
  // identity `as` takes (empty: the daemon's own). `field` names it in
  // errors ("checkpoints.dir", "workdir", "to").
  Status Check(const std::string& field, const std::string& path, PathUse use,
               const os::AccessAs& as) const;

  const std::vector<std::string>& dirs() const { return dirs_; }

 private:
  std::vector<std::string> dirs_;  // real paths, without a trailing slash
};

// `path` with its longest existing prefix resolved by realpath(3) and the rest
// appended, lexically normalised. Run through `as` by the caller when the
// resolution must be the user's.
Result<std::string> ResolveAsFarAsExists(const std::string& path);

// The nearest entry at or above `path` (normalised, absolute) that exists
// (lstat), "/" at worst. Run through `as` by the caller when the answer must
// be the user's.
std::string ExistingAncestor(std::string path);

// True when `inner` is `outer` or lies below it (both normalised, absolute).
bool PathWithin(const std::string& inner, const std::string& outer);

}  // namespace lathe::daemon
