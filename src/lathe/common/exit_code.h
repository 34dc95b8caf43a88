// The one exit-code table for every `lathe` command (documented in docs/cli.md).
#pragma once

#include "lathe/common/status.h"

namespace lathe {

// Process exit statuses: plain ints, as main() returns them.
inline constexpr int kExitOk = 0;           // success
inline constexpr int kExitFailed = 1;       // the operation failed (the doctor: a check failed)
inline constexpr int kExitUsage = 2;        // usage error or invalid input
inline constexpr int kExitNotFound = 3;     // a named run, snapshot, model... does not exist
inline constexpr int kExitUnreachable = 4;  // the daemon (or another service) cannot be reached

inline int ExitCodeFor(const Status& s) {
  switch (s.code()) {
    case Code::kOk:
      return kExitOk;
    case Code::kInvalidArgument:
      return kExitUsage;
    case Code::kNotFound:
      return kExitNotFound;
    case Code::kUnavailable:
      return kExitUnreachable;
    default:
      return kExitFailed;
  }
}

}  // namespace lathe
