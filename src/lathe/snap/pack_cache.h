// Open pack files by name, shared by reader threads. Thread-safe; the file
// descriptors stay open (and valid for pread) until the cache is destroyed.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "lathe/common/status.h"
#include "lathe/snap/file_io.h"
#include "lathe/snap/layout.h"

namespace lathe::snap {

class PackCache {
 public:
  explicit PackCache(const StoreLayout& l) : layout_(l) {}
  // The descriptor of pack `name`; NotFound when the pack is missing.
  Result<int> Get(const std::string& name);

 private:
  const StoreLayout& layout_;
  std::mutex mu_;
  std::map<std::string, Fd> open_;  // guarded by mu_
};

}  // namespace lathe::snap
