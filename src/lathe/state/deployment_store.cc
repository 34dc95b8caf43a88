#include "lathe/state/deployment_store.h"

#include "lathe/state/run_store.h"
#include "lathe/state/schema.h"

namespace lathe::state {
namespace {

constexpr const char* kColumns =
    "name, uid, user, spec, version, plan, health, reason, removing, created_at, updated_at";

DeploymentRecord RowToRecord(const Stmt& s) {
  DeploymentRecord d;
  d.name = s.Text(0);
  d.uid = static_cast<uid_t>(s.Int(1));
  d.user = s.Text(2);
  d.spec = JsonOr(s.Text(3), Json::object());
  d.version = s.Text(4);
  d.plan = JsonOr(s.Text(5), Json::object());
  d.health = s.Text(6);
  d.reason = s.Text(7);
  d.removing = s.Int(8) != 0;
  d.created_at_ms = s.Int(9);
  d.updated_at_ms = s.Int(10);
  return d;
}

DeploymentEvent RowToEvent(const Stmt& s) {
  DeploymentEvent e;
  e.id = s.Int(0);
  e.deployment = s.Text(1);
  e.ts_ms = s.Int(2);
  e.level = s.Text(3);
  e.msg_id = s.Text(4);
  e.args = JsonOr(s.Text(5), Json::object());
  e.message = s.Text(6);
  return e;
}

}  // namespace

Result<std::unique_ptr<DeploymentStore>> DeploymentStore::Open(const std::string& db_path) {
  ASSIGN_OR_RETURN(std::unique_ptr<Db> db, OpenLatheDb(db_path));
  return std::unique_ptr<DeploymentStore>(new DeploymentStore(std::move(db)));
}

Status DeploymentStore::Insert(const DeploymentRecord& d) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(std::string("INSERT INTO deployments (") + kColumns +
                                        ") VALUES (?,?,?,?,?,?,?,?,?,?,?)"));
  s.Bind(1, d.name).Bind(2, int64_t{d.uid}).Bind(3, d.user).Bind(4, d.spec.dump());
  s.Bind(5, d.version).Bind(6, d.plan.dump()).Bind(7, d.health).Bind(8, d.reason);
  s.Bind(9, int64_t{d.removing}).Bind(10, d.created_at_ms).Bind(11, d.updated_at_ms);
  Status st = s.Run();
  if (st.code() == Code::kAlreadyExists) {
    return Status::Msg(Code::kAlreadyExists, "deploy.name_taken", {{"name", d.name}});
  }
  return st;
}

Result<std::optional<DeploymentRecord>> DeploymentStore::Get(const std::string& name) {
  ASSIGN_OR_RETURN(
      Stmt s, db_->Prepare(std::string("SELECT ") + kColumns + " FROM deployments WHERE name=?"));
  s.Bind(1, name);
  ASSIGN_OR_RETURN(auto rows, CollectRows<DeploymentRecord>(s, RowToRecord));
  if (rows.empty()) return std::optional<DeploymentRecord>();
  return std::optional<DeploymentRecord>(std::move(rows[0]));
}

Result<std::vector<DeploymentRecord>> DeploymentStore::List() {
  ASSIGN_OR_RETURN(
      Stmt s, db_->Prepare(std::string("SELECT ") + kColumns + " FROM deployments ORDER BY name"));
  return CollectRows<DeploymentRecord>(s, RowToRecord);
}

Result<std::vector<DeploymentRecord>> DeploymentStore::Named(const std::string& name) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(std::string("SELECT ") + kColumns + " FROM deployments " +
                                        kWhereNamed + "ORDER BY name"));
  s.Bind(1, name);
  return CollectRows<DeploymentRecord>(s, RowToRecord);
}

Result<std::vector<DeploymentRecord>> DeploymentStore::UsingModel(const std::string& model,
                                                                  int64_t version) {
  const std::string exact = model + "/" + std::to_string(version);
  // With a version: exact matches of the four places a version is named;
  // without: any reference to the model — its bare name, NAME/N or
  // NAME@ALIAS (never another model whose name only starts with it).
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(std::string("SELECT ") + kColumns +
                                        " FROM deployments WHERE "
                                        "(?1 = 0 AND (json_extract(spec, '$.model') = ?2 OR "
                                        "substr(json_extract(spec, '$.model'), 1, length(?2) + 1) "
                                        "IN (?2 || '/', ?2 || '@'))) OR "
                                        "(?1 != 0 AND (version = ?3 OR "
                                        "json_extract(spec, '$.model') = ?3 OR "
                                        "json_extract(plan, '$.stable_version') = ?3 OR "
                                        "(json_type(plan, '$.stable_version') IS NOT NULL AND "
                                        "json_extract(plan, '$.rolling_to') = ?3))) "
                                        "ORDER BY name"));
  s.Bind(1, version).Bind(2, model).Bind(3, exact);
  return CollectRows<DeploymentRecord>(s, RowToRecord);
}

Status DeploymentStore::Update(const DeploymentRecord& d) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("UPDATE deployments SET spec=?, version=?, plan=?, "
                                        "health=?, reason=?, removing=?, updated_at=? "
                                        "WHERE name=?"));
  s.Bind(1, d.spec.dump()).Bind(2, d.version).Bind(3, d.plan.dump()).Bind(4, d.health);
  s.Bind(5, d.reason).Bind(6, int64_t{d.removing}).Bind(7, d.updated_at_ms).Bind(8, d.name);
  RETURN_IF_ERROR(s.Run());
  ASSIGN_OR_RETURN(Stmt c, db_->Prepare("SELECT changes()"));
  ASSIGN_OR_RETURN(bool row, c.Step());
  if (!row || c.Int(0) == 0) {
    return Status::Msg(Code::kNotFound, "deploy.not_found", {{"name", d.name}});
  }
  return Status::OK();
}

Status DeploymentStore::Delete(const std::string& name) {
  return db_->Transaction([&]() -> Status {
    ASSIGN_OR_RETURN(Stmt ev, db_->Prepare("DELETE FROM deployment_events WHERE deployment=?"));
    ev.Bind(1, name);
    RETURN_IF_ERROR(ev.Run());
    ASSIGN_OR_RETURN(Stmt d, db_->Prepare("DELETE FROM deployments WHERE name=?"));
    d.Bind(1, name);
    return d.Run();
  });
}

Status DeploymentStore::AddEvent(const DeploymentEvent& e, int64_t keep) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("INSERT INTO deployment_events (deployment, ts, level, "
                                        "msg_id, args, message) VALUES (?,?,?,?,?,?)"));
  s.Bind(1, e.deployment).Bind(2, e.ts_ms).Bind(3, e.level).Bind(4, e.msg_id);
  s.Bind(5, e.args.dump()).Bind(6, e.message);
  RETURN_IF_ERROR(s.Run());
  if (keep <= 0) return Status::OK();
  ASSIGN_OR_RETURN(Stmt prune, db_->Prepare("DELETE FROM deployment_events WHERE deployment=? AND "
                                            "id <= (SELECT id FROM deployment_events WHERE "
                                            "deployment=? ORDER BY id DESC LIMIT 1 OFFSET ?)"));
  prune.Bind(1, e.deployment).Bind(2, e.deployment).Bind(3, keep);
  return prune.Run();
}

Result<std::vector<DeploymentEvent>> DeploymentStore::Events(const std::string& name,
                                                             int64_t after_id, int64_t limit) {
  // The newest `limit` after `after_id`, given oldest first.
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT * FROM (SELECT id, deployment, ts, level, msg_id, "
                                        "args, message FROM deployment_events WHERE "
                                        "deployment=? AND id>? ORDER BY id DESC LIMIT ?) "
                                        "ORDER BY id"));
  s.Bind(1, name).Bind(2, after_id).Bind(3, limit);
  return CollectRows<DeploymentEvent>(s, RowToEvent);
}

}  // namespace lathe::state
