// Runs a command with a hard timeout and collects its output. The doctor's
// probes (doctor/probes.h) use it for `python3 -c 'import torch…'` (seconds), `nvcc --version`
// and `getent ahosts` (which can hang for many seconds without a network).
//
// The child runs in its own process group with stdin on /dev/null; at the
// deadline the whole group gets SIGKILL, so a hung grandchild cannot keep
// the doctor waiting. Output beyond kMaxCommandOutputBytes is dropped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lathe/common/status.h"

namespace lathe::os {

struct CommandOutput {
  int exit_code = 0;  // the exit status; 128+N when killed by signal N
  std::string out;    // stdout
  std::string err;    // stderr
};

inline constexpr size_t kMaxCommandOutputBytes = 1 << 20;

// NotFound when argv[0] cannot be executed; DeadlineExceeded when the
// command ran past `timeout_ms` (it has been killed and reaped); otherwise
// the exit status and output. Thread-safe.
Result<CommandOutput> RunCommand(const std::vector<std::string>& argv, int64_t timeout_ms);

}  // namespace lathe::os
