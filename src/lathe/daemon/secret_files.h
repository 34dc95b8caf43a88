// Secrets given to a run as files (the spec's `secret_files`), for programs
// that read a token from a file, or that should not carry it in an
// environment every child inherits (docs/security.md, "Secrets").
//
// At each start the daemon writes every value to <dir>/<NAME>, a file of
// mode 0600 owned by the run's user, in <dir> = <run dir>/secrets-<attempt>,
// a directory of mode 0700 owned by the run's user: the run dir is the
// daemon's (0711 in system mode), so the user reaches their directory by its
// name but cannot list or replace it, and no other user can enter it. The
// run gets the directory in $LATHE_SECRETS_DIR. When the attempt ends,
// however it ends (including when a restarted daemon finds it ended or
// never started), the directory goes. The value is in no launch.json, spec,
// event or log line.
//
// Thread-safe: plain functions of the paths they are given.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>

#include "lathe/common/status.h"

namespace lathe::daemon {

// <run_dir>/secrets-<attempt>.
std::string SecretFilesDir(const std::string& run_dir, int attempt);

// Writes `values` (name -> value) as files in `dir`, which is made anew (a
// leftover of the same path is removed first), all given to uid:gid.
// The Status names the path, never a value.
Status WriteSecretFiles(const std::string& dir, const std::map<std::string, std::string>& values,
                        uid_t uid, gid_t gid);

// Removes `dir` and whatever the run put into it; a missing one is fine.
// Its contents are removed with uid:gid's file-system identity (the
// directory is theirs: whatever links they made in it lead nowhere they
// could not go themselves); the emptied directory with the daemon's.
Status RemoveSecretFiles(const std::string& dir, uid_t uid, gid_t gid);

// Removes `dir`, a directory of the daemon's tree (its parent is the
// daemon's) that may hold directories of users: each of those is emptied
// with its owner's identity first (RemoveSecretFiles), then the rest goes
// with the daemon's. For what a kill left behind, whose record is gone.
Status RemoveDaemonTree(const std::string& dir);

}  // namespace lathe::daemon
