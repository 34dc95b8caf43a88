// The model registry (registry.cc, docs/deployments.md): models, their
// immutable versions — each a snapshot of the daemon's store, pinned there —
// and aliases. A caller creates, aliases and removes versions of their own
// models (admins: of any); every user may read (list, show, export) a public
// one. Refs: models.h.
//
// Built on the run supervisor's face (daemon::Runs: runs' checkpoints, the
// snapshot store, the path rules, restores as the caller) and the database's
// stores; the deployment manager uses it, it uses nothing of the manager's
// ("who deploys this version" is a query of the deployments' store).
//
// Thread-safe: calls are serialised on mu_ where they touch the model store;
// snapshots and restores run outside it.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/daemon/runs.h"
#include "lathe/daemon/sharing.h"
#include "lathe/deploy/models.h"
#include "lathe/os/clock.h"
#include "lathe/state/deployment_store.h"
#include "lathe/state/model_store.h"

namespace lathe::deploy {

class Registry {
 public:
  // `runs` must outlive the registry. The stores open `db_path` (lathe.db)
  // on first use.
  Registry(daemon::Runs& runs, std::string db_path, os::Clock& clock)
      : runs_(runs), db_path_(std::move(db_path)), clock_(clock) {}

  // The REST answers (docs/api.md, "Models").
  Result<Json> CreateVersion(const daemon::Caller& caller, const ModelVersionRequest& req);
  Result<Json> List(const daemon::Caller& caller);                         // {models: [...]}
  Result<Json> Get(const daemon::Caller& caller, const std::string& ref);  // NAME, NAME/N, NAME@A
  Result<Json> SetAlias(const daemon::Caller& caller, const std::string& model,
                        const std::string& alias, int64_t version);
  Result<Json> DeleteAlias(const daemon::Caller& caller, const std::string& model,
                           const std::string& alias);
  // FailedPrecondition (model.version_aliased) while an alias points at it,
  // (model.version_deployed) while a deployment serves or wants it.
  Result<Json> DeleteVersion(const daemon::Caller& caller, const std::string& model,
                             int64_t version);
  // Writes `to`/<model>/<N>/ (the snapshot) and `to`/<model>/config.yaml, a
  // `lathe serve --repository` layout; `to` as for a snapshot's restore.
  Result<Json> Export(const daemon::Caller& caller, const std::string& ref, const std::string& to,
                      bool force);

  // For the deployment manager: the version `ref` (NAME/N or NAME@ALIAS)
  // names, which `caller` may read. A bare NAME is InvalidArgument
  // (model.export_needs_version). With `qualified`, also `ref` as a
  // deployment keeps it: another owner's model named with its owner
  // ("alice/digits@prod"), so that a model of the same name made later never
  // takes its place; the caller's own as given.
  Result<state::ModelVersionRecord> ResolveVersion(const daemon::Caller& caller,
                                                   const std::string& ref,
                                                   std::string* qualified = nullptr);
  // Model `name` as sharing sees it, when `caller` may see it.
  Result<daemon::SharedObject> ObjectOf(const daemon::Caller& caller, const std::string& name);
  // The signature of version `ref` ("NAME/N") as a ready replica's KServe v2
  // metadata gives it ({name, datatype, shape} lists), recorded when the
  // version has none yet and the lists are not both empty. True when it was
  // recorded now.
  Result<bool> RecordSignature(const std::string& ref, const Json& inputs, const Json& outputs);

 private:
  // The snapshot a new version takes (made first for from_dir), then its
  // record and pin.
  Result<ModelSource> SourceOf(const daemon::Caller& caller, const ModelVersionRequest& req);
  Result<Json> Register(const daemon::Caller& caller, const ModelVersionRequest& req,
                        ModelSource& src);
  // mu_ held.
  Result<state::ModelStore*> ModelsDb();
  // The model `ref` names when `caller`'s role on it is at least `needed`
  // (daemon/sharing.h; a public model gives everyone role use).
  // `reach`: the caller's roles, read once per request.
  Result<std::pair<state::ModelRecord, std::optional<state::ModelVersionRecord>>> Resolve(
      const daemon::Caller& caller, const std::string& ref, daemon::Role needed,
      const Result<daemon::Reach>& reach);
  Result<std::pair<state::ModelRecord, std::optional<state::ModelVersionRecord>>> Resolve(
      const daemon::Caller& caller, const std::string& ref, daemon::Role needed) {
    return Resolve(caller, ref, needed, Reach(caller));
  }
  // The model NAME or OWNER/NAME names for `caller` (common/owned_name.h):
  // with an owner, that owner's; bare, the caller's own, else the only one
  // of that name the caller may see (FailedPrecondition model.ambiguous
  // naming the choices when several are). nullopt: none.
  Result<std::optional<state::ModelRecord>> FindModel(const daemon::Caller& caller,
                                                      const std::string& name,
                                                      const Result<daemon::Reach>& reach);
  // The key a new version of `name` goes under: the caller's model of that
  // name, or a new one in the caller's namespace. mu_ held.
  Result<std::string> KeyForNew(const daemon::Caller& caller, const std::string& name);
  Result<daemon::Reach> Reach(const daemon::Caller& caller);
  // "shared" {role, by} of a model `caller` does not own.
  Json SharedJson(const daemon::Caller& caller, const state::ModelRecord& m,
                  const Result<daemon::Reach>& reach);
  // "NAME (model/N)" of each deployment serving or wanting `model`/`version`.
  std::vector<std::string> DeployedBy(const std::string& model, int64_t version);

  daemon::Runs& runs_;
  const std::string db_path_;
  os::Clock& clock_;

  std::mutex mu_;
  std::unique_ptr<state::ModelStore> models_;  // guarded by mu_; opened on first use
  std::mutex deployments_mu_;
  std::unique_ptr<state::DeploymentStore> deployments_;  // guarded by deployments_mu_
};

}  // namespace lathe::deploy
