#include "lathe/os/foreground_child.h"

#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "lathe/os/fd.h"

namespace lathe::os {

Result<ExitStatus> RunForegroundChild(const std::vector<std::string>& argv,
                                      const std::function<void()>& after) {
  if (argv.empty()) return Status::InvalidArgument("no command to run");
  sigset_t held, before;
  sigemptyset(&held);
  for (int s : {SIGTERM, SIGINT, SIGCHLD}) sigaddset(&held, s);
  if (int err = ::pthread_sigmask(SIG_BLOCK, &held, &before); err != 0) {
    return ErrnoStatus("sigmask", err);
  }
  auto restore = [&] { ::pthread_sigmask(SIG_SETMASK, &before, nullptr); };
  Fd sig(::signalfd(-1, &held, SFD_CLOEXEC));
  if (!sig.valid()) {
    const int err = errno;
    restore();
    return ErrnoStatus("signalfd", err);
  }
  auto child = SpawnChild(argv);
  if (!child.ok()) {
    restore();
    return child.status();
  }
  const pid_t parent = ::getppid();
  std::optional<ExitStatus> done;
  // SIGCHLD is held from before the fork: an exit between TryReap and the
  // read below leaves it pending, and the read returns.
  while (!(done = TryReap(*child))) {
    signalfd_siginfo si;
    ssize_t n = ::read(sig.get(), &si, sizeof si);
    if (n != static_cast<ssize_t>(sizeof si)) continue;  // EINTR
    const bool from_parent = static_cast<pid_t>(si.ssi_pid) == parent;
    if ((si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) && !from_parent) {
      // Best effort: the child may have ended already.
      (void)SendSignal(*child, static_cast<int>(si.ssi_signo));
    }
  }
  if (after) after();
  restore();
  return *done;
}

void ExitLike(const ExitStatus& s) {
  if (s.exited) ::_exit(s.code);
  ::signal(s.signal, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, s.signal);
  ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  ::raise(s.signal);
  ::_exit(128 + s.signal);  // a signal whose default is not to end the process
}

}  // namespace lathe::os
