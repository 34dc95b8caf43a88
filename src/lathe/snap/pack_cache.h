// Open pack files by name, shared by reader threads. Thread-safe; the file
// descriptors stay open (and valid for pread) until the cache is destroyed.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/os/fd.h"
#include "lathe/snap/layout.h"

namespace lathe::snap {

class PackCache {
 public:
  explicit PackCache(const StoreLayout& l) : layout_(l) {}
  // The descriptor of pack `name`; NotFound when the pack is missing. Its
  // header is checked once, when it is opened: a damaged one is logged and
  // listed in DamagedHeaders(), and the pack is still read (every chunk
  // verifies itself).
  Result<int> Get(const std::string& name);
  // Packs opened so far whose header is damaged, with what is wrong.
  std::vector<std::string> DamagedHeaders();

 private:
  const StoreLayout& layout_;
  std::mutex mu_;
  std::map<std::string, os::Fd> open_;  // guarded by mu_
  std::vector<std::string> damaged_;    // guarded by mu_
};

}  // namespace lathe::snap
