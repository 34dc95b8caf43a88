#include "lathe/daemon/workspaces.h"

#include <filesystem>

#include "lathe/common/i18n.h"
#include "lathe/daemon/secret_files.h"
#include "lathe/os/files.h"
#include "lathe/os/users.h"
#include "lathe/run/workspace.h"
#include "lathe/run/workspace_spec.h"

namespace lathe::daemon {
namespace {

constexpr size_t kMaxRecordBytes = 16 * 1024;
constexpr size_t kMaxUserTextBytes = 600;  // of git's words or a detail, in a reason

std::string RecordPath(const std::string& run_dir) {
  return WorkspaceRecordDir(run_dir) + "/record.json";
}

std::string RefLabel(const run::WorkspaceSpec& w) {
  return w.ref.empty() ? Tr("workspace.default_branch", Lang::kEn) : w.ref;
}

// Text the run's user wrote, fit for a reason: printable, bounded, UTF-8.
std::string UserText(const Json& v) {
  if (!v.is_string()) return "";
  std::string s = v.get<std::string>().substr(0, kMaxUserTextBytes);
  for (char& c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = ' ';
  }
  while (!s.empty() && !IsValidUtf8(s)) s.pop_back();  // a cut multi-byte character
  return s;
}

std::string FailureReason(const state::RunRecord& r, run::GitFailure f, const Json& rec) {
  const run::WorkspaceSpec& w = r.spec.workspace;
  std::string why;
  switch (f) {
    case run::GitFailure::kUnknownRef:
      why = Tr("workspace.why.unknown_ref", Lang::kEn, {{"ref", w.ref}});
      break;
    case run::GitFailure::kLocal:
      why = Tr(
          "workspace.why.local", Lang::kEn,
          {{"dir", r.workspace.value("dir", "")}, {"detail", UserText(rec.value("detail", ""))}});
      break;
    case run::GitFailure::kOther:
      why = Tr("workspace.why.other", Lang::kEn,
               {{"code", std::to_string(rec.value("exit_code", 0))}});
      break;
    default:
      why = Tr("workspace.why." + std::string(run::GitFailureName(f)), Lang::kEn);
  }
  return Tr("workspace.clone_failed", Lang::kEn,
            {{"source", w.git},
             {"ref", RefLabel(w)},
             {"why", why},
             {"git", UserText(rec.value("git", ""))}});
}

}  // namespace

std::string WorkspaceCloneDir(const std::string& user_home, const std::string& run_id) {
  std::string home = user_home.empty() ? "/" : user_home;
  while (home.size() > 1 && home.back() == '/') home.pop_back();
  return (home == "/" ? "" : home) + "/.lathe/workspaces/" + run_id;
}

std::string WorkspaceRecordDir(const std::string& run_dir) { return run_dir + "/workspace"; }

Json InitialWorkspace(const state::RunRecord& r, const std::string& user_home) {
  const run::WorkspaceSpec& w = r.spec.workspace;
  if (w.empty()) return Json::object();
  Json j = Json::object();
  if (w.git.empty()) {
    j["source"] = w.dir;
    j["dir"] = w.dir;
    j["in_place"] = true;
  } else {
    j["source"] = w.git;
    j["ref"] = w.ref;
    j["dir"] = WorkspaceCloneDir(user_home, r.id);
  }
  j["readonly"] = w.readonly;
  return j;
}

void ApplyWorkspace(const state::RunRecord& r, const std::string& self_exe,
                    exec::LaunchRequest& q) {
  const run::WorkspaceSpec& w = r.spec.workspace;
  if (w.empty()) return;
  const std::string dir = w.git.empty() ? w.dir : WorkspaceCloneDir(q.user.home, r.id);
  std::vector<std::string> wrap = {self_exe, "__workspace"};
  if (w.git.empty()) {
    wrap.push_back("--in-place");
  } else {
    wrap.insert(wrap.end(), {"--git", w.git});
    if (!w.ref.empty()) wrap.insert(wrap.end(), {"--ref", w.ref});
  }
  wrap.insert(wrap.end(), {"--dir", dir, "--record", RecordPath(r.run_dir)});
  const std::string& workdir = r.spec.workdir;  // relative: inside the workspace
  if (!workdir.empty()) wrap.insert(wrap.end(), {"--workdir", workdir});
  q.env["LATHE_WORKSPACE"] = dir;
  // A run in an image cannot execute Lathe's wrapper inside the image: the
  // workspace is made on the host first, as for a read-only one.
  if (w.readonly || !r.spec.image_id.empty()) {
    // The clone first, writable; then the mount; then the command, as it is.
    wrap.push_back("--setup-only");
    if (!q.setup_argv.empty()) {
      // A notebook's setup step already (notebooks.cc): it execs this one next.
      q.setup_argv.push_back("--");
      wrap.insert(wrap.begin(), q.setup_argv.begin(), q.setup_argv.end());
    }
    q.setup_argv = std::move(wrap);
    if (w.readonly) q.readonly_paths = {dir};
    q.workdir = workdir.empty() ? dir
                : workdir[0] == '/'
                    ? workdir
                    : (std::filesystem::path(dir) / workdir).lexically_normal().string();
    return;
  }
  wrap.push_back("--");
  wrap.insert(wrap.end(), q.argv.begin(), q.argv.end());
  q.argv = std::move(wrap);
  q.workdir = "/";  // the wrapper enters the workdir once the workspace is there
}

Status PrepareWorkspaceRecord(const state::RunRecord& r, uid_t uid, gid_t gid) {
  if (r.spec.workspace.empty()) return Status::OK();
  const std::string dir = WorkspaceRecordDir(r.run_dir);
  RETURN_IF_ERROR(RemoveSecretFiles(dir, uid, gid));  // a previous attempt's record
  Status st = os::WritePrivateDir(dir, {}, uid, gid);
  if (!st.ok()) return Status(st.code(), "cannot make the workspace's record: " + st.message());
  return Status::OK();
}

bool WorkspacePending(const state::RunRecord& r) {
  return !r.spec.workspace.empty() && r.attempt > 0 &&
         !(r.workspace.is_object() && r.workspace.value("attempt", 0) == r.attempt);
}

bool TakeWorkspaceRecord(state::RunRecord& r, uid_t uid, gid_t gid) {
  if (!WorkspacePending(r)) return false;
  std::string text;
  Status read = os::AsUser(os::IdentityOf(uid, gid), [&]() -> Status {
    ASSIGN_OR_RETURN(text, os::ReadRegularFileUpTo(RecordPath(r.run_dir), kMaxRecordBytes));
    return Status::OK();
  });
  if (!read.ok() || text.size() > kMaxRecordBytes) return false;
  auto rec = ParseJson(text);
  if (!rec.ok() || !rec->is_object()) return false;
  Json& w = r.workspace;
  if (!w.is_object()) w = Json::object();
  w.erase("commit");
  w.erase("error");
  w.erase("message");
  if (rec->contains("error")) {
    run::GitFailure f = run::GitFailureFromName(rec->value("error", ""));
    w["error"] = std::string(run::GitFailureName(f));
    w["message"] = FailureReason(r, f, *rec);
  } else if (rec->contains("commit") && (*rec)["commit"].is_string() &&
             run::IsFullCommitId((*rec)["commit"].get<std::string>())) {
    w["commit"] = (*rec)["commit"];
  }
  w["attempt"] = r.attempt;
  return true;
}

std::optional<std::string> WorkspaceFailure(const state::RunRecord& r) {
  if (!r.workspace.is_object() || !r.workspace.contains("error")) return std::nullopt;
  if (r.workspace.value("attempt", 0) != r.attempt) return std::nullopt;
  return r.workspace.value("message", "");
}

std::string WorkspaceEvent(const state::RunRecord& r) {
  const Json& w = r.workspace;
  if (w.value("in_place", false))
    return Tr("event.workspace_in_place", Lang::kEn, {{"dir", w.value("dir", "")}});
  return Tr("event.workspace", Lang::kEn,
            {{"source", w.value("source", "")},
             {"ref", RefLabel(r.spec.workspace)},
             {"commit", w.value("commit", "")}});
}

Status RemoveWorkspace(const state::RunRecord& r, uid_t uid, gid_t gid) {
  if (r.spec.workspace.empty()) return Status::OK();
  Status st = RemoveSecretFiles(WorkspaceRecordDir(r.run_dir), uid, gid);
  if (r.spec.workspace.git.empty()) return st;  // a dir workspace is the user's own
  auto u = os::LookupUser(uid);
  if (!u.ok() || u->home.empty()) return st;
  // The path is made again from the user's home and the run's id, never
  // taken from the record.
  const std::string dir = WorkspaceCloneDir(u->home, r.id);
  Status clone = os::AsUser(os::IdentityOf(uid, gid), [&]() -> Status {
    if (!os::LstatFile(dir).ok()) return Status::OK();
    return os::RemoveAll(dir);
  });
  return st.ok() ? clone : st;
}

}  // namespace lathe::daemon
