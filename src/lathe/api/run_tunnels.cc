#include "lathe/api/run_tunnels.h"

#include <algorithm>

namespace lathe::api {

void RunTunnels::Add(std::string run_id, daemon::Caller caller,
                     std::shared_ptr<net::TunnelControl> c) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(entries_, [](const Entry& e) { return !e.control->Open(); });
  entries_.push_back({std::move(run_id), std::move(caller), std::move(c)});
}

size_t RunTunnels::Recheck(
    const std::function<bool(const std::string&, const daemon::Caller&)>& allowed) {
  std::vector<Entry> check;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(entries_, [](const Entry& e) { return !e.control->Open(); });
    check = entries_;
  }
  // Outside the lock: `allowed` reads the daemon.
  size_t ended = 0;
  for (const Entry& e : check) {
    if (allowed(e.run_id, e.caller)) continue;
    e.control->End();
    ++ended;
  }
  return ended;
}

}  // namespace lathe::api
