#include "lathe/snap/pack_cache.h"

#include <fcntl.h>

#include <spdlog/spdlog.h>

#include "lathe/snap/pack.h"

namespace lathe::snap {

Result<int> PackCache::Get(const std::string& name) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = open_.find(name);
  if (it != open_.end()) return it->second.get();
  ASSIGN_OR_RETURN(os::Fd fd, os::Fd::Open(layout_.pack(name), O_RDONLY));
  int raw = fd.get();
  if (Status h = CheckPackHeader(raw, name); !h.ok()) {
    std::string what = "pack " + name + ": " + h.message();
    spdlog::warn("{}; its chunks are verified one by one", what);
    damaged_.push_back(std::move(what));
  }
  open_.emplace(name, std::move(fd));
  return raw;
}

std::vector<std::string> PackCache::DamagedHeaders() {
  std::lock_guard<std::mutex> l(mu_);
  return damaged_;
}

}  // namespace lathe::snap
