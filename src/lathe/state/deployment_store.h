// Durable records of deployments, in the daemon's SQLite database (tables
// deployments and deployment_events; schema v11 of state/schema.h).
//
// A deployment is a name (unique across users) with an owner, the spec the
// user gave (what to serve and how many: daemon/deployment_spec.h), the
// model version it resolved to, the reconciler's memory (`plan`, JSON of
// deploy::State) and its health as last computed. Its replicas are runs of
// kind service (RunStore::OfDeployment), not rows here. Events are the
// deployment's own history: created, scaled, rolled out, rolled back, a
// replica replaced — each with its catalog id and arguments, so that it is
// shown in the reader's language.
//
// Not thread-safe: the deployments' manager serialises calls. It holds its
// own connection to the database the daemon's RunStore uses.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/state/db.h"

namespace lathe::state {

struct DeploymentRecord {
  std::string name;
  uid_t uid = 0;
  std::string user;
  Json spec = Json::object();  // daemon/deployment_spec.h DeploymentSpecToJson
  std::string version;         // the model version served: "digits/3" ("" before the first)
  Json plan = Json::object();  // the reconciler's state (deploy::State)
  std::string health;          // "healthy" | "progressing" | "degraded" | ...
  std::string reason;          // why, in English (for logs and the API)
  bool removing = false;       // being drained for removal
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
};

struct DeploymentEvent {
  int64_t id = 0;
  std::string deployment;
  int64_t ts_ms = 0;
  std::string level;   // "info" | "warning" | "error"
  std::string msg_id;  // catalog id ("" for a plain message)
  Json args = Json::object();
  std::string message;  // English
};

class DeploymentStore {
 public:
  static Result<std::unique_ptr<DeploymentStore>> Open(const std::string& db_path);

  // AlreadyExists (deploy.name_taken) when the name is in use.
  Status Insert(const DeploymentRecord& d);
  Result<std::optional<DeploymentRecord>> Get(const std::string& name);
  Result<std::vector<DeploymentRecord>> List();  // by name
  // The deployments called `name` whoever owns them: the key `name` (an
  // older bare one) or OWNER/`name` (common/owned_name.h), by key.
  Result<std::vector<DeploymentRecord>> Named(const std::string& name);
  // The deployments (by name) that serve or want version `version` of
  // `model` — as their current version, their model reference, the stable
  // version or the one rolled out to — or, with `version` 0, any version of
  // it: the registry's "who still uses this version".
  Result<std::vector<DeploymentRecord>> UsingModel(const std::string& model, int64_t version);
  // Writes every field but name, uid, user and created_at. NotFound
  // (deploy.not_found) when it is gone.
  Status Update(const DeploymentRecord& d);
  // Removes the deployment and its events.
  Status Delete(const std::string& name);

  // Adds `e`; with `keep` > 0, then removes the deployment's oldest events
  // beyond the newest `keep` (a deployment that fails for days keeps a
  // bounded history).
  Status AddEvent(const DeploymentEvent& e, int64_t keep = 0);
  // Oldest first, after id `after_id`, at most `limit` (the newest `limit`
  // when there are more).
  Result<std::vector<DeploymentEvent>> Events(const std::string& name, int64_t after_id,
                                              int64_t limit);

 private:
  explicit DeploymentStore(std::unique_ptr<Db> db) : db_(std::move(db)) {}
  std::unique_ptr<Db> db_;
};

}  // namespace lathe::state
