// routes.json: what the daemon tells the deployments' front (docs/gateway.md).
// The daemon writes the file atomically (a temporary file renamed over it);
// the front reads it, checks every field and either takes the whole file or
// keeps the routes it had. Unknown fields are ignored, so that a newer daemon
// may add some.
//
// {"version": 1, "generation": 12,
//  "deployments": [{"name": "alice/digits", "ref": "alice/digits", "uid": 1001, "public": false,
//    "keys": [{"id": "k0123456789", "sha256": "<hex>", "expires_ms": 0}],
//    "idempotent": true, "health_path": "/v2/health/ready", "replicas_wanted": 2,
//    "hold": false, "hold_ms": 30000, "max_held": 100,
//    "metrics_path": "/metrics",
//    "traffic": {"digits/3": 100},
//    "replicas": [{"id": "r3k7q0m9x2a", "socket": "/abs/serve.sock", "uid": 1001,
//                  "version": "digits/3", "draining": false,
//                  "metadata_path": "/v2/models/digits"}]}]}
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"

namespace lathe::gateway {

inline constexpr int64_t kRoutesVersion = 1;

// A deployment key the front accepts: its public id and the SHA-256 of its
// secret (common/deploy_key_format.h), never the secret itself.
struct RouteKey {
  std::string id;          // "k" + 10 base32 characters
  std::string sha256;      // 64 lower-case hex characters
  int64_t expires_ms = 0;  // wall clock, ms since the epoch; 0: never
};

struct RouteReplica {
  std::string id;         // 1-64 printable characters, unique in its deployment
  std::string socket;     // absolute path of the unix socket it listens on (< 108 bytes)
  uid_t uid = 0;          // whose listener it must be (SO_PEERCRED)
  std::string version;    // the model version (or command revision) it serves; may be ""
  bool draining = false;  // no new requests; those in flight finish
  // Read once the replica is healthy: its KServe v2 model metadata (the
  // tensors it takes and gives, shown in /status). "": none to read.
  std::string metadata_path;
  bool operator==(const RouteReplica&) const = default;
};

struct Route {
  std::string name;            // NAME or OWNER/NAME (common/owned_name.h); unique across the file
  std::string ref;             // OWNER/NAME, how /d/ URLs name it ("": name)
  uid_t uid = 0;               // the deployment's owner
  bool is_public = false;      // JSON "public": no key needed
  std::vector<RouteKey> keys;  // the live keys (at most a few)
  bool idempotent = true;      // a request may be retried on another replica
  std::string health_path = "/v2/health/ready";  // probed with GET; 200 is healthy
  int64_t replicas_wanted = 0;                   // for the metrics: what the daemon aims at
  bool hold = false;        // no healthy replica: hold requests (scale from zero)
  int64_t hold_ms = 30000;  // how long one is held at most (0..3600000)
  int64_t max_held = 100;   // how many are held at once (0..100000)
  // Read with each probe: the replicas' own Prometheus text, for their queue
  // depth (lathe_serve_queue_length, lathe_serve_inflight_requests; see
  // replica_load.h). "": not read (a command deployment's program).
  std::string metrics_path;
  std::map<std::string, int64_t> traffic;  // version -> weight (0..1000000)
  std::vector<RouteReplica> replicas;
};

struct Routes {
  int64_t generation = 0;  // the daemon's counter, shown back in /status
  std::vector<Route> deployments;
  const Route* Find(std::string_view name) const;
};

// Parses and checks routes.json. InvalidArgument naming the field
// ("deployments[0].replicas[1].socket") and what it allows, catalog ids
// gateway.routes_*.
Result<Routes> ParseRoutes(std::string_view text);

}  // namespace lathe::gateway
