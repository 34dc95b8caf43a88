// Making a run's workspace (workspace_spec.h), inside the run.
//
// The daemon starts a run that has a workspace as
//   lathe __workspace --git SRC [--ref REF] --dir DIR --record FILE [--workdir W] -- ARGV...
//   lathe __workspace --in-place --dir DIR --record FILE [--workdir W] -- ARGV...
// (src/cmd/cmd_workspace.cc parses it into a WorkspaceJob). That first
// process of the run is the run's user's, in the run's cgroups, with the
// run's environment (their HOME, so their git configuration and
// credentials), and its output is the run's log: the clone's progress shows
// in `lathe logs -f`. It clones (or finds the clone a previous attempt
// made), writes what it checked out to FILE, enters the working directory
// and execs ARGV.
//
// The clone has depth 1: a branch or tag with `git clone --depth 1
// --branch`, a full commit id with init + `fetch --depth 1 origin <id>`
// (falling back to a full fetch where the server refuses an unadvertised
// commit), an abbreviated one with a full clone and a checkout. A clone is
// complete once `lathe.source`/`lathe.ref` are in its git config; a
// directory without them (a clone cut short) is made again.
//
// The record (JSON, written atomically, mode 0600): {"commit": "<id>"} or,
// when the workspace could not be made, {"error": KIND, "git": "<git's
// fatal lines>", "exit_code": N, "detail": "..."} with KIND one of
// GitFailureName's; the daemon turns it into the run's reason
// (daemon/workspaces.h). A dir workspace records the commit of the git
// work tree it is in, if any ({"in_place": true, "commit": ...}).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/i18n.h"
#include "lathe/common/json.h"
#include "lathe/common/status.h"

namespace lathe::run {

struct WorkspaceJob {
  std::string git;          // the source; empty with in_place
  std::string ref;          // empty: the remote's default branch
  bool in_place = false;    // `dir` is used as it is
  std::string dir;          // the clone's directory (made), or the one used in place
  std::string record_path;  // where the record goes; empty: nowhere
  std::string workdir;      // relative: inside dir; absolute: as is; empty: dir
  // Make the workspace and record it, then exit 0 without running anything
  // (the monitor then mounts it read-only and runs the command itself).
  bool setup_only = false;
  std::vector<std::string> argv;
};

// Why a workspace could not be made, from git's stderr.
enum class GitFailure {
  kNone,
  kAuth,
  kUnknownRef,
  kNotFound,
  kUnreachable,
  kNoGit,
  kLocal,
  kOther
};
std::string_view GitFailureName(GitFailure f);  // "auth", "unknown_ref", ...
GitFailure GitFailureFromName(std::string_view name);
GitFailure ClassifyGitError(std::string_view git_stderr);
// git's own explanation: its "fatal:"/"error:" lines (else the last line),
// joined, at most kMaxGitMessageBytes.
inline constexpr size_t kMaxGitMessageBytes = 600;
std::string GitMessage(std::string_view git_stderr);

struct WorkspaceOutcome {
  std::string commit;  // what is checked out ("" for a dir outside git)
  GitFailure failure = GitFailure::kNone;
  std::string git_message;  // GitMessage of the failing command
  int exit_code = 0;        // of the failing command
  std::string detail;       // kLocal: what could not be made
  Json ToJson(bool in_place) const;
};

// Makes the workspace (the clone, or nothing for in_place) and says what is
// checked out. Messages for the log go to `log_fd` in `lang`; git's output
// too. Never throws; a failure is in the outcome.
WorkspaceOutcome MakeWorkspace(const WorkspaceJob& job, int log_fd, Lang lang);

// All of the run's first process: MakeWorkspace, the record, the working
// directory, exec. Returns only on failure, with the exit status to use
// (kWorkspaceFailedExit when the workspace could not be made, 127 when the
// command is not found, 126 when it cannot be executed); 0 after setup_only.
inline constexpr int kWorkspaceFailedExit = 111;
int RunWorkspaceJob(const WorkspaceJob& job);

}  // namespace lathe::run
