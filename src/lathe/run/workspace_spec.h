// The run spec's `workspace`: where a run's code comes from (docs/workspaces.md).
//
//   workspace: https://host/repo.git#v1.2   a string (also `lathe run --workspace`)
//   workspace: {git: URL, ref: REF, readonly: bool}
//   workspace: {dir: /abs/path, readonly: bool}
//
// A git workspace is cloned with depth 1 when the run starts, by the run's
// user, into <their home>/.lathe/workspaces/<run id>; `ref` is a branch, a
// tag or a commit (empty: the remote's default branch). A dir workspace is
// used in place. Either way the spec's `workdir` is the command's working
// directory: a relative one is taken inside the workspace, none means the
// workspace's root.
//
// The string form:
//   https://… http://… git://… ssh://… file://… user@host:path   git, `#REF` at the end
//   /abs/path#REF                                                git (a local repository)
//   /abs/path   git when `is_git_repository(path)` says so (a bare repository:
//               nothing to work in, so it is cloned), else dir (used in place).
//               Without a probe (the daemon does not look at users' paths): git
//               when the path ends in ".git", else dir. The CLI probes, as the
//               user, and sends the object form.
// Thread-safe: pure functions.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "lathe/common/json.h"
#include "lathe/common/status.h"

namespace lathe::run {

struct WorkspaceSpec {
  std::string git;  // a git URL or an absolute path of a local repository
  std::string ref;  // with git: a branch, tag or commit; empty: the default branch
  std::string dir;  // an absolute directory used in place
  bool readonly = false;

  bool empty() const { return git.empty() && dir.empty(); }
  friend bool operator==(const WorkspaceSpec&, const WorkspaceSpec&) = default;
};

inline constexpr size_t kMaxWorkspaceSourceBytes = 4096;
inline constexpr size_t kMaxWorkspaceRefBytes = 255;

// Whether a local path is a git repository to clone (the CLI's probe).
using GitRepositoryProbe = std::function<bool(const std::string& path)>;

// The string form above; `field` names it in errors ("workspace", "--workspace").
Result<WorkspaceSpec> ParseWorkspaceString(std::string_view s, const std::string& field,
                                           const GitRepositoryProbe& is_git_repository = {});

// The spec's `workspace` value: a string or an object (field names in errors
// are "workspace", "workspace.git", ...). Null gives an empty spec.
Result<WorkspaceSpec> WorkspaceFromJson(const Json& j,
                                        const GitRepositoryProbe& is_git_repository = {});
// The canonical object form; null for an empty spec.
// WorkspaceFromJson(WorkspaceToJson(w)) gives back `w`.
Json WorkspaceToJson(const WorkspaceSpec& w);

// The spec's workdir against its workspace: an absolute one stays; a
// relative one (refused without a workspace: spec.bad_workdir) is taken
// inside a dir workspace (made absolute) or the clone of a git one (kept
// relative, normalised; the clone's path is known when the run starts);
// one that leads out of the workspace ("../x") is refused.
Status ResolveWorkspaceWorkdir(const WorkspaceSpec& w, std::string& workdir);

// True for a full commit id (40 or 64 hex digits): fetched by itself.
bool IsFullCommitId(std::string_view ref);
// True for what may be an abbreviated commit id (4-39 hex digits).
bool MayBeCommitId(std::string_view ref);

}  // namespace lathe::run
