// A run's workspace, on the daemon's side (docs/workspaces.md): how its
// attempts are started, what the run records of it, and its removal.
//
// A git workspace is cloned by the run's first process, `lathe __workspace`
// (run/workspace.h), as the run's user, into
// <their home>/.lathe/workspaces/<run id> — the user's own Lathe directory,
// never the daemon's home. A dir workspace is used in place. Either way that
// first process reports what it checked out in a small JSON file in
// <run dir>/workspace/, a directory of the run's user (mode 0700) inside the
// daemon's run directory (0711 in system mode): they reach it by name but
// cannot replace it, and nobody else can enter it. The daemon reads the file
// with the user's file-system identity, refusing anything but a small
// regular file, and takes from it only a commit id (hex digits) or a failure
// kind and git's words (bounded); what the workspace is (source, ref,
// directory) comes from the spec, never from the file.
//
// A read-only workspace (root daemon only, exec::Capabilities::private_shm):
// the clone is the attempt's setup step, then the monitor bind-mounts it
// read-only in the run's mount namespace and starts the command there
// (exec/attempt_records.h, LaunchConfig::setup_argv and readonly_paths).
//
// Thread-safe: plain functions of their arguments.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/exec/backend.h"
#include "lathe/state/run_store.h"

namespace lathe::daemon {

// <home>/.lathe/workspaces/<run id>.
std::string WorkspaceCloneDir(const std::string& user_home, const std::string& run_id);
// <run dir>/workspace, the record's directory.
std::string WorkspaceRecordDir(const std::string& run_dir);

// What the run record keeps of its workspace before its first process
// reported ({source, ref, dir, readonly, in_place}); {} without one.
// `user_home` is the run's user's home now.
Json InitialWorkspace(const state::RunRecord& r, const std::string& user_home);

// Wraps q.argv — whatever it holds — in `self_exe __workspace … --`, and
// points the attempt at its workspace: the monitor starts the wrapper in the
// user's home, the wrapper enters the working directory. For a read-only
// workspace, the wrapper becomes the setup step and the command runs as it
// is, in the workdir inside the read-only mount. No-op without a workspace.
void ApplyWorkspace(const state::RunRecord& r, const std::string& self_exe, exec::LaunchRequest& q);

// Makes the record's directory afresh for an attempt, the user's, 0700.
Status PrepareWorkspaceRecord(const state::RunRecord& r, uid_t uid, gid_t gid);

// Whether the run has a workspace whose record for the current attempt has
// not been taken yet (cheap: no file is read).
bool WorkspacePending(const state::RunRecord& r);

// Reads what the run's first process recorded and merges it into
// r.workspace: a commit, or the failure as `error` and `message` (the
// run's reason, a catalog text). False when there is nothing (new) to take.
bool TakeWorkspaceRecord(state::RunRecord& r, uid_t uid, gid_t gid);

// The workspace could not be made: the run's reason (a catalog text).
std::optional<std::string> WorkspaceFailure(const state::RunRecord& r);

// The event once the workspace is there ("workspace … at commit …").
std::string WorkspaceEvent(const state::RunRecord& r);

// Removes what the run left of its workspace: the clone (a git workspace
// only; a dir workspace is the user's and stays), with the user's
// file-system identity, and the record's directory. NotFound is fine.
Status RemoveWorkspace(const state::RunRecord& r, uid_t uid, gid_t gid);

}  // namespace lathe::daemon
