// Free and total space of a filesystem (statvfs(2)).
#pragma once

#include <cstdint>
#include <string>

#include "lathe/common/status.h"

namespace lathe::os {

// Bytes an unprivileged writer may still use on the filesystem of `path`.
Result<uint64_t> AvailableBytes(const std::string& path);
// Total size of the filesystem of `path`.
Result<uint64_t> FilesystemBytes(const std::string& path);

}  // namespace lathe::os
