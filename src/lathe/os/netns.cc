#include "lathe/os/netns.h"

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "lathe/os/process.h"

namespace lathe::os {

Status BringUpLoopback() {
  Fd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return ErrnoStatus("socket for the loopback interface", errno);
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(s.get(), SIOCGIFFLAGS, &ifr) != 0) return ErrnoStatus("SIOCGIFFLAGS lo", errno);
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
  if (::ioctl(s.get(), SIOCSIFFLAGS, &ifr) != 0) return ErrnoStatus("SIOCSIFFLAGS lo", errno);
  return Status::OK();
}

Status EnterNewNetworkNamespace() {
  if (::unshare(CLONE_NEWNET) != 0) return ErrnoStatus("unshare(CLONE_NEWNET)", errno);
  return BringUpLoopback();
}

Result<Fd> OpenNetworkNamespace(pid_t pid, uint64_t start_time) {
  const std::string path = fmt::format("/proc/{}/ns/net", pid);
  auto gone = [&] {
    return Status(Code::kNotFound, fmt::format("process {} (its network namespace) is gone", pid));
  };
  if (pid <= 0 || ProcessStartTime(pid) != start_time) return gone();
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno == ENOENT || errno == ESRCH ? gone() : ErrnoStatus(path, errno);
  // Checked again now that the namespace is held: if the pid had been reused
  // between the first check and open(2), the start time differs.
  if (ProcessStartTime(pid) != start_time) return gone();
  return fd;
}

Status RunInNetworkNamespace(int ns_fd, const std::function<void()>& fn) {
  int err = 0;
  try {
    std::thread t([&] {
      if (::setns(ns_fd, CLONE_NEWNET) != 0) {
        err = errno;
        return;
      }
      fn();
    });
    t.join();
  } catch (const std::system_error& e) {
    return Status(Code::kResourceExhausted, fmt::format("cannot start a thread: {}", e.what()));
  }
  if (err != 0) return ErrnoStatus("setns(CLONE_NEWNET)", err);
  return Status::OK();
}

}  // namespace lathe::os
