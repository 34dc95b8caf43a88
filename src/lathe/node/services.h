// What the REST API (api/) is handed: the node's services, each typed,
// owned by the Node (node.h) that outlives the API server. The API calls
// each directly; none reaches another through it.
#pragma once

#include "lathe/daemon/daemon.h"
#include "lathe/deploy/deployments.h"
#include "lathe/deploy/registry.h"

namespace lathe::node {

struct Services {
  daemon::Daemon& runs;              // the run supervisor: runs, snapshots, quotas, ...
  deploy::Registry& models;          // the model registry
  deploy::Deployments& deployments;  // the deployment manager and its front
};

}  // namespace lathe::node
