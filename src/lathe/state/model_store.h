// Durable records of the model registry, in the daemon's SQLite database
// (tables models, model_versions, model_aliases; schema v10 of
// state/schema.h).
//
// A model is a name (unique across users) with an owner and a public flag;
// its versions are numbered 1, 2, … in the order they were registered and
// a number is never given twice, even after its version was removed (the
// model keeps `next_version`), so NAME/3 always means one thing. A version
// is immutable: its snapshot, what serving needs and its lineage are written
// once. Its signature (inputs, outputs) may be unknown at first: it is then
// recorded once, as the first replica serving the version describes it
// (SetSignature), and never changed after. An alias names one version of its model and moves; a
// version an alias points at cannot be deleted (the foreign key refuses it).
//
// Not thread-safe: the daemon serialises calls under its own mutex. It holds
// its own connection to the database the daemon's RunStore uses.
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

struct ModelRecord {
  std::string name;
  uid_t uid = 0;     // the owner
  std::string user;  // the owner's name when the model was made
  bool is_public = false;
  int64_t next_version = 1;
  int64_t created_at_ms = 0;
};

struct ModelVersionRecord {
  std::string model;
  int64_t version = 0;       // assigned by AddVersion
  std::string snapshot;      // full id in the daemon's store
  std::string backend;       // "torchscript" | "process"
  std::string file;          // the primary file, relative to the snapshot's root ("" for none)
  std::string handler;       // process: the handler file, relative; "" otherwise
  std::string file_pattern;  // what --file asked for ("" when not given)
  // The tensors, as KServe v2 model metadata describes them: [{name,
  // datatype, shape}] ("ANY" and -1 where the model does not say); null
  // while unknown.
  Json inputs;
  Json outputs;
  // {run, run_name, attempt, step, snapshot, checkpoint_file, spec,
  //  workspace_commit, source_dir}: the fields that apply.
  Json lineage = Json::object();
  std::string note;
  std::string created_by;  // the user's name
  int64_t created_at_ms = 0;
};

struct ModelAlias {
  std::string alias;
  int64_t version = 0;
};

class ModelStore {
 public:
  // Opens the database (applying missing migrations, as RunStore does).
  static Result<std::unique_ptr<ModelStore>> Open(const std::string& db_path);

  // nullopt when there is no model of that name.
  Result<std::optional<ModelRecord>> GetModel(const std::string& name);
  // Every model, by name.
  Result<std::vector<ModelRecord>> ListModels();
  // The models called `name` whoever owns them: the key `name` (an older
  // bare one) or OWNER/`name` (common/owned_name.h), by key.
  Result<std::vector<ModelRecord>> ModelsNamed(const std::string& name);
  // Makes `model` public (or not).
  Status SetPublic(const std::string& model, bool is_public);

  // Registers `v` as the next version of `owner.name`, creating the model
  // (with `owner`'s uid, user and public flag) when it does not exist; an
  // existing model keeps its owner. Sets v.version. One transaction.
  Status AddVersion(const ModelRecord& owner, ModelVersionRecord& v);
  // The number AddVersion would give `model` now (1 for a new one).
  Result<int64_t> NextVersion(const std::string& model);
  Result<std::optional<ModelVersionRecord>> GetVersion(const std::string& model, int64_t version);
  // Ascending by version.
  Result<std::vector<ModelVersionRecord>> ListVersions(const std::string& model);
  // Deletes one version; false when there was none. FailedPrecondition
  // (model.version_aliased) while an alias points at it.
  Result<bool> DeleteVersion(const std::string& model, int64_t version);
  // Records the signature of a version whose inputs and outputs are both
  // still null; false (nothing written) when they were known already or
  // there is no such version.
  Result<bool> SetSignature(const std::string& model, int64_t version, const Json& inputs,
                            const Json& outputs);
  // The versions, of any model, that use `snapshot`.
  Result<std::vector<ModelVersionRecord>> VersionsOfSnapshot(const std::string& snapshot);

  // Points `alias` of `model` at `version` (which must exist: NotFound
  // model.version_not_found otherwise). The version it pointed at before, if any.
  Result<std::optional<int64_t>> SetAlias(const std::string& model, const std::string& alias,
                                          int64_t version);
  // false when there was no such alias.
  Result<bool> DeleteAlias(const std::string& model, const std::string& alias);
  // By alias name.
  Result<std::vector<ModelAlias>> Aliases(const std::string& model);

 private:
  explicit ModelStore(std::unique_ptr<Db> db) : db_(std::move(db)) {}
  Result<int64_t> Changes();

  std::unique_ptr<Db> db_;
};

}  // namespace lathe::state
