// RawConn: a blocking client socket for tests that need byte-level control
// (pipelining, stalled headers, oversized requests, watching a close).
// Test-only; not thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace lathe::net::testing {

struct RawResponse {
  int status = 0;
  std::string head;                           // status line and headers, without the blank line
  std::string body;                           // de-chunked
  bool HeadHas(std::string_view text) const;  // case-insensitive substring of head
};

class RawConn {
 public:
  static RawConn Tcp(int port);  // 127.0.0.1:port
  // 127.0.0.1:port from the local address `source` (e.g. "127.0.0.2").
  static RawConn TcpFrom(const std::string& source, int port);
  static RawConn Unix(const std::string& path);
  // Takes ownership of a connected socket (e.g. one end of a socketpair).
  static RawConn Adopt(int fd) { return RawConn(fd); }
  RawConn(RawConn&& other) noexcept;
  RawConn& operator=(RawConn&&) = delete;
  ~RawConn();

  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  bool Send(std::string_view data);
  // Reads one response (Content-Length, chunked, or until EOF), skipping 1xx
  // interim responses unless `keep_interim`. nullopt on timeout or a close before
  // a complete response.
  std::optional<RawResponse> ReadResponse(int timeout_ms = 20000, bool keep_interim = false);
  // True if the peer closes (EOF or reset) within `timeout_ms`; whatever arrived
  // before is appended to `data` when given.
  bool WaitClosed(int timeout_ms = 20000, std::string* data = nullptr);
  // Exactly `n` bytes (what a response left buffered first); nullopt on EOF or
  // timeout. May run on one thread while another calls Send.
  std::optional<std::string> Read(size_t n, int timeout_ms = 20000);
  // shutdown(SHUT_WR): the peer reads EOF.
  bool ShutdownWrite();
  void Close();

 private:
  explicit RawConn(int fd) : fd_(fd) {}
  // Reads more bytes into buf_; false on EOF, error or timeout.
  bool Fill(int timeout_ms);
  bool ReadUntil(std::string_view delim, int timeout_ms, size_t* pos);
  bool ReadExactly(size_t n, int timeout_ms, std::string* out);
  bool ReadChunked(int timeout_ms, std::string* out);

  int fd_ = -1;
  std::string buf_;
};

}  // namespace lathe::net::testing
