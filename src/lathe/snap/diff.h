// What changed between two snapshots, file by file.
#pragma once

#include <string>
#include <vector>

#include "lathe/snap/manifest.h"

namespace lathe::snap {

struct DiffEntry {
  enum class Kind { kAdded, kRemoved, kModified };
  Kind kind;
  std::string path;
  uint64_t new_bytes = 0;  // bytes of chunks in `b`'s version that `a` does not hold
};

// Entries sorted by path. A file is modified when its type, size, mode,
// symlink target or chunks differ (an mtime alone does not count).
std::vector<DiffEntry> DiffManifests(const Manifest& a, const Manifest& b);

}  // namespace lathe::snap
