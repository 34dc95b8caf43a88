#include "lathe/exec/monitor_spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>

#include "lathe/os/clock.h"

extern char** environ;

namespace lathe::exec {

Result<SpawnResult> SpawnMonitor(const std::string& self_exe, const std::string& launch_path,
                                 const std::string& monitor_log, int handshake_timeout_ms) {
  int hs[2];
  if (::pipe2(hs, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  int logfd = ::open(monitor_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (logfd < 0 || devnull < 0) {
    int err = errno;
    ::close(hs[0]);
    ::close(hs[1]);
    if (logfd >= 0) ::close(logfd);
    return ErrnoStatus("open " + monitor_log, err);
  }
  // posix_spawn (vfork-style: no copy of the daemon's page tables) with the
  // child's set-up as spawn attributes: its own session (the daemon's
  // terminal and death do not reach it), stdin from /dev/null, stdout and
  // stderr to monitor.log, the handshake pipe as fd 3, nothing else open,
  // no signals blocked.
  std::string fd_arg = "3";
  const char* argv[] = {self_exe.c_str(), "__monitor", launch_path.c_str(), fd_arg.c_str(),
                        nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  ::posix_spawn_file_actions_init(&fa);
  ::posix_spawnattr_init(&attr);
  ::posix_spawn_file_actions_adddup2(&fa, devnull, 0);
  ::posix_spawn_file_actions_adddup2(&fa, logfd, 1);
  ::posix_spawn_file_actions_adddup2(&fa, logfd, 2);
  ::posix_spawn_file_actions_adddup2(&fa, hs[1], 3);  // clears close-on-exec, also when hs[1] == 3
  ::posix_spawn_file_actions_addclosefrom_np(&fa, 4);
  sigset_t none;
  sigemptyset(&none);
  ::posix_spawnattr_setsigmask(&attr, &none);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  int err =
      ::posix_spawn(&pid, self_exe.c_str(), &fa, &attr, const_cast<char* const*>(argv), environ);
  ::posix_spawn_file_actions_destroy(&fa);
  ::posix_spawnattr_destroy(&attr);
  if (err != 0) {
    ::close(hs[0]);
    ::close(hs[1]);
    ::close(logfd);
    ::close(devnull);
    return ErrnoStatus("spawn " + self_exe, err);
  }
  ::close(hs[1]);
  ::close(logfd);
  ::close(devnull);
  std::string answer;
  int64_t deadline = os::RealClock().MonotonicMs() + handshake_timeout_ms;
  while (answer.find('\n') == std::string::npos) {
    int left = static_cast<int>(deadline - os::RealClock().MonotonicMs());
    if (left <= 0) break;
    pollfd p = {hs[0], POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) continue;
    char buf[512];
    ssize_t n = ::read(hs[0], buf, sizeof buf);
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
  }
  ::close(hs[0]);
  SpawnResult r;
  r.monitor_pid = pid;
  if (answer.rfind("ok ", 0) == 0) {
    r.child_pid = std::atoi(answer.c_str() + 3);
    return r;
  }
  if (answer.rfind("err ", 0) == 0) {
    r.start_error = answer.substr(4, answer.find('\n') - 4);
    return r;
  }
  return Status::Internal("the run monitor did not answer (see " + monitor_log + ")");
}

}  // namespace lathe::exec
