// The daemon's side of `lathe snap` through the API: the runs' snapshots in
// <home>/store, with the same access rule as runs (a snapshot tagged with
// another user's uid is theirs alone; root and the daemon's user see all).
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>

#include "lathe/common/path_check.h"
#include "lathe/daemon/daemon.h"
#include "lathe/os/files.h"
#include "lathe/os/users.h"
#include "lathe/snap/info_json.h"
#include "lathe/snap/store.h"

namespace lathe::daemon {
namespace {

bool Visible(const Caller& caller, const std::map<std::string, std::string>& tags) {
  if (caller.admin) return true;
  auto uid = tags.find("uid");
  return uid != tags.end() && uid->second == std::to_string(caller.uid);
}

bool OfRun(const std::map<std::string, std::string>& tags, const std::string& run_id) {
  auto run = tags.find("run");
  return run_id.empty() || (run != tags.end() && run->second == run_id);
}

Status Forbidden(const std::string& ref, const std::map<std::string, std::string>& tags) {
  auto uid = tags.find("uid");
  std::string owner = "root";
  if (uid != tags.end()) {
    // The tag may have been written by hand (`snap create --tag uid=…`): not always a number.
    unsigned long n = 0;
    auto [end, ec] =
        std::from_chars(uid->second.data(), uid->second.data() + uid->second.size(), n);
    auto u = ec == std::errc() && end == uid->second.data() + uid->second.size()
                 ? os::LookupUser(static_cast<uid_t>(n))
                 : Result<os::UserInfo>(Status::NotFound(uid->second));
    owner = u.ok() ? u->name : uid->second;
  }
  return Status::Msg(Code::kPermissionDenied, "snap.forbidden",
                     {{"snapshot", ref}, {"owner", owner}});
}

// A restore target is a path the caller names: absolute, and one the kernel
// can take (no NUL byte, within PATH_MAX and NAME_MAX), or a 400 before any
// file-system call sees it.
Status CheckRestoreTarget(const std::string& to) {
  RETURN_IF_ERROR(CheckNoNul(to, "to"));
  if (to.empty() || to[0] != '/') {
    return Status::Msg(Code::kInvalidArgument, "snap.restore_needs_absolute",
                       {{"path", to.substr(0, 200)}});
  }
  return CheckPathName(to, "to");
}

// `ref` as the caller means it: "latest" is the caller's newest snapshot
// (root's and the daemon's user's: the store's newest), not whoever's was
// taken last; anything else resolves store-wide and is checked by the caller.
Result<snap::SnapshotId> ResolveFor(const Caller& caller, snap::Store& store,
                                    const std::string& ref) {
  if (ref != "latest" || caller.admin) return store.Resolve(ref);
  ASSIGN_OR_RETURN(auto snaps, store.List());  // newest first
  for (const auto& s : snaps) {
    if (Visible(caller, s.tags)) return s.id;
  }
  return Status::Msg(Code::kNotFound, "snap.not_found", {{"snapshot", "latest"}});
}

}  // namespace

Result<Json> Daemon::ListSnapshots(const Caller& caller, const std::string& run_ref) {
  std::string run_id;
  if (!run_ref.empty()) {
    ASSIGN_OR_RETURN(auto r, Access(caller, run_ref, AccessAction::kRead));
    run_id = r.id;
  }
  ASSIGN_OR_RETURN(snap::Store * store, checkpoints_->store());
  ASSIGN_OR_RETURN(auto snaps, store->List());
  ASSIGN_OR_RETURN(auto skipped, store->Skipped());
  Json rows = Json::array();
  for (const auto& s : snaps) {
    if (Visible(caller, s.tags) && OfRun(s.tags, run_id)) rows.push_back(snap::InfoToJson(s));
  }
  for (const auto& s : skipped) {
    if (Visible(caller, s.tags) && OfRun(s.tags, run_id)) rows.push_back(snap::SkipToJson(s));
  }
  return rows;
}

Result<Json> Daemon::GetSnapshot(const Caller& caller, const std::string& ref) {
  ASSIGN_OR_RETURN(snap::Store * store, checkpoints_->store());
  ASSIGN_OR_RETURN(auto id, ResolveFor(caller, *store, ref));
  ASSIGN_OR_RETURN(auto m, store->Load(id));
  if (!Visible(caller, m.tags)) return Forbidden(ref, m.tags);
  return Json{{"id", id}, {"manifest", Json::parse(snap::ManifestToJson(m))}};
}

Result<Json> Daemon::DeleteSnapshot(const Caller& caller, const std::string& ref) {
  ASSIGN_OR_RETURN(snap::Store * store, checkpoints_->store());
  ASSIGN_OR_RETURN(auto id, ResolveFor(caller, *store, ref));
  ASSIGN_OR_RETURN(auto m, store->Load(id));
  if (!Visible(caller, m.tags)) return Forbidden(ref, m.tags);
  RETURN_IF_ERROR(store->Forget(id));
  return Json{{"id", id}};
}

Result<Json> Daemon::RestoreSnapshot(const Caller& caller, const std::string& ref,
                                     const std::string& to, bool force, snap::ProgressFn progress) {
  RETURN_IF_ERROR(CheckRestoreTarget(to));
  ASSIGN_OR_RETURN(snap::Store * store, checkpoints_->store());
  ASSIGN_OR_RETURN(auto id, ResolveFor(caller, *store, ref));
  ASSIGN_OR_RETURN(auto m, store->Load(id));
  if (!Visible(caller, m.tags)) return Forbidden(ref, m.tags);
  return RestoreInto(caller, id, to, force, std::move(progress));
}

Status Daemon::CheckRestorePlace(const Caller& caller, const std::string& to) {
  RETURN_IF_ERROR(CheckRestoreTarget(to));
  // A root daemon looks and writes with the caller's file-system identity:
  // the files are theirs, what they may not write is refused by the kernel,
  // and a path swapped after the checks cannot send the writes elsewhere.
  const os::AccessAs as = ActingAs(caller.uid, caller.uid);
  // The caller's own model cache lies in the daemon's home but is theirs:
  // it must be theirs indeed (the check below, for admins too).
  const bool own_cache =
      PathWithin(std::filesystem::path(to).lexically_normal().string(), UserCacheDir(caller.uid));
  if (!own_cache) RETURN_IF_ERROR(reserved_->Check("to", to, PathUse::kRestoreTarget, as));
  if (caller.admin && !own_cache) return Status::OK();
  return os::WithAccess(as, [&] {
    std::string anchor = ExistingAncestor(std::filesystem::path(to).lexically_normal().string());
    auto st = os::StatFile(anchor);
    if (!st.ok() || st->uid != caller.uid) {
      return Status::Msg(Code::kPermissionDenied, "snap.restore_not_yours",
                         {{"path", to}, {"dir", anchor}});
    }
    return Status::OK();
  });
}

Result<Json> Daemon::RestoreInto(const Caller& caller, const snap::SnapshotId& id,
                                 const std::string& to, bool force, snap::ProgressFn progress) {
  RETURN_IF_ERROR(CheckRestorePlace(caller, to));
  ASSIGN_OR_RETURN(snap::Store * store, checkpoints_->store());
  snap::RestoreOptions o;
  o.force = force;
  o.progress = std::move(progress);
  o.write_as = ActingAs(caller.uid, caller.uid);
  ASSIGN_OR_RETURN(auto r, store->Restore(id, to, o));
  return Json{{"id", id}, {"path", to}, {"files", r.files}, {"bytes", r.bytes}};
}

Result<Restored> Daemon::RestoreSnapshotTo(const Caller& caller, const snap::SnapshotId& id,
                                           const std::string& to, bool force) {
  ASSIGN_OR_RETURN(Json r, RestoreInto(caller, id, to, force, {}));
  return Restored{r.value("files", int64_t{0}), r.value("bytes", int64_t{0})};
}

Result<os::AccessAs> Daemon::CheckReadSource(const Caller& caller, const std::string& field,
                                             const std::string& path) {
  // Read with the caller's identity: what they cannot read, the daemon
  // does not read for them (their EACCES, not root's files).
  const os::AccessAs as = ActingAs(caller.uid, caller.uid);
  RETURN_IF_ERROR(reserved_->Check(field, path, PathUse::kReadSource, as));
  return as;
}

}  // namespace lathe::daemon
