// The model registry (docs/deployments.md): `lathe model` through the API.
//
// A version references a snapshot of the daemon's store — no copy of the
// bytes — and pins it there (snap/pins.h) for as long as it exists, so no
// removal (DELETE /snapshots, prune, keep_checkpoints, run removal,
// retention) takes it away and gc keeps its chunks. Access follows the snapshots' rule: the
// owner and admins do anything; other users may read a public model (list,
// show, export) and nothing else.
#include "lathe/daemon/models.h"

#include <fnmatch.h>

#include <algorithm>
#include <charconv>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lathe/common/path_check.h"
#include "lathe/daemon/daemon.h"
#include "lathe/os/files.h"
#include "lathe/snap/checkpoints.h"
#include "lathe/snap/store.h"

namespace lathe::daemon {
namespace {

constexpr size_t kMaxModelName = 64;
constexpr size_t kMaxAlias = 32;
constexpr size_t kMaxFilesShown = 1000;

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}
bool AlnumChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

std::string Shown(std::string_view s) {
  std::string out(s.substr(0, 100));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return out;
}

std::optional<int64_t> PositiveNumber(std::string_view s) {
  int64_t n = 0;
  if (s.empty() || s.size() > 15 || s[0] == '0') return std::nullopt;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || end != s.data() + s.size() || n < 1) return std::nullopt;
  return n;
}

bool TopLevel(const std::string& path) { return path.find('/') == std::string::npos; }

std::string BackendOfFile(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".pt" || ext == ".pth" || ext == ".ts" || ext == ".torchscript" || ext == ".jit")
    return "torchscript";
  if (ext == ".py") return "process";
  return "";
}

// A pattern without '/' also matches a file in a subdirectory by its name.
bool MatchesName(const std::string& pattern, const std::string& path) {
  if (pattern.find('/') != std::string::npos) return false;
  std::string base = std::filesystem::path(path).filename().string();
  return ::fnmatch(pattern.c_str(), base.c_str(), 0) == 0;
}

std::string FirstFew(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 5; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > 5) s += fmt::format(", … (+{})", v.size() - 5);
  return s.empty() ? "-" : s;
}

}  // namespace

Status CheckModelName(const std::string& name) {
  bool ok = !name.empty() && name.size() <= kMaxModelName && AlnumChar(name[0]) &&
            std::all_of(name.begin(), name.end(), NameChar);
  if (ok) return Status::OK();
  return Status::Msg(Code::kInvalidArgument, "model.bad_name", {{"value", Shown(name)}});
}

Status CheckAliasName(const std::string& alias) {
  bool ok = !alias.empty() && alias.size() <= kMaxAlias && alias[0] >= 'a' && alias[0] <= 'z' &&
            std::all_of(alias.begin(), alias.end(), [](char c) {
              return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
            });
  if (ok) return Status::OK();
  return Status::Msg(Code::kInvalidArgument, "model.bad_alias", {{"value", Shown(alias)}});
}

Result<ModelRef> ParseModelRef(std::string_view ref) {
  ModelRef r;
  auto bad = [&] {
    return Status::Msg(Code::kInvalidArgument, "model.bad_ref", {{"value", Shown(ref)}});
  };
  size_t slash = ref.find('/'), at = ref.find('@');
  if (slash != std::string_view::npos && at != std::string_view::npos) return bad();
  if (slash != std::string_view::npos) {
    r.version = PositiveNumber(ref.substr(slash + 1));
    if (!r.version) return bad();
    r.name = std::string(ref.substr(0, slash));
  } else if (at != std::string_view::npos) {
    r.alias = std::string(ref.substr(at + 1));
    r.name = std::string(ref.substr(0, at));
    if (CheckAliasName(r.alias).ok() == false) return bad();
  } else {
    r.name = std::string(ref);
  }
  if (!CheckModelName(r.name).ok()) return bad();
  return r;
}

Result<RunSource> ParseRunSource(std::string_view s) {
  RunSource r;
  size_t at = s.find('@');
  r.run = std::string(s.substr(0, at));
  if (r.run.empty()) {
    return Status::Msg(Code::kInvalidArgument, "model.bad_run_source", {{"value", Shown(s)}});
  }
  if (at == std::string_view::npos) return r;
  std::string_view rest = s.substr(at + 1);
  if (rest == "latest") return r;
  int64_t step = 0;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), step);
  if (rest.empty() || ec != std::errc() || end != rest.data() + rest.size() || step < 0) {
    return Status::Msg(Code::kInvalidArgument, "model.bad_run_source", {{"value", Shown(s)}});
  }
  r.step = step;
  return r;
}

Result<ServedFiles> ChooseServedFiles(const snap::Manifest& m, const std::string& pattern,
                                      const std::string& handler, const std::string& backend,
                                      const std::string& checkpoint) {
  std::vector<std::string> files;
  for (const auto& e : m.files)
    if (e.type == snap::EntryType::kFile) files.push_back(e.path);
  auto is_file = [&](const std::string& p) {
    return std::find(files.begin(), files.end(), p) != files.end();
  };
  if (!backend.empty() && backend != "torchscript" && backend != "process") {
    return Status::Msg(Code::kInvalidArgument, "model.bad_backend", {{"value", Shown(backend)}});
  }
  ServedFiles out;
  // 1. The handler.
  if (!handler.empty()) {
    if (!is_file(handler)) {
      return Status::Msg(
          Code::kInvalidArgument, "model.no_such_file",
          {{"field", "handler"}, {"value", Shown(handler)}, {"files", FirstFew(files)}});
    }
    if (backend == "torchscript") {
      return Status::Msg(Code::kInvalidArgument, "model.handler_needs_process");
    }
    out.handler = handler;
    out.backend = "process";
  }
  // 2. The primary file.
  if (!pattern.empty()) {
    // Paths the pattern matches whole come first; base names only without.
    std::vector<std::string> hits, by_name;
    for (const auto& f : files) {
      if (::fnmatch(pattern.c_str(), f.c_str(), 0) == 0) {
        hits.push_back(f);
      } else if (MatchesName(pattern, f)) {
        by_name.push_back(f);
      }
    }
    if (hits.empty()) hits = std::move(by_name);
    if (hits.empty()) {
      return Status::Msg(
          Code::kInvalidArgument, "model.no_such_file",
          {{"field", "file"}, {"value", Shown(pattern)}, {"files", FirstFew(files)}});
    }
    if (hits.size() == 1) {
      out.file = hits[0];
    } else if (is_file(checkpoint) &&
               std::find(hits.begin(), hits.end(), checkpoint) != hits.end()) {
      out.file = checkpoint;
    } else {
      return Status::Msg(Code::kInvalidArgument, "model.file_ambiguous",
                         {{"value", Shown(pattern)}, {"files", FirstFew(hits)}});
    }
  } else if (is_file(checkpoint)) {
    out.file = checkpoint;
  } else if (out.handler.empty()) {
    if (files.size() != 1) {
      return Status::Msg(Code::kInvalidArgument, "model.needs_file", {{"files", FirstFew(files)}});
    }
    out.file = files[0];
  }
  // 3. The backend.
  if (out.backend.empty()) out.backend = backend.empty() ? BackendOfFile(out.file) : backend;
  if (out.backend.empty()) {
    return Status::Msg(Code::kInvalidArgument, "model.backend_unknown",
                       {{"file", Shown(out.file)}});
  }
  if (out.backend == "process" && out.handler.empty()) {
    if (BackendOfFile(out.file) != "process") {
      return Status::Msg(Code::kInvalidArgument, "model.process_needs_handler");
    }
    out.handler = out.file;
    out.file.clear();
  }
  // 4. What the server loads by name sits at the top.
  const std::string& loaded = out.backend == "process" ? out.handler : out.file;
  if (!TopLevel(loaded)) {
    return Status::Msg(
        Code::kInvalidArgument, "model.file_not_top_level",
        {{"field", out.backend == "process" ? "handler" : "file"}, {"value", Shown(loaded)}});
  }
  return out;
}

std::string ExportConfigYaml(const state::ModelVersionRecord& v) {
  const std::string& loaded = v.backend == "process" ? v.handler : v.file;
  std::string y = fmt::format(
      "# Written by `lathe model export {}/{}` (snapshot {}).\n"
      "backend: {}\n"
      "default_model_filename: {}\n",
      v.model, v.version, v.snapshot.substr(0, 12), v.backend, Json(loaded).dump());
  // A handler learns which file is the version's from its environment.
  if (v.backend == "process" && !v.file.empty()) {
    y += "parameters: {env: {LATHE_MODEL_FILE: " + Json(v.file).dump() + "}}\n";
  }
  // The signature (inputs, outputs) is not written: it is what `lathe serve`
  // itself described of this model (KServe metadata, not config.yaml's form).
  return y;
}

// --- the daemon's side ---

namespace {

std::string Holder(const std::string& model, int64_t version) {
  return fmt::format("model {}/{}", model, version);
}

bool Owns(const Caller& caller, const state::ModelRecord& m) {
  return caller.admin || m.uid == caller.uid;
}
bool Reads(const Caller& caller, const state::ModelRecord& m) {
  return Owns(caller, m) || m.is_public;
}

Status ModelNotFound(const std::string& name) {
  return Status::Msg(Code::kNotFound, "model.not_found", {{"model", name}});
}

// What a caller who may not change `m` is told: a model they cannot read is
// one they do not know of (404, as an unknown name); a public one is theirs
// to see, and whose it is too.
Status ModelForbidden(const Caller& caller, const state::ModelRecord& m) {
  if (!Reads(caller, m)) return ModelNotFound(m.name);
  return Status::Msg(Code::kPermissionDenied, "model.forbidden",
                     {{"model", m.name}, {"owner", m.user}});
}

// A new version under a name another user holds: the name is taken (names
// are unique across users), without saying whose a private model is.
Status ModelNameTaken(const Caller& caller, const state::ModelRecord& m) {
  if (Reads(caller, m)) return ModelForbidden(caller, m);
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
  return Json{{"model", v.model},
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

Result<state::ModelStore*> Daemon::ModelsDb() {
  if (!models_) {
    ASSIGN_OR_RETURN(models_, state::ModelStore::Open(paths_.db));
  }
  return models_.get();
}

Result<Json> Daemon::CreateModelVersion(const Caller& caller, const ModelVersionRequest& req) {
  RETURN_IF_ERROR(CheckModelName(req.name));
  const int sources = !req.from_run.empty() + !req.from_snapshot.empty() + !req.from_dir.empty();
  if (sources != 1) return Status::Msg(Code::kInvalidArgument, "model.one_source");
  if (req.note.size() > kMaxModelNoteBytes || !IsValidUtf8(req.note)) {
    return Status::Msg(Code::kInvalidArgument, "model.bad_note",
                       {{"max", std::to_string(kMaxModelNoteBytes)}});
  }
  RETURN_IF_ERROR(CheckNoNul(req.file, "file"));
  RETURN_IF_ERROR(CheckNoNul(req.handler, "handler"));
  // Another user's model takes no version of this caller's, before any work.
  {
    std::lock_guard<std::mutex> lock(models_mu_);
    ASSIGN_OR_RETURN(state::ModelStore * db, ModelsDb());
    ASSIGN_OR_RETURN(auto m, db->GetModel(req.name));
    if (m && !Owns(caller, *m)) return ModelNameTaken(caller, *m);
  }
  ASSIGN_OR_RETURN(ModelSource src, ModelSourceOf(caller, req));
  auto registered = RegisterModelVersion(caller, req, src);
  if (!registered.ok() && !req.from_dir.empty()) {
    // The snapshot made for this version alone goes with it.
    ASSIGN_OR_RETURN(snap::Store * store, checkpoints_->store());
    (void)store->Forget(src.id);
  }
  return registered;
}

Result<ModelSource> Daemon::ModelSourceOf(const Caller& caller, const ModelVersionRequest& req) {
  ASSIGN_OR_RETURN(snap::Store * store, checkpoints_->store());
  ModelSource src;
  if (!req.from_run.empty()) {
    ASSIGN_OR_RETURN(RunSource rs, ParseRunSource(req.from_run));
    ASSIGN_OR_RETURN(state::RunRecord r, Access(caller, rs.run, AccessAction::kRead));
    if (run::IsTerminal(r.state)) checkpoints_->Settle(r.id);
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
    const os::AccessAs as = ActingAs(caller.uid, caller.uid);
    RETURN_IF_ERROR(reserved_->Check("from_dir", req.from_dir, PathUse::kReadSource, as));
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

Result<Json> Daemon::RegisterModelVersion(const Caller& caller, const ModelVersionRequest& req,
                                          ModelSource& src) {
  ASSIGN_OR_RETURN(snap::Store * store, checkpoints_->store());
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

  std::lock_guard<std::mutex> lock(models_mu_);
  ASSIGN_OR_RETURN(state::ModelStore * db, ModelsDb());
  ASSIGN_OR_RETURN(auto existing, db->GetModel(req.name));
  if (existing && !Owns(caller, *existing)) return ModelNameTaken(caller, *existing);
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

Result<Json> Daemon::ListModels(const Caller& caller) {
  std::lock_guard<std::mutex> lock(models_mu_);
  ASSIGN_OR_RETURN(state::ModelStore * db, ModelsDb());
  ASSIGN_OR_RETURN(auto models, db->ListModels());
  Json rows = Json::array();
  for (const auto& m : models) {
    if (!Reads(caller, m)) continue;
    ASSIGN_OR_RETURN(auto versions, db->ListVersions(m.name));
    ASSIGN_OR_RETURN(auto aliases, db->Aliases(m.name));
    rows.push_back(
        Json{{"name", m.name},
             {"owner", m.user},
             {"uid", m.uid},
             {"public", m.is_public},
             {"versions", versions.size()},
             {"latest", versions.empty() ? Json(nullptr) : Json(versions.back().version)},
             {"aliases", AliasMap(aliases)},
             {"created_at_ms", m.created_at_ms}});
  }
  return Json{{"models", rows}};
}

// The model `ref` names, which `caller` may read; with a version or alias,
// that version too (nullopt for a bare NAME).
Result<std::pair<state::ModelRecord, std::optional<state::ModelVersionRecord>>>
Daemon::ResolveModel(const Caller& caller, const std::string& ref) {
  ASSIGN_OR_RETURN(ModelRef mr, ParseModelRef(ref));
  ASSIGN_OR_RETURN(state::ModelStore * db, ModelsDb());
  ASSIGN_OR_RETURN(auto m, db->GetModel(mr.name));
  if (!m) return ModelNotFound(mr.name);
  if (!Reads(caller, *m)) return ModelForbidden(caller, *m);
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

Result<Json> Daemon::GetModel(const Caller& caller, const std::string& ref) {
  std::lock_guard<std::mutex> lock(models_mu_);
  ASSIGN_OR_RETURN(auto found, ResolveModel(caller, ref));
  auto& [m, v] = found;
  ASSIGN_OR_RETURN(state::ModelStore * db, ModelsDb());
  ASSIGN_OR_RETURN(auto aliases, db->Aliases(m.name));
  const bool owner = Owns(caller, m);
  if (!v) {
    ASSIGN_OR_RETURN(auto versions, db->ListVersions(m.name));
    Json vs = Json::array();
    for (const auto& x : versions) vs.push_back(VersionJson(x, aliases, owner));
    return Json{{"name", m.name},
                {"owner", m.user},
                {"uid", m.uid},
                {"public", m.is_public},
                {"created_at_ms", m.created_at_ms},
                {"next_version", m.next_version},
                {"aliases", AliasMap(aliases)},
                {"versions", vs}};
  }
  Json j = VersionJson(*v, aliases, owner);
  j["owner"] = m.user;
  j["public"] = m.is_public;
  j["deployments"] = deployments_->UsersOf(v->model, v->version);
  ASSIGN_OR_RETURN(snap::Store * store, checkpoints_->store());
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

Result<Json> Daemon::SetModelAlias(const Caller& caller, const std::string& model,
                                   const std::string& alias, int64_t version) {
  RETURN_IF_ERROR(CheckModelName(model));
  RETURN_IF_ERROR(CheckAliasName(alias));
  if (alias == kLatestAlias) {
    return Status::Msg(Code::kInvalidArgument, "model.alias_reserved", {{"alias", alias}});
  }
  std::lock_guard<std::mutex> lock(models_mu_);
  ASSIGN_OR_RETURN(auto found, ResolveModel(caller, model));
  if (!Owns(caller, found.first)) return ModelForbidden(caller, found.first);
  ASSIGN_OR_RETURN(state::ModelStore * db, ModelsDb());
  ASSIGN_OR_RETURN(auto before, db->SetAlias(model, alias, version));
  return Json{{"model", model},
              {"alias", alias},
              {"version", version},
              {"previous", before ? Json(*before) : Json(nullptr)}};
}

Result<Json> Daemon::DeleteModelAlias(const Caller& caller, const std::string& model,
                                      const std::string& alias) {
  RETURN_IF_ERROR(CheckAliasName(alias));
  std::lock_guard<std::mutex> lock(models_mu_);
  ASSIGN_OR_RETURN(auto found, ResolveModel(caller, model));
  if (!Owns(caller, found.first)) return ModelForbidden(caller, found.first);
  ASSIGN_OR_RETURN(state::ModelStore * db, ModelsDb());
  ASSIGN_OR_RETURN(bool gone, db->DeleteAlias(model, alias));
  if (!gone) {
    return Status::Msg(Code::kNotFound, "model.alias_not_found", {{"alias", model + "@" + alias}});
  }
  return Json{{"model", model}, {"alias", alias}};
}

Result<Json> Daemon::DeleteModelVersion(const Caller& caller, const std::string& model,
                                        int64_t version) {
  // Before the registry's lock: the deployments' lock is never taken under it.
  std::vector<std::string> users = deployments_->UsersOf(model, version);
  std::lock_guard<std::mutex> lock(models_mu_);
  ASSIGN_OR_RETURN(auto found, ResolveModel(caller, model + "/" + std::to_string(version)));
  if (!Owns(caller, found.first)) return ModelForbidden(caller, found.first);
  if (!users.empty()) {
    std::string list;
    for (const auto& u : users) list += (list.empty() ? "" : ", ") + u;
    return Status::Msg(Code::kFailedPrecondition, "model.version_deployed",
                       {{"version", model + "/" + std::to_string(version)}, {"deployments", list}});
  }
  ASSIGN_OR_RETURN(state::ModelStore * db, ModelsDb());
  ASSIGN_OR_RETURN(bool gone, db->DeleteVersion(model, version));
  if (!gone) {
    return Status::Msg(Code::kNotFound, "model.version_not_found",
                       {{"version", model + "/" + std::to_string(version)}});
  }
  // After the record: a crash in between leaves a pin (the snapshot stays).
  ASSIGN_OR_RETURN(snap::Store * store, checkpoints_->store());
  if (Status st = store->Unpin(found.second->snapshot, Holder(model, version)); !st.ok()) {
    spdlog::warn("model {}/{}: snapshot {} not unpinned: {}", model, version,
                 found.second->snapshot.substr(0, 12), st.ToString());
  }
  return Json{{"model", model}, {"version", version}, {"snapshot", found.second->snapshot}};
}

Result<bool> Daemon::RecordModelSignature(const std::string& ref, const Json& inputs,
                                          const Json& outputs) {
  ASSIGN_OR_RETURN(ModelRef r, ParseModelRef(ref));
  if (!r.version) return false;
  const bool known =
      inputs.is_array() && outputs.is_array() && (!inputs.empty() || !outputs.empty());
  if (!known) return false;  // a handler that declares no tensor: still unknown
  std::lock_guard<std::mutex> lock(models_mu_);
  ASSIGN_OR_RETURN(state::ModelStore * db, ModelsDb());
  ASSIGN_OR_RETURN(bool set, db->SetSignature(r.name, *r.version, inputs, outputs));
  if (set) spdlog::info("model {}: its signature recorded from a replica's metadata", ref);
  return set;
}

Result<Json> Daemon::ExportModelVersion(const Caller& caller, const std::string& ref,
                                        const std::string& to, bool force) {
  state::ModelVersionRecord v;
  {
    std::lock_guard<std::mutex> lock(models_mu_);
    ASSIGN_OR_RETURN(auto found, ResolveModel(caller, ref));
    if (!found.second)
      return Status::Msg(Code::kInvalidArgument, "model.export_needs_version", {{"model", ref}});
    v = *found.second;
  }
  // <to>/<model>/<N>/ holds the snapshot, <to>/<model>/config.yaml says how
  // to serve it: the layout of `lathe serve --repository <to>`.
  RETURN_IF_ERROR(CheckRestorePlace(caller, to));
  const os::AccessAs as = ActingAs(caller.uid, caller.uid);
  const std::string model_dir = to + "/" + v.model;
  RETURN_IF_ERROR(os::WithAccess(as, [&] { return os::MakeDirs(model_dir, 0755); }));
  const std::string version_dir = model_dir + "/" + std::to_string(v.version);
  ASSIGN_OR_RETURN(Json restored, RestoreInto(caller, v.snapshot, version_dir, force, {}));
  const std::string config = model_dir + "/config.yaml";
  RETURN_IF_ERROR(
      os::WithAccess(as, [&] { return os::WriteFileAtomic(config, ExportConfigYaml(v), 0644); }));
  return Json{{"model", v.model},           {"version", v.version},      {"snapshot", v.snapshot},
              {"repository", to},           {"path", version_dir},       {"config", config},
              {"files", restored["files"]}, {"bytes", restored["bytes"]}};
}

}  // namespace lathe::daemon
