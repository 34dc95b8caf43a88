// The free-space reserve: the store must never take the disk a training job
// needs for its next checkpoint. Every write to the store first asks the
// guard; when the write would leave less than `reserve_bytes` free, the
// guard refuses and the snapshot is abandoned (and recorded as skipped).
#pragma once

#include <cstdint>
#include <string>

#include "lathe/common/status.h"

namespace lathe::snap {

// Not thread-safe: one per snapshot.
class SpaceGuard {
 public:
  // `dir` is on the filesystem to watch.
  SpaceGuard(std::string dir, uint64_t reserve_bytes)
      : dir_(std::move(dir)), reserve_(reserve_bytes) {}

  // OK when `bytes` more can be written without crossing the reserve;
  // otherwise ResourceExhausted: snap.disk_full when they would not fit at
  // all, snap.reserve when they would eat into the reserve. Asks the
  // filesystem at most every kRecheckBytes of writes, and counts in between.
  // `unwritten`: bytes claimed earlier that a background writer still holds
  // (the filesystem does not count them yet).
  Status Claim(uint64_t bytes, uint64_t unwritten = 0);

  uint64_t reserve_bytes() const { return reserve_; }

  static constexpr uint64_t kRecheckBytes = 4ull << 20;

 private:
  std::string dir_;
  uint64_t reserve_;
  uint64_t known_free_ = 0;   // free bytes at the last check, minus claims since
  uint64_t since_check_ = 0;  // bytes claimed since the last check
  bool checked_ = false;
};

// The default reserve for a store on a filesystem of `fs_bytes`: 1 GiB, but
// at most 10% of the filesystem (a small disk still gets snapshots).
uint64_t DefaultReserveBytes(uint64_t fs_bytes);

}  // namespace lathe::snap
