#include "lathe/node/node.h"

#include <utility>

namespace lathe::node {

Result<std::unique_ptr<Node>> Node::Create(NodeOptions options, os::Clock& clock) {
  ASSIGN_OR_RETURN(auto d, daemon::Daemon::Create(std::move(options.daemon), clock));
  return std::unique_ptr<Node>(new Node(std::move(d), options.deployments, clock));
}

Node::Node(std::unique_ptr<daemon::Daemon> d, const deploy::DeploymentOptions& deployments,
           os::Clock& clock)
    : daemon_(std::move(d)),
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
