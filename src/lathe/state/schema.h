// lathe.db's schema: one SQL migration per version, for every store that
// keeps its tables there (runs and events, idempotency keys, secrets, GPU
// attempts, models, deployments, and the credentials: tokens, browser sessions
// and deployment keys).
// Db::Open applies the missing ones in a transaction each; a home made by an
// older Lathe moves forward in place, whichever store opens it first.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/state/db.h"

namespace lathe::state {

// Version N is the Nth entry. Exposed for the tests that build a home as an
// older Lathe left it (the first N entries).
const std::vector<std::string>& SchemaMigrations();

// A WHERE clause matching the rows whose `name` (a model's or a
// deployment's key: NAME, or OWNER/NAME since names are per owner,
// common/owned_name.h) has the name bound as ?1.
inline constexpr const char* kWhereNamed =
    "WHERE name = ?1 OR (length(name) > length(?1) AND "
    "substr(name, -length(?1) - 1) = '/' || ?1) ";

// Opens (creating or migrating) lathe.db at `db_path` with the whole schema.
Result<std::unique_ptr<Db>> OpenLatheDb(const std::string& db_path);

}  // namespace lathe::state
