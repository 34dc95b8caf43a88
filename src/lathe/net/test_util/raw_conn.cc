#include "lathe/net/test_util/raw_conn.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "lathe/net/http.h"
#include "lathe/os/fd.h"

namespace lathe::net::testing {

bool RawResponse::HeadHas(std::string_view text) const {
  if (text.size() > head.size()) return false;
  for (size_t i = 0; i + text.size() <= head.size(); ++i) {
    if (EqualsIgnoreCase(std::string_view(head).substr(i, text.size()), text)) return true;
  }
  return false;
}

RawConn RawConn::Tcp(int port) { return TcpFrom("", port); }

RawConn RawConn::TcpFrom(const std::string& source, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (!source.empty()) {
    sockaddr_in src{};
    src.sin_family = AF_INET;
    if (::inet_pton(AF_INET, source.c_str(), &src.sin_addr) != 1 ||
        ::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof(src)) != 0) {
      ::close(fd);
      return RawConn(-1);
    }
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    fd = -1;
  }
  return RawConn(fd);
}

RawConn RawConn::Unix(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    fd = -1;
  }
  return RawConn(fd);
}

RawConn::RawConn(RawConn&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), buf_(std::move(other.buf_)) {}

RawConn::~RawConn() { Close(); }

void RawConn::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool RawConn::Send(std::string_view data) {
  return os::SendFull(fd_, data, "test connection").ok();
}

bool RawConn::Fill(int timeout_ms) {
  pollfd p{fd_, POLLIN, 0};
  int r = ::poll(&p, 1, timeout_ms);
  if (r <= 0) return false;
  char tmp[16384];
  ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
  if (n <= 0) return false;
  buf_.append(tmp, static_cast<size_t>(n));
  return true;
}

bool RawConn::ReadUntil(std::string_view delim, int timeout_ms, size_t* pos) {
  for (;;) {
    size_t p = buf_.find(delim);
    if (p != std::string::npos) {
      *pos = p;
      return true;
    }
    if (!Fill(timeout_ms)) return false;
  }
}

bool RawConn::ReadExactly(size_t n, int timeout_ms, std::string* out) {
  while (buf_.size() < n) {
    if (!Fill(timeout_ms)) return false;
  }
  out->append(buf_, 0, n);
  buf_.erase(0, n);
  return true;
}

bool RawConn::ReadChunked(int timeout_ms, std::string* out) {
  for (;;) {
    size_t eol = 0;
    if (!ReadUntil("\r\n", timeout_ms, &eol)) return false;
    size_t size = std::stoul(buf_.substr(0, eol), nullptr, 16);
    buf_.erase(0, eol + 2);
    std::string chunk;
    if (!ReadExactly(size + 2, timeout_ms, &chunk)) return false;
    if (size == 0) return true;
    out->append(chunk, 0, size);
  }
}

std::optional<RawResponse> RawConn::ReadResponse(int timeout_ms, bool keep_interim) {
  for (;;) {
    size_t end = 0;
    if (!ReadUntil("\r\n\r\n", timeout_ms, &end)) return std::nullopt;
    RawResponse res;
    res.head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    if (res.head.size() < 12) return std::nullopt;
    res.status = std::stoi(res.head.substr(9, 3));
    if (res.status < 200 && !keep_interim) continue;
    if (res.status < 200 || res.status == 204 || res.status == 304) return res;
    if (res.HeadHas("transfer-encoding: chunked")) {
      if (!ReadChunked(timeout_ms, &res.body)) return std::nullopt;
      return res;
    }
    size_t cl = res.head.find("ontent-Length: ");
    if (cl == std::string::npos) cl = res.head.find("ontent-length: ");
    if (cl != std::string::npos) {
      size_t n = std::stoul(res.head.substr(cl + 15));
      if (!ReadExactly(n, timeout_ms, &res.body)) return std::nullopt;
      return res;
    }
    while (Fill(timeout_ms)) {
    }
    res.body = std::move(buf_);
    buf_.clear();
    return res;
  }
}

std::optional<std::string> RawConn::Read(size_t n, int timeout_ms) {
  std::string out;
  if (!ReadExactly(n, timeout_ms, &out)) return std::nullopt;
  return out;
}

bool RawConn::ShutdownWrite() { return ::shutdown(fd_, SHUT_WR) == 0; }

bool RawConn::WaitClosed(int timeout_ms, std::string* data) {
  for (;;) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return false;
    char tmp[16384];
    ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      break;  // reset counts as closed
    }
    buf_.append(tmp, static_cast<size_t>(n));
  }
  if (data) data->append(buf_);
  buf_.clear();
  return true;
}

}  // namespace lathe::net::testing
