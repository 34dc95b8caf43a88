// The one exit-code table for every `lathe` command (documented in docs/cli.md).
#pragma once

#include "lathe/common/status.h"

namespace lathe {

enum ExitCode : int {
  kExitOk = 0,           // success
  kExitFailed = 1,       // the operation failed (the doctor: a check failed)
  kExitUsage = 2,        // usage error or invalid input
  kExitNotFound = 3,     // a named run, snapshot, model... does not exist
  kExitUnreachable = 4,  // the daemon (or another service) cannot be reached
};

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
