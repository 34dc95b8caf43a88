#include "lathe/os/stream_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
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
#include "lathe/os/sock_diag.h"

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

// The owner of one TCP socket, asked of the kernel by its exact addresses
// (sock_diag, as `ss` does): one lookup, where /proc/net/tcp lists every
// socket of the namespace (thousands on a busy host, most in TIME_WAIT).
// The netlink socket belongs to the calling thread's network namespace.
// NotFound when no such socket; Unavailable when sock_diag cannot be used.
Result<uid_t> DiagUid(int family, const void* local, const void* remote, uint16_t local_port,
                      uint16_t remote_port) {
  inet_diag_req_v2 req{};
  req.sdiag_family = static_cast<uint8_t>(family);
  req.idiag_states = ~0u;
  req.id.idiag_sport = local_port;  // network order, as in sockaddr_in
  req.id.idiag_dport = remote_port;
  const size_t n = family == AF_INET ? 4 : 16;
  std::memcpy(req.id.idiag_src, local, n);
  std::memcpy(req.id.idiag_dst, remote, n);
  req.id.idiag_cookie[0] = req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  ASSIGN_OR_RETURN(Fd nl, SendTcpDiag(req, NLM_F_REQUEST));
  alignas(nlmsghdr) char buf[8192];
  if (!WaitReadable(nl.get(), 2000)) return Status::Unavailable("sock_diag: no answer");
  ssize_t got = ::recv(nl.get(), buf, sizeof(buf), 0);
  auto* h = reinterpret_cast<nlmsghdr*>(buf);
  if (got < static_cast<ssize_t>(sizeof(nlmsghdr)) || !NLMSG_OK(h, static_cast<size_t>(got))) {
    return Status::Unavailable("sock_diag: short answer");
  }
  if (h->nlmsg_type == NLMSG_ERROR) {
    int err = -reinterpret_cast<nlmsgerr*>(NLMSG_DATA(h))->error;
    if (err == ENOENT) return Status::NotFound("no such TCP socket");
    return Status::Unavailable(fmt::format("sock_diag: {}", std::strerror(err)));
  }
  if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg))) {
    return Status::Unavailable("sock_diag: unexpected answer");
  }
  return static_cast<uid_t>(reinterpret_cast<inet_diag_msg*>(NLMSG_DATA(h))->idiag_uid);
}

// DiagUid for an IPv4 pair, then as an IPv6 listener bound to "::" sees it
// (::ffff:a.b.c.d).
Result<uid_t> DiagUid4(const sockaddr_in& local, const sockaddr_in& remote) {
  auto uid = DiagUid(AF_INET, &local.sin_addr, &remote.sin_addr, local.sin_port, remote.sin_port);
  if (!uid.status().IsNotFound()) return uid;
  auto mapped = [](const sockaddr_in& a) {
    in6_addr m{};
    m.s6_addr[10] = m.s6_addr[11] = 0xff;
    std::memcpy(&m.s6_addr[12], &a.sin_addr, 4);
    return m;
  };
  in6_addr l = mapped(local), r = mapped(remote);
  return DiagUid(AF_INET6, &l, &r, local.sin_port, remote.sin_port);
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

namespace {

// sockaddr_in of an IPv4-mapped IPv6 address (::ffff:a.b.c.d).
sockaddr_in Unmapped(const sockaddr_in6& a) {
  sockaddr_in v4{};
  v4.sin_family = AF_INET;
  v4.sin_port = a.sin6_port;
  std::memcpy(&v4.sin_addr, &a.sin6_addr.s6_addr[12], 4);
  return v4;
}

// /proc/net/tcp6's form of an IPv6 address and port: four words in host order.
std::string ProcAddress6(const sockaddr_in6& a) {
  uint32_t w[4];
  std::memcpy(w, &a.sin6_addr, sizeof(w));
  return fmt::format("{:08X}{:08X}{:08X}{:08X}:{:04X}", w[0], w[1], w[2], w[3], ntohs(a.sin6_port));
}

// The owner of the socket at `peer` connected to `me` (IPv4).
Result<uid_t> PeerUid4(const sockaddr_in& me, const sockaddr_in& peer) {
  // The accepted socket is the row seen from the other end: its local
  // address is our peer's, its remote address ours.
  auto diag = DiagUid4(peer, me);
  if (diag.ok() || diag.status().IsNotFound()) return diag;
  // thread-self, not /proc/net (the process's first thread): a thread that
  // entered a run's network namespace (netns.h) reads that namespace's table.
  ASSIGN_OR_RETURN(std::string v4, ReadFile("/proc/thread-self/net/tcp"));
  auto uid = UidOfTcpRow(v4, ProcAddress(peer), ProcAddress(me));
  if (uid.ok() || !uid.status().IsNotFound()) return uid;
  auto v6 = ReadFile("/proc/thread-self/net/tcp6");
  if (!v6.ok()) return uid;
  return UidOfTcpRow(*v6, ProcAddress6(peer), ProcAddress6(me));
}

// The same for IPv6 (::1).
Result<uid_t> PeerUid6(const sockaddr_in6& me, const sockaddr_in6& peer) {
  auto diag = DiagUid(AF_INET6, &peer.sin6_addr, &me.sin6_addr, peer.sin6_port, me.sin6_port);
  if (diag.ok() || diag.status().IsNotFound()) return diag;
  ASSIGN_OR_RETURN(std::string v6, ReadFile("/proc/thread-self/net/tcp6"));
  return UidOfTcpRow(v6, ProcAddress6(peer), ProcAddress6(me));
}

}  // namespace

Result<uid_t> LoopbackPeerUid(int fd) {
  sockaddr_in6 me{}, peer{};  // large enough for either family
  socklen_t a = sizeof(me), b = sizeof(peer);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&me), &a) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &b) != 0 ||
      (me.sin6_family != AF_INET && me.sin6_family != AF_INET6)) {
    return Status(Code::kIoError, fmt::format("socket addresses: {}", std::strerror(errno)));
  }
  if (me.sin6_family == AF_INET) {
    sockaddr_in me4{}, peer4{};
    std::memcpy(&me4, &me, sizeof(me4));
    std::memcpy(&peer4, &peer, sizeof(peer4));
    return PeerUid4(me4, peer4);
  }
  // An IPv6 listener bound to "::" sees an IPv4 client as ::ffff:a.b.c.d.
  if (IN6_IS_ADDR_V4MAPPED(&me.sin6_addr) && IN6_IS_ADDR_V4MAPPED(&peer.sin6_addr)) {
    return PeerUid4(Unmapped(me), Unmapped(peer));
  }
  return PeerUid6(me, peer);
}

Result<std::vector<int>> PickFreeLoopbackPorts(size_t n) {
  std::vector<Fd> held;
  std::vector<int> ports;
  for (size_t i = 0; i < n; ++i) {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (!fd.valid() || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return Status(Code::kIoError, fmt::format("a free loopback port: {}", std::strerror(errno)));
    }
    ports.push_back(ntohs(a.sin_port));
    held.push_back(std::move(fd));
  }
  return ports;
}

Status SetSocketTimeouts(int fd, int timeout_ms) {
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0) {
    return Status(Code::kIoError, fmt::format("socket timeouts: {}", std::strerror(errno)));
  }
  return Status::OK();
}

Status SendAllWithin(int fd, std::string_view data, int timeout_ms) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      return Status(Code::kIoError, fmt::format("send: {}", std::strerror(errno)));
    }
    pollfd p{fd, POLLOUT, 0};
    int rc;
    do {
      rc = ::poll(&p, 1, timeout_ms);
    } while (rc < 0 && errno == EINTR);
    if (rc == 0) return Status(Code::kDeadlineExceeded, "send: timed out");
    if (rc < 0) return Status(Code::kIoError, fmt::format("send: poll: {}", std::strerror(errno)));
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
