#include "lathe/snap/pack_cache.h"

#include <fcntl.h>

namespace lathe::snap {

Result<int> PackCache::Get(const std::string& name) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = open_.find(name);
  if (it != open_.end()) return it->second.get();
  ASSIGN_OR_RETURN(Fd fd, Fd::Open(layout_.pack(name), O_RDONLY));
  int raw = fd.get();
  open_.emplace(name, std::move(fd));
  return raw;
}

}  // namespace lathe::snap
