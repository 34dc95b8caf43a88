#include "lathe/node/node.h"

#include <utility>

#include "lathe/exec/slurm/slurm_backend.h"
#include "lathe/exec/slurm/slurm_commands.h"
#include "lathe/node/slurm_rest_http.h"

namespace lathe::node {

Result<std::unique_ptr<Node>> Node::Create(NodeOptions options, os::Clock& clock) {
  std::vector<std::unique_ptr<exec::ExecutionBackend>> pools;
  for (exec::SlurmPoolOptions& p : options.slurm_pools) {
    const std::string name = p.name;
    std::unique_ptr<exec::SlurmRestTransport> rest;
    if (!p.rest.url.empty()) {
      ASSIGN_OR_RETURN(rest, MakeSlurmRestTransport(p.rest.url, p.command_timeout_ms));
    }
    auto commands = exec::MakeRealSlurmCommands(p.command_timeout_ms);
    ASSIGN_OR_RETURN(auto backend,
                     exec::SlurmBackend::Create(std::move(p), options.daemon.self_exe, clock,
                                                std::move(commands), std::move(rest)));
    options.daemon.pools[name] = backend.get();
    pools.push_back(std::move(backend));
  }
  ASSIGN_OR_RETURN(auto d, daemon::Daemon::Create(std::move(options.daemon), clock));
  return std::unique_ptr<Node>(
      new Node(std::move(pools), std::move(d), options.deployments, clock));
}

Node::Node(std::vector<std::unique_ptr<exec::ExecutionBackend>> pools,
           std::unique_ptr<daemon::Daemon> d, const deploy::DeploymentOptions& deployments,
           os::Clock& clock)
    : pools_(std::move(pools)),
      daemon_(std::move(d)),
      registry_(std::make_unique<deploy::Registry>(*daemon_, daemon_->paths().db, clock)),
      deployments_(std::make_unique<deploy::Deployments>(*daemon_, *registry_, deployments, clock)),
      services_{*daemon_, *registry_, *deployments_} {}

Node::~Node() { Stop(); }

Status Node::Start() {
  RETURN_IF_ERROR(daemon_->Start());
  return deployments_->Start();
}

void Node::Stop() {
  deployments_->Stop();
  daemon_->Stop();
}

}  // namespace lathe::node
