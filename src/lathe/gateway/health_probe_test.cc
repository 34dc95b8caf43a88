#include "lathe/gateway/health_probe.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>

namespace lathe::gateway {
namespace {

// A replica that answers one connection with `answer`, sent in one write
// (as uvicorn and a kept-alive Python server do), then closes.
class OneAnswer {
 public:
  explicit OneAnswer(std::string answer) : answer_(std::move(answer)) {
    path_ = ::testing::TempDir() + "lathe-probe-" + std::to_string(::getpid()) + ".sock";
    ::unlink(path_.c_str());
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path_.c_str(), sizeof a.sun_path - 1);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd_, 4), 0);
    thread_ = std::thread([this] {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[4096];
      std::string req;
      while (req.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
      }
      (void)::send(c, answer_.data(), answer_.size(), MSG_NOSIGNAL);
      ::shutdown(c, SHUT_WR);
      while (::recv(c, buf, sizeof buf, 0) > 0) {
      }
      ::close(c);
    });
  }
  ~OneAnswer() {
    thread_.join();
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string answer_;
  std::string path_;
  int fd_ = -1;
  std::thread thread_;
};

std::string Answer(int code, size_t body_bytes) {
  std::string body(body_bytes, 'x');
  return "HTTP/1.1 " + std::to_string(code) +
         " OK\r\nServer: BaseHTTP/0.6 Python/3.11.2\r\nContent-Type: application/json\r\n"
         "Content-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// The status line and the whole answer arrive together, more bytes than the
// probe keeps for a status line: still a good answer, not "not HTTP".
TEST(HealthProbe, AnswerLargerThanItsStatusLineInOneWrite) {
  OneAnswer replica(Answer(200, 2000));
  auto code = ProbeHealth(replica.path(), ::getuid(), "/health", 5000);
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 200);
}

TEST(HealthProbe, StatusOtherThan200IsReturned) {
  OneAnswer replica(Answer(503, 10));
  auto code = ProbeHealth(replica.path(), ::getuid(), "/health", 5000);
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 503);
}

TEST(HealthProbe, BytesThatAreNotHttpAreABadAnswer) {
  OneAnswer replica(std::string(1000, 'z') + "\r\n");
  auto code = ProbeHealth(replica.path(), ::getuid(), "/health", 5000);
  ASSERT_FALSE(code.ok());
  EXPECT_EQ(code.status().msg_id(), "gateway.probe_bad_answer");
}

TEST(HealthProbe, ListenerOfAnotherUserIsRefused) {
  OneAnswer replica(Answer(200, 10));
  auto code = ProbeHealth(replica.path(), ::getuid() + 1, "/health", 5000);
  ASSERT_FALSE(code.ok());
  EXPECT_EQ(code.status().msg_id(), "proxy.wrong_owner");
}

TEST(FetchFromReplica, WholeBodyOfOneWrite) {
  OneAnswer replica(Answer(200, 3000));
  auto a = FetchFromReplica(replica.path(), ::getuid(), "/metrics", 5000, 64 * 1024);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->status, 200);
  EXPECT_EQ(a->body.size(), 3000u);
}

}  // namespace
}  // namespace lathe::gateway
