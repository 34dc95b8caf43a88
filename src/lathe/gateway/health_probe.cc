#include "lathe/gateway/health_probe.h"

#include <sys/socket.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string_view>

#include "lathe/os/fd.h"
#include "lathe/os/stream_socket.h"

namespace lathe::gateway {
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

// Connects, checks the listener's owner and sends GET `path` (Connection: close).
Result<os::Fd> SendGet(const std::string& socket, uid_t owner, const std::string& path,
                       int timeout_ms) {
  auto fd = os::ConnectUnix(socket, timeout_ms);
  if (!fd.ok()) {
    return Status::Msg(Code::kUnavailable, "proxy.unreachable",
                       {{"where", socket}, {"reason", fd.status().message()}});
  }
  auto uid = os::UnixPeerUid(fd->get());
  if (!uid.ok() || *uid != owner) {
    return Status::Msg(Code::kPermissionDenied, "proxy.wrong_owner", {{"where", socket}});
  }
  // Best effort: without a timeout the socket still works; a stuck peer only takes longer.
  (void)os::SetSocketTimeouts(fd->get(), timeout_ms);
  const std::string req = "GET " + path +
                          " HTTP/1.1\r\nHost: localhost\r\nUser-Agent: lathe-gateway\r\n"
                          "Connection: close\r\n\r\n";
  if (Status s = os::SendFull(fd->get(), req, "replica"); !s.ok()) {
    return Status::Msg(Code::kUnavailable, "proxy.upstream_failed", {{"reason", s.message()}});
  }
  return std::move(*fd);
}

// Reads into `got` until `enough` holds, the peer closes (true) or the
// deadline passes. Errors as ProbeHealth's.
template <typename Enough>
Status ReadUntil(int fd, std::string& got, int64_t deadline, const std::string& path,
                 int timeout_ms, size_t max_bytes, Enough enough) {
  while (!enough()) {
    const int64_t left = deadline - SteadyMs();
    if (left <= 0 || !os::WaitReadable(fd, static_cast<int>(left))) {
      return Status::Msg(Code::kDeadlineExceeded, "gateway.probe_timeout",
                         {{"path", path}, {"ms", std::to_string(timeout_ms)}});
    }
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n == 0) return Status::OK();
    if (n < 0) {
      return Status::Msg(Code::kUnavailable, "proxy.upstream_failed",
                         {{"reason", std::strerror(errno)}});
    }
    got.append(buf, static_cast<size_t>(n));
    // `max_bytes` bounds what is read while waiting: one read that brings
    // what was waited for and more (a whole answer in one write, as a
    // kept-alive server sends it) is a good answer, not an oversized one.
    if (got.size() > max_bytes && !enough()) {
      return Status::Msg(Code::kUnavailable, "gateway.probe_bad_answer", {{"path", path}});
    }
  }
  return Status::OK();
}

bool IsChunked(std::string_view head) {
  std::string lower(head);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.find("\r\ntransfer-encoding: chunked") != std::string::npos;
}

// A chunked body without its framing; nullopt when it is not well formed.
std::optional<std::string> Dechunk(std::string_view in) {
  std::string out;
  for (;;) {
    const size_t eol = in.find("\r\n");
    if (eol == std::string_view::npos) return std::nullopt;
    size_t len = 0;
    const std::string size(in.substr(0, in.find_first_of(";\r")));
    if (size.empty() || size.size() > 15 ||
        size.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
      return std::nullopt;
    }
    len = std::stoul(size, nullptr, 16);
    in.remove_prefix(eol + 2);
    if (len == 0) return out;
    if (in.size() < len + 2) return std::nullopt;
    out.append(in.substr(0, len));
    in.remove_prefix(len + 2);
  }
}

}  // namespace

Result<int> ProbeHealth(const std::string& socket, uid_t owner, const std::string& path,
                        int timeout_ms) {
  const int64_t deadline = SteadyMs() + timeout_ms;
  ASSIGN_OR_RETURN(os::Fd fd, SendGet(socket, owner, path, timeout_ms));
  std::string got;
  RETURN_IF_ERROR(ReadUntil(fd.get(), got, deadline, path, timeout_ms, 256,
                            [&] { return got.find("\r\n") != std::string::npos; }));
  if (got.empty()) {
    return Status::Msg(Code::kUnavailable, "proxy.upstream_failed",
                       {{"reason", "closed before its answer"}});
  }
  const int code = StatusOf(got.substr(0, got.find("\r\n")));
  if (code < 0) {
    return Status::Msg(Code::kUnavailable, "gateway.probe_bad_answer", {{"path", path}});
  }
  return code;
}

Result<ReplicaAnswer> FetchFromReplica(const std::string& socket, uid_t owner,
                                       const std::string& path, int timeout_ms, size_t max_bytes) {
  const int64_t deadline = SteadyMs() + timeout_ms;
  ASSIGN_OR_RETURN(os::Fd fd, SendGet(socket, owner, path, timeout_ms));
  std::string got;
  const size_t limit = max_bytes + 64 * 1024;  // the head too
  RETURN_IF_ERROR(
      ReadUntil(fd.get(), got, deadline, path, timeout_ms, limit, [] { return false; }));
  const size_t head_end = got.find("\r\n\r\n");
  const int code = StatusOf(std::string_view(got).substr(0, got.find("\r\n")));
  if (code < 0 || head_end == std::string::npos) {
    return Status::Msg(Code::kUnavailable, "gateway.probe_bad_answer", {{"path", path}});
  }
  ReplicaAnswer a;
  a.status = code;
  std::string_view body = std::string_view(got).substr(head_end + 4);
  if (IsChunked(std::string_view(got).substr(0, head_end + 2))) {
    auto plain = Dechunk(body);
    if (!plain)
      return Status::Msg(Code::kUnavailable, "gateway.probe_bad_answer", {{"path", path}});
    a.body = std::move(*plain);
  } else {
    a.body = std::string(body);
  }
  if (a.body.size() > max_bytes) {
    return Status::Msg(Code::kUnavailable, "gateway.probe_bad_answer", {{"path", path}});
  }
  return a;
}

}  // namespace lathe::gateway
