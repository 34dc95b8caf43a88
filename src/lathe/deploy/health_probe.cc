#include "lathe/deploy/health_probe.h"

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "lathe/os/fd.h"
#include "lathe/os/stream_socket.h"

namespace lathe::deploy {
namespace {

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// "HTTP/1.1 200 OK\r\n" -> 200; -1 when `line` is not a status line.
int StatusOf(std::string_view line) {
  if (line.substr(0, 7) != "HTTP/1." || line.size() < 12 || line[8] != ' ') return -1;
  int code = 0;
  for (char c : line.substr(9, 3)) {
    if (c < '0' || c > '9') return -1;
    code = code * 10 + (c - '0');
  }
  return code;
}

}  // namespace

Result<int> ProbeHealth(const std::string& socket, uid_t owner, const std::string& path,
                        int timeout_ms) {
  const int64_t deadline = SteadyMs() + timeout_ms;
  auto fd = os::ConnectUnix(socket, timeout_ms);
  if (!fd.ok()) {
    return Status::Msg(Code::kUnavailable, "proxy.unreachable",
                       {{"where", socket}, {"reason", fd.status().message()}});
  }
  auto uid = os::UnixPeerUid(fd->get());
  if (!uid.ok() || *uid != owner) {
    return Status::Msg(Code::kPermissionDenied, "proxy.wrong_owner", {{"where", socket}});
  }
  (void)os::SetSocketTimeouts(fd->get(), timeout_ms);
  const std::string req = "GET " + path +
                          " HTTP/1.1\r\nHost: localhost\r\nUser-Agent: lathe-gateway\r\n"
                          "Connection: close\r\n\r\n";
  if (Status s = os::SendFull(fd->get(), req, "replica"); !s.ok()) {
    return Status::Msg(Code::kUnavailable, "proxy.upstream_failed", {{"reason", s.message()}});
  }
  std::string got;
  while (got.find("\r\n") == std::string::npos && got.size() < 256) {
    const int64_t left = deadline - SteadyMs();
    if (left <= 0 || !os::WaitReadable(fd->get(), static_cast<int>(left))) {
      return Status::Msg(Code::kDeadlineExceeded, "gateway.probe_timeout",
                         {{"path", path}, {"ms", std::to_string(timeout_ms)}});
    }
    char buf[256];
    ssize_t n = ::recv(fd->get(), buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      return Status::Msg(Code::kUnavailable, "proxy.upstream_failed",
                         {{"reason", n == 0 ? "closed before its answer" : std::strerror(errno)}});
    }
    got.append(buf, static_cast<size_t>(n));
  }
  const int code = StatusOf(got.substr(0, got.find("\r\n")));
  if (code < 0) {
    return Status::Msg(Code::kUnavailable, "gateway.probe_bad_answer", {{"path", path}});
  }
  return code;
}

}  // namespace lathe::deploy
