// The model registry (docs/deployments.md): `lathe model` through the API.
//
// A version references a snapshot of the daemon's store — no copy of the
// bytes — and pins it there (snap/pins.h) for as long as it exists, so no
// removal (DELETE /snapshots, prune, keep_checkpoints, run removal,
// retention) takes it away and gc keeps its chunks. Access follows the snapshots' rule: the
// owner and admins do anything; other users may read a public model (list,
// show, export) and nothing else.
#include "lathe/deploy/registry.h"

#include <spdlog/spdlog.h>

#include <fmt/format.h>

#include "lathe/common/ids.h"
#include "lathe/common/owned_name.h"
#include "lathe/common/path_check.h"
#include "lathe/daemon/run_checkpoints.h"
#include "lathe/os/files.h"
#include "lathe/snap/checkpoints.h"
#include "lathe/snap/store.h"

namespace lathe::deploy {

using daemon::AccessAction;
using daemon::Caller;

namespace {

constexpr size_t kMaxFilesShown = 1000;

std::string Holder(const std::string& model, int64_t version) {
  return fmt::format("model {}/{}", model, version);
}

bool Owns(const Caller& caller, const state::ModelRecord& m) {
  return caller.admin || m.uid == caller.uid;
}

daemon::SharedObject ModelObject(const state::ModelRecord& m) {
  return {"model", m.name, m.uid, m.user, ""};
}

// A public model is everyone's to see and to use (deploy, export).
daemon::Role RoleOn(const Caller& caller, const state::ModelRecord& m,
                    const Result<daemon::Reach>& reach) {
  if (Owns(caller, m)) return daemon::Role::kOwner;
  daemon::Role role = reach.ok() ? reach->RoleOf(ModelObject(m)) : daemon::Role::kNone;
  if (m.is_public) role = std::max(role, daemon::Role::kUse);
  return role;
}

// The owner part of a model's key; a bare (older) key is its owner's.
std::string NamespaceOfModel(const state::ModelRecord& m) {
  std::string_view ns = NamespaceOf(m.name);
  return ns.empty() ? m.user : std::string(ns);
}

Status ModelNotFound(const std::string& name) {
  return Status::Msg(Code::kNotFound, "model.not_found", {{"model", name}});
}

// What a caller whose role on `m` is below `needed` is told: a model they
// cannot read is one they do not know of (404, as an unknown name); one they
// can, whose it is, the role they have and the one it takes (what only the
// owner does: adding and removing versions, model.owner_only).
Status ModelForbidden(daemon::Role role, const state::ModelRecord& m, daemon::Role needed) {
  if (role == daemon::Role::kNone) return ModelNotFound(m.name);
  const std::string has(daemon::RoleName(role));
  if (needed == daemon::Role::kOwner) {
    return Status::Msg(Code::kPermissionDenied, "model.owner_only",
                       {{"model", m.name}, {"owner", m.user}, {"role", has}});
  }
  return Status::Msg(Code::kPermissionDenied, "model.forbidden",
                     {{"model", m.name},
                      {"owner", m.user},
                      {"role", has},
                      {"needed", std::string(daemon::RoleName(needed))}});
}

// A new version under a name another user holds: the name is taken (names
// are unique across users), without saying whose a private model is; one the
// caller can see is the owner's to add versions to.
Status ModelNameTaken(daemon::Role role, const state::ModelRecord& m) {
  if (role != daemon::Role::kNone) return ModelForbidden(role, m, daemon::Role::kOwner);
  return Status::Msg(Code::kAlreadyExists, "model.name_taken", {{"model", m.name}});
}

bool SnapshotVisible(const Caller& caller, const std::map<std::string, std::string>& tags) {
  if (caller.admin) return true;
  auto uid = tags.find("uid");
  return uid != tags.end() && uid->second == std::to_string(caller.uid);
}

// The lineage as a reader who is not the owner sees it: the spec's
// environment values are the owner's business.
Json LineageFor(const Json& lineage, bool owner) {
  Json l = lineage;
  if (owner || !l.contains("spec") || !l["spec"].is_object()) return l;
  if (l["spec"].contains("env") && l["spec"]["env"].is_object()) {
    for (auto& [k, v] : l["spec"]["env"].items()) v = "(hidden)";
  }
  return l;
}

Json VersionJson(const state::ModelVersionRecord& v, const std::vector<state::ModelAlias>& aliases,
                 bool owner) {
  Json names = Json::array();
  for (const auto& a : aliases)
    if (a.version == v.version) names.push_back(a.alias);
  return Json{{"model", std::string(ShortName(v.model))},
              {"version", v.version},
              {"ref", v.model + "/" + std::to_string(v.version)},
              {"snapshot", v.snapshot},
              {"backend", v.backend},
              {"file", v.file},
              {"handler", v.handler},
              {"file_pattern", v.file_pattern},
              {"inputs", v.inputs},
              {"outputs", v.outputs},
              {"lineage", LineageFor(v.lineage, owner)},
              {"note", v.note},
              {"created_by", v.created_by},
              {"created_at_ms", v.created_at_ms},
              {"aliases", names}};
}

Json AliasMap(const std::vector<state::ModelAlias>& aliases) {
  Json j = Json::object();
  for (const auto& a : aliases) j[a.alias] = a.version;
  return j;
}

void NoteCheckpoint(ModelSource& s, const snap::Checkpoint& c) {
  s.checkpoint = c.is_dir ? "" : c.path;
  s.lineage["checkpoint_file"] = c.path;
  if (c.step) s.lineage["step"] = *c.step;
}

void NoteTags(ModelSource& s) {
  const auto& tags = s.manifest.tags;
  if (auto run = tags.find("run"); run != tags.end()) s.lineage["run"] = run->second;
  if (auto a = tags.find("attempt"); a != tags.end()) {
    if (auto n = PositiveNumber(a->second)) s.lineage["attempt"] = *n;
  }
}

}  // namespace

Result<daemon::SharedObject> Registry::ObjectOf(const Caller& caller, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(auto found, Resolve(caller, name, daemon::Role::kView));
  return ModelObject(found.first);
}

Result<daemon::Reach> Registry::Reach(const Caller& caller) {
  return runs_.sharing().ReachOf(caller);
}

Result<std::optional<state::ModelRecord>> Registry::FindModel(const Caller& caller,
                                                              const std::string& name,
                                                              const Result<daemon::Reach>& reach) {
  ASSIGN_OR_RETURN(state::ModelStore * db, ModelsDb());
  ASSIGN_OR_RETURN(auto models, db->ModelsNamed(std::string(ShortName(name))));
  auto choice = ChooseByName(
      std::move(models), name, caller.user, [](const auto& m) { return m.name; }, NamespaceOfModel,
      [&](const auto& m) { return RoleOn(caller, m, reach) != daemon::Role::kNone; });
  if (choice.several.empty()) return std::move(choice.found);
  std::string refs;
  for (const auto& m : choice.several)
    refs += (refs.empty() ? "" : ", ") + OwnedKey(NamespaceOfModel(m), ShortName(m.name));
  return Status::Msg(Code::kFailedPrecondition, "model.ambiguous",
                     {{"model", name}, {"refs", refs}});
}

Result<std::string> Registry::KeyForNew(const Caller& caller, const std::string& name) {
  const std::string_view ns = NamespaceOf(name);
  if (!ns.empty() && !IsValidName(ns)) return CheckModelName(name);  // model.bad_name
  RETURN_IF_ERROR(CheckModelName(std::string(ShortName(name))));
  const std::string owner = ns.empty() ? caller.user : std::string(ns);
  const auto reach = Reach(caller);
  ASSIGN_OR_RETURN(auto m, FindModel(caller, OwnedKey(owner, ShortName(name)), reach));
  if (m && !Owns(caller, *m)) return ModelNameTaken(RoleOn(caller, *m, reach), *m);
  if (m) return m->name;
  if (owner != caller.user) {
    return Status::Msg(Code::kPermissionDenied, "model.other_namespace",
                       {{"model", name}, {"user", caller.user}});
  }
  return OwnedKey(owner, ShortName(name));
}

Json Registry::SharedJson(const Caller& caller, const state::ModelRecord& m,
                          const Result<daemon::Reach>& reach) {
  const daemon::Role role = RoleOn(caller, m, reach);
  std::string by = reach.ok() ? reach->How(ModelObject(m)) : "";
  if (by.empty() && m.is_public) by = "public";
  return {{"role", std::string(daemon::RoleName(role))}, {"by", by}};
}

Result<state::ModelStore*> Registry::ModelsDb() {
  if (!models_) {
    ASSIGN_OR_RETURN(models_, state::ModelStore::Open(db_path_));
  }
  return models_.get();
}

Result<Json> Registry::CreateVersion(const Caller& caller, const ModelVersionRequest& given) {
  ModelVersionRequest req = given;
  const int sources = !req.from_run.empty() + !req.from_snapshot.empty() + !req.from_dir.empty();
  if (sources != 1) return Status::Msg(Code::kInvalidArgument, "model.one_source");
  if (req.note.size() > kMaxModelNoteBytes || !IsValidUtf8(req.note)) {
    return Status::Msg(Code::kInvalidArgument, "model.bad_note",
                       {{"max", std::to_string(kMaxModelNoteBytes)}});
  }
  RETURN_IF_ERROR(CheckNoNul(req.file, "file"));
  RETURN_IF_ERROR(CheckNoNul(req.handler, "handler"));
  // The model's key (names are unique per owner: common/owned_name.h);
  // another user's model takes no version of this caller's, before any work.
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(req.name, KeyForNew(caller, req.name));
  }
  ASSIGN_OR_RETURN(ModelSource src, SourceOf(caller, req));
  auto registered = Register(caller, req, src);
  if (!registered.ok() && !req.from_dir.empty()) {
    // The snapshot made for this version alone goes with it.
    ASSIGN_OR_RETURN(snap::Store * store, runs_.SnapshotStore());
    // Best effort: the registry's own error is what the caller gets; a pin or snapshot left behind
    // is only space.
    (void)store->Forget(src.id);
  }
  return registered;
}

Result<ModelSource> Registry::SourceOf(const Caller& caller, const ModelVersionRequest& req) {
  ASSIGN_OR_RETURN(snap::Store * store, runs_.SnapshotStore());
  ModelSource src;
  if (!req.from_run.empty()) {
    ASSIGN_OR_RETURN(RunSource rs, ParseRunSource(req.from_run));
    ASSIGN_OR_RETURN(state::RunRecord r, runs_.Access(caller, rs.run, AccessAction::kRead));
    if (run::IsTerminal(r.state)) runs_.SettleCheckpoints(r.id);
    ASSIGN_OR_RETURN(auto snaps, store->List());  // newest first
    bool found = false;
    for (const auto& info : snaps) {
      auto tag = info.tags.find("run");
      if (tag == info.tags.end() || tag->second != r.id) continue;
      auto m = store->Load(info.id);
      if (!m.ok()) continue;
      std::optional<snap::Checkpoint> c;
      if (rs.step) {
        for (const auto& k : m->checkpoints)
          if (k.complete && k.step == rs.step) c = k;
      } else {
        c = snap::ChooseResume(*m);
      }
      if (!c) continue;
      src.id = info.id;
      src.manifest = std::move(*m);
      NoteTags(src);
      NoteCheckpoint(src, *c);
      found = true;
      break;
    }
    if (!found) {
      if (rs.step) {
        return Status::Msg(Code::kNotFound, "model.run_no_step",
                           {{"run", rs.run}, {"step", std::to_string(*rs.step)}});
      }
      return Status::Msg(Code::kNotFound, "model.run_no_checkpoint", {{"run", rs.run}});
    }
    src.lineage["run"] = r.id;
    src.lineage["run_name"] = r.name;
    src.lineage["spec"] = run::SpecToJson(r.spec);
    if (r.workspace.is_object() && r.workspace.contains("commit"))
      src.lineage["workspace_commit"] = r.workspace["commit"];
  } else if (!req.from_snapshot.empty()) {
    ASSIGN_OR_RETURN(src.id, store->Resolve(req.from_snapshot));
    ASSIGN_OR_RETURN(src.manifest, store->Load(src.id));
    if (!SnapshotVisible(caller, src.manifest.tags)) {
      return Status::Msg(Code::kPermissionDenied, "model.snapshot_forbidden",
                         {{"snapshot", req.from_snapshot}});
    }
    NoteTags(src);
    if (auto c = snap::ChooseResume(src.manifest)) NoteCheckpoint(src, *c);
  } else {
    // Read with the caller's identity: what they cannot read, the daemon
    // does not read for them (their EACCES, not root's files).
    ASSIGN_OR_RETURN(const os::AccessAs as,
                     runs_.CheckReadSource(caller, "from_dir", req.from_dir));
    snap::SnapshotOptions o;
    o.tags = {{"uid", std::to_string(caller.uid)}, {"model", req.name}};
    o.read_as = as;
    o.parent = "";
    ASSIGN_OR_RETURN(auto taken, store->Snapshot(req.from_dir, o));
    src.id = taken.id;
    src.manifest = std::move(taken.manifest);
    src.lineage["source_dir"] = req.from_dir;
  }
  src.lineage["snapshot"] = src.id;
  return src;
}

Result<Json> Registry::Register(const Caller& caller, const ModelVersionRequest& req,
                                ModelSource& src) {
  ASSIGN_OR_RETURN(snap::Store * store, runs_.SnapshotStore());
  ASSIGN_OR_RETURN(ServedFiles served, ChooseServedFiles(src.manifest, req.file, req.handler,
                                                         req.backend, src.checkpoint));
  state::ModelVersionRecord v;
  v.snapshot = src.id;
  v.backend = served.backend;
  v.file = served.file;
  v.handler = served.handler;
  v.file_pattern = req.file;
  v.inputs = nullptr;
  v.outputs = nullptr;
  v.lineage = std::move(src.lineage);
  v.note = req.note;
  v.created_by = caller.user;
  v.created_at_ms = clock_.NowMs();

  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(state::ModelStore * db, ModelsDb());
  ASSIGN_OR_RETURN(auto existing, db->GetModel(req.name));  // the key
  if (existing && !Owns(caller, *existing)) {
    return ModelNameTaken(RoleOn(caller, *existing, Reach(caller)), *existing);
  }
  state::ModelRecord owner = existing.value_or(state::ModelRecord{});
  if (!existing) {
    owner.name = req.name;
    owner.uid = caller.uid;
    owner.user = caller.user;
    owner.is_public = req.is_public;
  }
  // Pinned before it is recorded: a crash in between leaves a pin without a
  // version (the snapshot stays), never a version whose snapshot can go.
  ASSIGN_OR_RETURN(int64_t next, db->NextVersion(req.name));
  RETURN_IF_ERROR(store->Pin(v.snapshot, Holder(req.name, next)));
  if (Status added = db->AddVersion(owner, v); !added.ok()) {
    // Best effort: the registry's own error is what the caller gets; a pin or snapshot left behind
    // is only space.
    (void)store->Unpin(v.snapshot, Holder(req.name, next));
    return added;
  }
  if (req.is_public && existing && !existing->is_public)
    RETURN_IF_ERROR(db->SetPublic(req.name, true));
  ASSIGN_OR_RETURN(auto aliases, db->Aliases(req.name));
  Json j = VersionJson(v, aliases, true);
  j["owner"] = owner.user;
  j["public"] = req.is_public || owner.is_public;
  return j;
}

Result<Json> Registry::List(const Caller& caller) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(state::ModelStore * db, ModelsDb());
  ASSIGN_OR_RETURN(auto models, db->ListModels());
  const auto reach = Reach(caller);
  Json rows = Json::array();
  for (const auto& m : models) {
    const daemon::Role role = RoleOn(caller, m, reach);
    if (role == daemon::Role::kNone) continue;
    ASSIGN_OR_RETURN(auto versions, db->ListVersions(m.name));
    ASSIGN_OR_RETURN(auto aliases, db->Aliases(m.name));
    rows.push_back(
        Json{{"name", std::string(ShortName(m.name))},
             {"ref", NamespaceOfModel(m) + "/" + std::string(ShortName(m.name))},
             {"owner", m.user},
             {"uid", m.uid},
             {"public", m.is_public},
             {"versions", versions.size()},
             {"latest", versions.empty() ? Json(nullptr) : Json(versions.back().version)},
             {"aliases", AliasMap(aliases)},
             {"created_at_ms", m.created_at_ms}});
    if (role < daemon::Role::kOwner) rows.back()["shared"] = SharedJson(caller, m, reach);
  }
  return Json{{"models", rows}};
}

// The model `ref` names, which `caller` may read; with a version or alias,
// that version too (nullopt for a bare NAME).
Result<std::pair<state::ModelRecord, std::optional<state::ModelVersionRecord>>> Registry::Resolve(
    const Caller& caller, const std::string& ref, daemon::Role needed,
    const Result<daemon::Reach>& reach) {
  ASSIGN_OR_RETURN(ModelRef mr, ParseModelRef(ref));
  ASSIGN_OR_RETURN(state::ModelStore * db, ModelsDb());
  ASSIGN_OR_RETURN(auto m, FindModel(caller, mr.name, reach));
  if (!m) return ModelNotFound(mr.name);
  const daemon::Role role = RoleOn(caller, *m, reach);
  if (role < needed) return ModelForbidden(role, *m, needed);
  mr.name = m->name;  // the key, from here on
  std::optional<int64_t> version = mr.version;
  if (!mr.alias.empty()) {
    if (mr.alias == kLatestAlias) {
      ASSIGN_OR_RETURN(auto versions, db->ListVersions(mr.name));
      if (versions.empty())
        return Status::Msg(Code::kNotFound, "model.no_versions", {{"model", mr.name}});
      version = versions.back().version;
    } else {
      ASSIGN_OR_RETURN(auto aliases, db->Aliases(mr.name));
      for (const auto& a : aliases)
        if (a.alias == mr.alias) version = a.version;
      if (!version) {
        return Status::Msg(Code::kNotFound, "model.alias_not_found",
                           {{"alias", mr.name + "@" + mr.alias}});
      }
    }
  }
  if (!version) return std::make_pair(*m, std::optional<state::ModelVersionRecord>());
  ASSIGN_OR_RETURN(auto v, db->GetVersion(mr.name, *version));
  if (!v) {
    return Status::Msg(Code::kNotFound, "model.version_not_found",
                       {{"version", mr.name + "/" + std::to_string(*version)}});
  }
  return std::make_pair(*m, v);
}

Result<Json> Registry::Get(const Caller& caller, const std::string& ref) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto reach = Reach(caller);  // once per request
  ASSIGN_OR_RETURN(auto found, Resolve(caller, ref, daemon::Role::kView, reach));
  auto& [m, v] = found;
  ASSIGN_OR_RETURN(state::ModelStore * db, ModelsDb());
  ASSIGN_OR_RETURN(auto aliases, db->Aliases(m.name));
  const bool owner = Owns(caller, m);
  if (!v) {
    ASSIGN_OR_RETURN(auto versions, db->ListVersions(m.name));
    auto store = runs_.SnapshotStore();
    Json vs = Json::array();
    for (const auto& x : versions) {
      Json one = VersionJson(x, aliases, owner);
      // What `lathe model show` has of each: its size and who serves it.
      one["deployments"] = DeployedBy(x.model, x.version);
      if (store.ok()) {
        if (auto manifest = (*store)->Load(x.snapshot); manifest.ok()) {
          uint64_t size = 0;
          for (const auto& e : manifest->files) {
            if (e.type == snap::EntryType::kFile) size += e.size;
          }
          one["size"] = size;
        }
      }
      vs.push_back(std::move(one));
    }
    Json out = {{"name", std::string(ShortName(m.name))},
                {"ref", NamespaceOfModel(m) + "/" + std::string(ShortName(m.name))},
                {"owner", m.user},
                {"uid", m.uid},
                {"public", m.is_public},
                {"created_at_ms", m.created_at_ms},
                {"next_version", m.next_version},
                {"aliases", AliasMap(aliases)},
                {"versions", vs}};
    if (!owner) out["shared"] = SharedJson(caller, m, reach);
    return out;
  }
  Json j = VersionJson(*v, aliases, owner);
  j["owner"] = m.user;
  j["public"] = m.is_public;
  if (!owner) j["shared"] = SharedJson(caller, m, reach);
  j["deployments"] = DeployedBy(v->model, v->version);
  ASSIGN_OR_RETURN(snap::Store * store, runs_.SnapshotStore());
  auto manifest = store->Load(v->snapshot);
  if (!manifest.ok()) {
    j["files_error"] = manifest.status().message();
    return j;
  }
  Json files = Json::array();
  uint64_t size = 0, count = 0;
  for (const auto& e : manifest->files) {
    if (e.type != snap::EntryType::kFile) continue;
    size += e.size;
    if (++count <= kMaxFilesShown) files.push_back(Json{{"path", e.path}, {"size", e.size}});
  }
  j["files"] = files;
  j["file_count"] = count;
  j["size"] = size;
  return j;
}

Result<Json> Registry::SetAlias(const Caller& caller, const std::string& model,
                                const std::string& alias, int64_t version) {
  RETURN_IF_ERROR(CheckAliasName(alias));
  if (alias == kLatestAlias) {
    return Status::Msg(Code::kInvalidArgument, "model.alias_reserved", {{"alias", alias}});
  }
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(auto found, Resolve(caller, model, daemon::Role::kManage));
  if (found.second) return CheckModelName(model);  // a version or alias: model.bad_name
  ASSIGN_OR_RETURN(state::ModelStore * db, ModelsDb());
  ASSIGN_OR_RETURN(auto before, db->SetAlias(found.first.name, alias, version));
  return Json{{"model", std::string(ShortName(found.first.name))},
              {"ref", found.first.name},
              {"alias", alias},
              {"version", version},
              {"previous", before ? Json(*before) : Json(nullptr)}};
}

Result<Json> Registry::DeleteAlias(const Caller& caller, const std::string& model,
                                   const std::string& alias) {
  RETURN_IF_ERROR(CheckAliasName(alias));
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(auto found, Resolve(caller, model, daemon::Role::kManage));
  ASSIGN_OR_RETURN(state::ModelStore * db, ModelsDb());
  ASSIGN_OR_RETURN(bool gone, db->DeleteAlias(found.first.name, alias));
  if (!gone) {
    return Status::Msg(Code::kNotFound, "model.alias_not_found", {{"alias", model + "@" + alias}});
  }
  return Json{{"model", model}, {"alias", alias}};
}

Result<Json> Registry::DeleteVersion(const Caller& caller, const std::string& model,
                                     int64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(auto found,
                   Resolve(caller, model + "/" + std::to_string(version), daemon::Role::kOwner));
  const std::string key = found.first.name;
  std::vector<std::string> users = DeployedBy(key, version);
  if (!users.empty()) {
    std::string list;
    for (const auto& u : users) list += (list.empty() ? "" : ", ") + u;
    return Status::Msg(Code::kFailedPrecondition, "model.version_deployed",
                       {{"version", model + "/" + std::to_string(version)}, {"deployments", list}});
  }
  ASSIGN_OR_RETURN(state::ModelStore * db, ModelsDb());
  ASSIGN_OR_RETURN(bool gone, db->DeleteVersion(key, version));
  if (!gone) {
    return Status::Msg(Code::kNotFound, "model.version_not_found",
                       {{"version", model + "/" + std::to_string(version)}});
  }
  // After the record: a crash in between leaves a pin (the snapshot stays).
  ASSIGN_OR_RETURN(snap::Store * store, runs_.SnapshotStore());
  if (Status st = store->Unpin(found.second->snapshot, Holder(key, version)); !st.ok()) {
    spdlog::warn("model {}/{}: snapshot {} not unpinned: {}", model, version,
                 found.second->snapshot.substr(0, 12), st.ToString());
  }
  return Json{{"model", model},
              {"version", version},
              {"ref", key + "/" + std::to_string(version)},
              {"snapshot", found.second->snapshot}};
}

Result<bool> Registry::RecordSignature(const std::string& ref, const Json& inputs,
                                       const Json& outputs) {
  ASSIGN_OR_RETURN(ModelRef r, ParseModelRef(ref));
  if (!r.version) return false;
  const bool known =
      inputs.is_array() && outputs.is_array() && (!inputs.empty() || !outputs.empty());
  if (!known) return false;  // a handler that declares no tensor: still unknown
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(state::ModelStore * db, ModelsDb());
  ASSIGN_OR_RETURN(bool set, db->SetSignature(r.name, *r.version, inputs, outputs));
  if (set) spdlog::info("model {}: its signature recorded from a replica's metadata", ref);
  return set;
}

Result<Json> Registry::Export(const Caller& caller, const std::string& ref, const std::string& to,
                              bool force) {
  state::ModelVersionRecord v;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(auto found, Resolve(caller, ref, daemon::Role::kUse));
    if (!found.second)
      return Status::Msg(Code::kInvalidArgument, "model.export_needs_version", {{"model", ref}});
    v = *found.second;
  }
  // <to>/<model>/<N>/ holds the snapshot, <to>/<model>/config.yaml says how
  // to serve it: the layout of `lathe serve --repository <to>`.
  RETURN_IF_ERROR(runs_.CheckRestorePlace(caller, to));
  const os::AccessAs as = daemon::ActingAs(caller.uid, caller.uid);
  const std::string model_dir = to + "/" + std::string(ShortName(v.model));
  RETURN_IF_ERROR(os::WithAccess(as, [&] { return os::MakeDirs(model_dir, 0755); }));
  const std::string version_dir = model_dir + "/" + std::to_string(v.version);
  ASSIGN_OR_RETURN(daemon::Restored restored,
                   runs_.RestoreSnapshotTo(caller, v.snapshot, version_dir, force));
  const std::string config = model_dir + "/config.yaml";
  RETURN_IF_ERROR(
      os::WithAccess(as, [&] { return os::WriteFileAtomic(config, ExportConfigYaml(v), 0644); }));
  return Json{{"model", std::string(ShortName(v.model))},
              {"ref", v.model + "/" + std::to_string(v.version)},
              {"version", v.version},
              {"snapshot", v.snapshot},
              {"repository", to},
              {"path", version_dir},
              {"config", config},
              {"files", restored.files},
              {"bytes", restored.bytes}};
}

Result<state::ModelVersionRecord> Registry::ResolveVersion(const Caller& caller,
                                                           const std::string& ref,
                                                           std::string* qualified) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(ModelRef mr, ParseModelRef(ref));
  ASSIGN_OR_RETURN(auto found, Resolve(caller, ref, daemon::Role::kUse));
  if (!found.second)
    return Status::Msg(Code::kInvalidArgument, "model.export_needs_version", {{"model", ref}});
  if (qualified != nullptr) {
    const std::string ns = NamespaceOfModel(found.first);
    *qualified = ref;
    if (ns != caller.user) {
      *qualified = OwnedKey(ns, ShortName(found.first.name));
      if (mr.version) *qualified += "/" + std::to_string(*mr.version);
      if (!mr.alias.empty()) *qualified += "@" + mr.alias;
    }
  }
  return std::move(*found.second);
}

std::vector<std::string> Registry::DeployedBy(const std::string& model, int64_t version) {
  std::lock_guard<std::mutex> lock(deployments_mu_);
  std::vector<std::string> out;
  if (!deployments_) {
    auto opened = state::DeploymentStore::Open(db_path_);
    if (!opened.ok()) return out;
    deployments_ = std::move(*opened);
  }
  auto using_it = deployments_->UsingModel(model, version);
  if (!using_it.ok()) return out;
  for (const auto& d : *using_it) {
    const std::string ref = d.spec.value("model", "");
    out.push_back(d.name + " (" + (d.version.empty() ? ref : d.version) + ")");
  }
  return out;
}

}  // namespace lathe::deploy
