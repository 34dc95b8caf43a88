// Runs a command with a hard timeout and collects its output. The doctor's
// probes (doctor/probes.h) use it for `python3 -c 'import torch…'` (seconds), `nvcc --version`
// and `getent ahosts` (which can hang for many seconds without a network).
//
// The child runs in its own process group with stdin on /dev/null; at the
// deadline the whole group gets SIGKILL, so a hung grandchild cannot keep
// the doctor waiting. Output beyond kMaxCommandOutputBytes is dropped.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
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

// RunCommand with exactly `env` as the command's environment instead of this
// process's (a command run on a user's behalf gets nothing of the caller's).
// argv[0] is looked up in this process's PATH when it has no '/': give an
// absolute path to be sure which program runs. Thread-safe.
Result<CommandOutput> RunCommandWithEnv(const std::vector<std::string>& argv,
                                        const std::map<std::string, std::string>& env,
                                        int64_t timeout_ms);

// Runs a command whose output a person follows as it comes (a clone's
// progress in a run's log): its stdout and stderr go to `out_fd` as they
// arrive, a '\r' (a progress meter redrawing its line) written as a line
// end, and the last `tail_bytes` of its stderr are kept for the caller to
// explain a failure with. No timeout: the caller's process is supervised
// (the run's deadline ends it). The child stays in the caller's process
// group, stdin on /dev/null. NotFound when argv[0] cannot be executed.
// Not thread-safe with other fork users in the process (waits for its
// child by pid).
Result<CommandOutput> RunCommandStreaming(const std::vector<std::string>& argv, int out_fd,
                                          size_t tail_bytes);

// Runs a command whose output is followed line by line as it comes (an image
// build's log, streamed to the client that asked for it): stdout and stderr
// merged, a '\r' taken as a line end, each line given to `on_line` without
// its end. `env` is the command's whole environment; stdin is `stdin_fd`
// (-1: /dev/null; the child gets a copy, the caller keeps it). The child runs
// in its own process group; past `timeout_ms` the group is killed and the
// answer is DeadlineExceeded. The answer's `out` holds the last `tail_bytes`
// of the output, to explain a failure with. NotFound when argv[0] cannot be
// executed. Thread-safe.
Result<CommandOutput> RunCommandLines(const std::vector<std::string>& argv,
                                      const std::map<std::string, std::string>& env, int stdin_fd,
                                      int64_t timeout_ms, size_t tail_bytes,
                                      const std::function<void(std::string_view)>& on_line);

}  // namespace lathe::os
