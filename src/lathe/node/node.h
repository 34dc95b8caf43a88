// The composition root of a Lathe node: builds and owns the run supervisor
// (daemon::Daemon), the model registry and the deployment manager
// (deploy/), in dependency order, and starts and stops them in that order
// and its reverse. The API server (api/) gets its Services; nothing else
// holds more than one of them.
//
// Thread-safe as its parts are; Start and Stop are called by one thread.
#pragma once

#include <memory>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/daemon/daemon.h"
#include "lathe/deploy/deployments.h"
#include "lathe/deploy/registry.h"
#include "lathe/exec/slurm/slurm_options.h"
#include "lathe/node/services.h"
#include "lathe/os/clock.h"

namespace lathe::node {

struct NodeOptions {
  daemon::DaemonOptions daemon;
  // The deployments' front and loop (config.yaml `deployments:`).
  deploy::DeploymentOptions deployments;
  // The Slurm pools (config.yaml `pools:`): the node makes one backend per
  // pool and hands them to the supervisor (DaemonOptions::pools) by name.
  std::vector<exec::SlurmPoolOptions> slurm_pools;
};

class Node {
 public:
  // Opens the home and recovers the runs (daemon::Daemon::Create); starts
  // no thread. `clock` must outlive the node.
  static Result<std::unique_ptr<Node>> Create(NodeOptions options, os::Clock& clock);
  ~Node();  // Stop()

  // The supervisor's loop, then the deployments' loop.
  Status Start();
  // The deployments' loop, then the supervisor's; runs keep running.
  void Stop();

  Services& services() { return services_; }
  daemon::Daemon& daemon() { return *daemon_; }

 private:
  Node(std::vector<std::unique_ptr<exec::ExecutionBackend>> pools,
       std::unique_ptr<daemon::Daemon> d, const deploy::DeploymentOptions& deployments,
       os::Clock& clock);

  // Before the supervisor: its runs' attempts are theirs, so they go last.
  std::vector<std::unique_ptr<exec::ExecutionBackend>> pools_;
  std::unique_ptr<daemon::Daemon> daemon_;
  std::unique_ptr<deploy::Registry> registry_;
  std::unique_ptr<deploy::Deployments> deployments_;
  Services services_;
};

}  // namespace lathe::node
