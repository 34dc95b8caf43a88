#include "lathe/state/model_store.h"

#include "lathe/state/run_store.h"
#include "lathe/state/schema.h"

namespace lathe::state {
namespace {

constexpr const char* kVersionColumns =
    "model, version, snapshot, backend, file, handler, file_pattern, inputs, outputs, lineage, "
    "note, created_by, created_at";

ModelRecord RowToModel(const Stmt& s) {
  ModelRecord m;
  m.name = s.Text(0);
  m.uid = static_cast<uid_t>(s.Int(1));
  m.user = s.Text(2);
  m.is_public = s.Int(3) != 0;
  m.next_version = s.Int(4);
  m.created_at_ms = s.Int(5);
  return m;
}

ModelVersionRecord RowToVersion(const Stmt& s) {
  ModelVersionRecord v;
  v.model = s.Text(0);
  v.version = s.Int(1);
  v.snapshot = s.Text(2);
  v.backend = s.Text(3);
  v.file = s.Text(4);
  v.handler = s.Text(5);
  v.file_pattern = s.Text(6);
  v.inputs = JsonOr(s.Text(7), nullptr);
  v.outputs = JsonOr(s.Text(8), nullptr);
  v.lineage = JsonOr(s.Text(9), Json::object());
  v.note = s.Text(10);
  v.created_by = s.Text(11);
  v.created_at_ms = s.Int(12);
  return v;
}

std::string SelectVersions(const char* where_sql) {
  return std::string("SELECT ") + kVersionColumns + " FROM model_versions " + where_sql;
}

constexpr const char* kSelectModels =
    "SELECT name, uid, user, public, next_version, created_at FROM models ";

}  // namespace

Result<std::unique_ptr<ModelStore>> ModelStore::Open(const std::string& db_path) {
  ASSIGN_OR_RETURN(std::unique_ptr<Db> db, OpenLatheDb(db_path));
  return std::unique_ptr<ModelStore>(new ModelStore(std::move(db)));
}

Result<int64_t> ModelStore::Changes() {
  ASSIGN_OR_RETURN(Stmt c, db_->Prepare("SELECT changes()"));
  ASSIGN_OR_RETURN(bool row, c.Step());
  return row ? c.Int(0) : 0;
}

Result<std::optional<ModelRecord>> ModelStore::GetModel(const std::string& name) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(std::string(kSelectModels) + "WHERE name=?"));
  s.Bind(1, name);
  ASSIGN_OR_RETURN(auto rows, CollectRows<ModelRecord>(s, RowToModel));
  if (rows.empty()) return std::optional<ModelRecord>();
  return std::optional<ModelRecord>(std::move(rows[0]));
}

Result<std::vector<ModelRecord>> ModelStore::ListModels() {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(std::string(kSelectModels) + "ORDER BY name"));
  return CollectRows<ModelRecord>(s, RowToModel);
}

Result<std::vector<ModelRecord>> ModelStore::ModelsNamed(const std::string& name) {
  ASSIGN_OR_RETURN(Stmt s,
                   db_->Prepare(std::string(kSelectModels) + kWhereNamed + "ORDER BY name"));
  s.Bind(1, name);
  return CollectRows<ModelRecord>(s, RowToModel);
}

Status ModelStore::SetPublic(const std::string& model, bool is_public) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("UPDATE models SET public=? WHERE name=?"));
  s.Bind(1, int64_t{is_public}).Bind(2, model);
  return s.Run();
}

Result<int64_t> ModelStore::NextVersion(const std::string& model) {
  ASSIGN_OR_RETURN(auto m, GetModel(model));
  return m ? m->next_version : 1;
}

Status ModelStore::AddVersion(const ModelRecord& owner, ModelVersionRecord& v) {
  return db_->Transaction([&]() -> Status {
    ASSIGN_OR_RETURN(Stmt add, db_->Prepare("INSERT OR IGNORE INTO models (name, uid, user, "
                                            "public, next_version, created_at) "
                                            "VALUES (?,?,?,?,1,?)"));
    add.Bind(1, owner.name).Bind(2, int64_t{owner.uid}).Bind(3, owner.user);
    add.Bind(4, int64_t{owner.is_public}).Bind(5, v.created_at_ms);
    RETURN_IF_ERROR(add.Run());
    ASSIGN_OR_RETURN(Stmt next, db_->Prepare("SELECT next_version FROM models WHERE name=?"));
    next.Bind(1, owner.name);
    ASSIGN_OR_RETURN(bool row, next.Step());
    if (!row) return Status::Internal("model " + owner.name + " vanished");
    v.model = owner.name;
    v.version = next.Int(0);
    next.Reset();
    ASSIGN_OR_RETURN(Stmt bump,
                     db_->Prepare("UPDATE models SET next_version=next_version+1 WHERE name=?"));
    bump.Bind(1, owner.name);
    RETURN_IF_ERROR(bump.Run());
    ASSIGN_OR_RETURN(Stmt ins,
                     db_->Prepare(std::string("INSERT INTO model_versions (") + kVersionColumns +
                                  ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"));
    ins.Bind(1, v.model).Bind(2, v.version).Bind(3, v.snapshot).Bind(4, v.backend);
    ins.Bind(5, v.file).Bind(6, v.handler).Bind(7, v.file_pattern).Bind(8, v.inputs.dump());
    ins.Bind(9, v.outputs.dump()).Bind(10, v.lineage.dump()).Bind(11, v.note);
    ins.Bind(12, v.created_by).Bind(13, v.created_at_ms);
    return ins.Run();
  });
}

Result<bool> ModelStore::SetSignature(const std::string& model, int64_t version, const Json& inputs,
                                      const Json& outputs) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("UPDATE model_versions SET inputs=?, outputs=? WHERE "
                                        "model=? AND version=? AND inputs='null' AND "
                                        "outputs='null'"));
  s.Bind(1, inputs.dump()).Bind(2, outputs.dump()).Bind(3, model).Bind(4, version);
  RETURN_IF_ERROR(s.Run());
  ASSIGN_OR_RETURN(int64_t n, Changes());
  return n > 0;
}

Result<std::optional<ModelVersionRecord>> ModelStore::GetVersion(const std::string& model,
                                                                 int64_t version) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(SelectVersions("WHERE model=? AND version=?")));
  s.Bind(1, model).Bind(2, version);
  ASSIGN_OR_RETURN(auto rows, CollectRows<ModelVersionRecord>(s, RowToVersion));
  if (rows.empty()) return std::optional<ModelVersionRecord>();
  return std::optional<ModelVersionRecord>(std::move(rows[0]));
}

Result<std::vector<ModelVersionRecord>> ModelStore::ListVersions(const std::string& model) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(SelectVersions("WHERE model=? ORDER BY version")));
  s.Bind(1, model);
  return CollectRows<ModelVersionRecord>(s, RowToVersion);
}

Result<std::vector<ModelVersionRecord>> ModelStore::VersionsOfSnapshot(
    const std::string& snapshot) {
  ASSIGN_OR_RETURN(Stmt s,
                   db_->Prepare(SelectVersions("WHERE snapshot=? ORDER BY model, version")));
  s.Bind(1, snapshot);
  return CollectRows<ModelVersionRecord>(s, RowToVersion);
}

Result<bool> ModelStore::DeleteVersion(const std::string& model, int64_t version) {
  bool deleted = false;
  RETURN_IF_ERROR(db_->Transaction([&]() -> Status {
    ASSIGN_OR_RETURN(Stmt a, db_->Prepare("SELECT alias FROM model_aliases WHERE model=? AND "
                                          "version=? ORDER BY alias"));
    a.Bind(1, model).Bind(2, version);
    ASSIGN_OR_RETURN(auto aliases,
                     CollectRows<std::string>(a, [](const Stmt& s) { return s.Text(0); }));
    if (!aliases.empty()) {
      std::string names;
      for (const auto& n : aliases) names += (names.empty() ? "" : ", ") + model + "@" + n;
      return Status::Msg(Code::kFailedPrecondition, "model.version_aliased",
                         {{"version", model + "/" + std::to_string(version)}, {"aliases", names}});
    }
    ASSIGN_OR_RETURN(Stmt d,
                     db_->Prepare("DELETE FROM model_versions WHERE model=? AND version=?"));
    d.Bind(1, model).Bind(2, version);
    RETURN_IF_ERROR(d.Run());
    ASSIGN_OR_RETURN(int64_t n, Changes());
    deleted = n > 0;
    return Status::OK();
  }));
  return deleted;
}

Result<std::optional<int64_t>> ModelStore::SetAlias(const std::string& model,
                                                    const std::string& alias, int64_t version) {
  std::optional<int64_t> before;
  RETURN_IF_ERROR(db_->Transaction([&]() -> Status {
    ASSIGN_OR_RETURN(auto v, GetVersion(model, version));
    if (!v) {
      return Status::Msg(Code::kNotFound, "model.version_not_found",
                         {{"version", model + "/" + std::to_string(version)}});
    }
    ASSIGN_OR_RETURN(Stmt q,
                     db_->Prepare("SELECT version FROM model_aliases WHERE model=? AND alias=?"));
    q.Bind(1, model).Bind(2, alias);
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) before = q.Int(0);
    q.Reset();
    ASSIGN_OR_RETURN(Stmt s, db_->Prepare("INSERT INTO model_aliases (model, alias, version) "
                                          "VALUES (?,?,?) ON CONFLICT (model, alias) DO UPDATE "
                                          "SET version=excluded.version"));
    s.Bind(1, model).Bind(2, alias).Bind(3, version);
    return s.Run();
  }));
  return before;
}

Result<bool> ModelStore::DeleteAlias(const std::string& model, const std::string& alias) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("DELETE FROM model_aliases WHERE model=? AND alias=?"));
  s.Bind(1, model).Bind(2, alias);
  RETURN_IF_ERROR(s.Run());
  ASSIGN_OR_RETURN(int64_t n, Changes());
  return n > 0;
}

Result<std::vector<ModelAlias>> ModelStore::Aliases(const std::string& model) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT alias, version FROM model_aliases WHERE model=? "
                                        "ORDER BY alias"));
  s.Bind(1, model);
  return CollectRows<ModelAlias>(s, [](const Stmt& r) { return ModelAlias{r.Text(0), r.Int(1)}; });
}

}  // namespace lathe::state
