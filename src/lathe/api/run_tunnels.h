// The websockets proxied to runs' ports (a notebook's kernel channels) that
// a user other than the run's owner opened through a share or a project:
// when what may reach a run changes (a share taken back, a member removed),
// Recheck ends those whose user may no longer open the run (docs/sharing.md).
//
// Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lathe/daemon/runs.h"
#include "lathe/net/http.h"

namespace lathe::api {

class RunTunnels {
 public:
  void Add(std::string run_id, daemon::Caller caller, std::shared_ptr<net::TunnelControl> c);
  // Ends every open tunnel for which `allowed(run_id, caller)` is false and
  // forgets those that are over. Returns how many it ended.
  size_t Recheck(const std::function<bool(const std::string&, const daemon::Caller&)>& allowed);

 private:
  struct Entry {
    std::string run_id;
    daemon::Caller caller;
    std::shared_ptr<net::TunnelControl> control;
  };
  std::mutex mu_;
  std::vector<Entry> entries_;
};

}  // namespace lathe::api
