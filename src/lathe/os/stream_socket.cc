#include "lathe/os/stream_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "lathe/os/files.h"

namespace lathe::os {
namespace {

// connect(2) with a timeout: non-blocking connect, poll, then back to blocking.
Status ConnectWithTimeout(int fd, const sockaddr* addr, socklen_t len, int timeout_ms,
                          const std::string& what) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return Status(Code::kIoError, fmt::format("connect {}: {}", what, std::strerror(errno)));
  }
  int rc = ::connect(fd, addr, len);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    rc = ::poll(&p, 1, timeout_ms);
    if (rc == 0) return Status(Code::kUnavailable, fmt::format("connect {}: timed out", what));
    int err = 0;
    socklen_t elen = sizeof(err);
    if (rc < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) err = errno;
    if (err != 0) errno = err;
    rc = err == 0 ? 0 : -1;
  }
  if (rc != 0) {
    return Status(Code::kUnavailable, fmt::format("connect {}: {}", what, std::strerror(errno)));
  }
  if (::fcntl(fd, F_SETFL, flags) != 0) {
    return Status(Code::kIoError, fmt::format("connect {}: {}", what, std::strerror(errno)));
  }
  return Status::OK();
}

// "0100007F:22B8": /proc/net/tcp's form of an IPv4 address and port.
std::string ProcAddress(const sockaddr_in& a) {
  return fmt::format("{:08X}:{:04X}", a.sin_addr.s_addr, ntohs(a.sin_port));
}
// The same address as /proc/net/tcp6 writes it when an IPv6 listener
// (bound to "::") accepted it: ::ffff:a.b.c.d, four words in host order.
std::string ProcAddress6(const sockaddr_in& a) {
  return fmt::format("0000000000000000FFFF0000{:08X}:{:04X}", a.sin_addr.s_addr, ntohs(a.sin_port));
}

}  // namespace

Result<Fd> ConnectUnix(const std::string& path, int timeout_ms) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return Status(Code::kInvalidArgument, fmt::format("socket path too long: {}", path));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Status(Code::kIoError, fmt::format("socket: {}", std::strerror(errno)));
  RETURN_IF_ERROR(ConnectWithTimeout(fd.get(), reinterpret_cast<const sockaddr*>(&addr),
                                     sizeof(addr), timeout_ms, path));
  return fd;
}

Result<Fd> ConnectLoopback(int port, int timeout_ms) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Status(Code::kIoError, fmt::format("socket: {}", std::strerror(errno)));
  RETURN_IF_ERROR(ConnectWithTimeout(fd.get(), reinterpret_cast<const sockaddr*>(&addr),
                                     sizeof(addr), timeout_ms, fmt::format("127.0.0.1:{}", port)));
  return fd;
}

Result<uid_t> UnixPeerUid(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return Status(Code::kIoError, fmt::format("SO_PEERCRED: {}", std::strerror(errno)));
  }
  return cred.uid;
}

Result<uid_t> UidOfTcpRow(std::string_view text, std::string_view local, std::string_view remote) {
  std::istringstream in{std::string(text)};
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string sl, loc, rem, st, queues, timer, retr;
    uid_t uid = 0;
    if (!(row >> sl >> loc >> rem >> st >> queues >> timer >> retr >> uid)) continue;
    if (loc == local && rem == remote) return uid;
  }
  return Status(Code::kNotFound, fmt::format("no socket {} -> {} in /proc/net/tcp", local, remote));
}

Result<uid_t> LoopbackPeerUid(int fd) {
  sockaddr_in me{}, peer{};
  socklen_t a = sizeof(me), b = sizeof(peer);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&me), &a) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &b) != 0 || me.sin_family != AF_INET) {
    return Status(Code::kIoError, fmt::format("socket addresses: {}", std::strerror(errno)));
  }
  // The accepted socket is the row seen from the other end: its local
  // address is our peer's, its remote address ours.
  // thread-self, not /proc/net (the process's first thread): a thread that
  // entered a run's network namespace (netns.h) reads that namespace's table.
  ASSIGN_OR_RETURN(std::string v4, ReadFile("/proc/thread-self/net/tcp"));
  auto uid = UidOfTcpRow(v4, ProcAddress(peer), ProcAddress(me));
  if (uid.ok() || !uid.status().IsNotFound()) return uid;
  auto v6 = ReadFile("/proc/thread-self/net/tcp6");
  if (!v6.ok()) return uid;
  return UidOfTcpRow(*v6, ProcAddress6(peer), ProcAddress6(me));
}

Result<uid_t> LoopbackClientUid(int client_port, int server_port) {
  sockaddr_in client{}, server{};
  client.sin_addr.s_addr = server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  client.sin_port = htons(static_cast<uint16_t>(client_port));
  server.sin_port = htons(static_cast<uint16_t>(server_port));
  ASSIGN_OR_RETURN(std::string v4, ReadFile("/proc/net/tcp"));
  return UidOfTcpRow(v4, ProcAddress(client), ProcAddress(server));
}

Status SetSocketTimeouts(int fd, int timeout_ms) {
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0) {
    return Status(Code::kIoError, fmt::format("socket timeouts: {}", std::strerror(errno)));
  }
  return Status::OK();
}

bool WaitReadable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  int rc;
  do {
    rc = ::poll(&p, 1, timeout_ms);
  } while (rc < 0 && errno == EINTR);
  return rc > 0;
}

}  // namespace lathe::os
