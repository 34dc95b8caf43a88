// What each user's runs take of the daemon's disk: the bytes of their run
// directories (runs/<id>: logs, exit records, notebook files, telemetry the
// run wrote there), which root monitors write, so the filesystem's root
// reserve does not bound them. `lathe status` reports the caller's share
// (every user's to an admin) beside the home's free space, and a `disk`
// quota (quotas.h) refuses a new run of a user whose share reached it.
//
// Counted by a walk of the run directories (os::TreeDiskBytes) on a thread
// of its own, never under the daemon's mutex: at start, every
// kDiskSharesEveryMs, and soon after a run ended (Kick; at most one walk per
// kDiskSharesMinGapMs). Between two walks the figures are those of the last
// one, with the time it ended.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/os/clock.h"

namespace lathe::daemon {

inline constexpr int64_t kDiskSharesEveryMs = 60'000;
inline constexpr int64_t kDiskSharesMinGapMs = 2'000;

struct DiskShare {
  std::map<uid_t, uint64_t> bytes;  // per owner; a user without run directories is absent
  int64_t at_ms = 0;                // when the walk ended; 0: none yet

  uint64_t BytesOf(uid_t uid) const {
    auto it = bytes.find(uid);
    return it == bytes.end() ? 0 : it->second;
  }
};

// Thread-safe.
class DiskShares {
 public:
  // Every run's id and owner (the daemon reads them from its store).
  using OwnersFn = std::function<Result<std::vector<std::pair<std::string, uid_t>>>()>;

  DiskShares(std::string runs_dir, OwnersFn owners, os::Clock& clock);
  ~DiskShares();  // Stop()

  void Start();  // the thread; its first walk at once
  void Stop();   // idempotent
  void Kick();   // a run ended: walk again soon

  DiskShare Get() const;
  // One walk on the caller's thread (what the thread does each time).
  void CountNow();

 private:
  void Loop();

  const std::string runs_dir_;
  const OwnersFn owners_;
  os::Clock& clock_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  DiskShare last_;       // guarded by mu_
  bool kicked_ = false;  // guarded by mu_
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace lathe::daemon
