#include "lathe/gateway/relay.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

#include "lathe/os/fd.h"
#include "lathe/os/files.h"
#include "lathe/os/stream_socket.h"

namespace lathe::gateway {
namespace {

// A client here may write to a connection the relay has closed already (that
// is what some tests check): EPIPE, not a signal that ends the test binary.
const bool kNoSigpipe = [] {
  ::signal(SIGPIPE, SIG_IGN);
  return true;
}();

std::string TempDir() {
  char tmpl[] = "/tmp/lathe-relay-XXXXXX";
  return ::mkdtemp(tmpl);
}

// A loopback TCP server on a port of its own; each accepted connection is
// handed to `serve` on a thread of its own.
class TcpServer {
 public:
  explicit TcpServer(std::function<void(int)> serve) : serve_(std::move(serve)) {
    fd_ = os::Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    int one = 1;
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    EXPECT_EQ(::listen(fd_.get(), 16), 0);
    thread_ = std::thread([this] {
      while (true) {
        int c = ::accept(fd_.get(), nullptr, nullptr);
        if (c < 0) return;
        workers_.emplace_back([this, c] {
          serve_(c);
          ::close(c);
        });
      }
    });
  }
  ~TcpServer() {
    ::shutdown(fd_.get(), SHUT_RDWR);
    thread_.join();
    for (auto& w : workers_) w.join();
  }
  int port() const { return port_; }

 private:
  std::function<void(int)> serve_;
  os::Fd fd_;
  int port_ = 0;
  std::thread thread_;
  std::vector<std::thread> workers_;
};

void Echo(int fd) {
  char buf[8192];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) {
    if (!os::WriteFull(fd, buf, static_cast<size_t>(n), "echo").ok()) return;
  }
}

// The relay stepped on a thread of its own until destroyed.
class Running {
 public:
  explicit Running(RelayOptions o) {
    auto r = Relay::Listen(o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    relay_ = std::move(*r);
    wake_ = ::eventfd(0, EFD_CLOEXEC);
    thread_ = std::thread([this] {
      while (!relay_->Step(wake_, -1)) {
      }
    });
  }
  ~Running() {
    uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof one);
    thread_.join();
    ::close(wake_);
  }
  Relay& relay() { return *relay_; }

 private:
  std::unique_ptr<Relay> relay_;
  int wake_ = -1;
  std::thread thread_;
};

os::Fd Connect(const std::string& path) {
  auto fd = os::ConnectUnix(path, 5000);
  EXPECT_TRUE(fd.ok()) << fd.status().ToString();
  return fd.ok() ? std::move(*fd) : os::Fd();
}

// Everything until the other end closes (at most `limit` bytes).
std::string ReadAll(int fd, size_t limit = 64 << 20) {
  std::string out;
  char buf[65536];
  ssize_t n;
  while (out.size() < limit && (n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, n);
  return out;
}

TEST(Relay, CopiesBothWaysAndTheSocketIsOwnerAndGroupOnly) {
  TcpServer echo(Echo);
  const std::string dir = TempDir();
  Running r({dir + "/s.sock", echo.port()});
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/s.sock").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  os::Fd c = Connect(dir + "/s.sock");
  // More than the buffers and the socket queues hold, so that writes are
  // partial and the relay waits for POLLOUT on both sides.
  std::string big(4 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + i / 4096);
  std::thread writer([&] {
    EXPECT_TRUE(os::WriteFull(c.get(), big, "client").ok());
    ::shutdown(c.get(), SHUT_WR);
  });
  std::string back = ReadAll(c.get());
  writer.join();
  EXPECT_EQ(back.size(), big.size());
  EXPECT_TRUE(back == big) << "the bytes came back changed";
  (void)os::RemoveAll(dir);
}

// The client's end of file reaches the program as one (shutdown), and its
// answer after that still comes back, then the end.
TEST(Relay, AHalfCloseIsPassedOnAndTheAnswerStillComesBack) {
  TcpServer counter([](int fd) {
    std::string got = ReadAll(fd);
    std::string answer = "got " + std::to_string(got.size());
    (void)os::WriteFull(fd, answer, "answer");
  });
  const std::string dir = TempDir();
  Running r({dir + "/s.sock", counter.port()});
  os::Fd c = Connect(dir + "/s.sock");
  ASSERT_TRUE(os::WriteFull(c.get(), std::string("abcde"), "client").ok());
  ::shutdown(c.get(), SHUT_WR);
  EXPECT_EQ(ReadAll(c.get()), "got 5");
  (void)os::RemoveAll(dir);
}

// Before the program listens, a connection is closed at once (no bytes).
TEST(Relay, AConnectionBeforeTheProgramListensIsClosed) {
  int port = 0;
  {
    auto free = os::PickFreeLoopbackPorts(1);
    ASSERT_TRUE(free.ok());
    port = (*free)[0];
  }
  const std::string dir = TempDir();
  Running r({dir + "/s.sock", port});
  os::Fd c = Connect(dir + "/s.sock");
  (void)os::WriteFull(c.get(), std::string("GET / HTTP/1.1\r\n\r\n"), "client");
  EXPECT_EQ(ReadAll(c.get()), "");
  (void)os::RemoveAll(dir);
}

// Over max_connections, a new connection is closed while the others stay.
TEST(Relay, ConnectionsAreBounded) {
  std::atomic<bool> release{false};
  TcpServer holder([&](int fd) {
    char b;
    if (::read(fd, &b, 1) == 1) (void)os::WriteFull(fd, &b, 1, "held");
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  const std::string dir = TempDir();
  RelayOptions o{dir + "/s.sock", holder.port()};
  o.max_connections = 1;
  Running r(o);
  os::Fd first = Connect(dir + "/s.sock");
  ASSERT_TRUE(os::WriteFull(first.get(), std::string("x"), "first").ok());
  char b = 0;
  ASSERT_EQ(::read(first.get(), &b, 1), 1);  // the first is relayed (and counted) by now
  EXPECT_EQ(b, 'x');
  os::Fd second = Connect(dir + "/s.sock");
  EXPECT_EQ(ReadAll(second.get()), "") << "the second is closed";
  release = true;
  (void)os::RemoveAll(dir);
}

TEST(Relay, ABadPortOrALiveSocketIsRefused) {
  const std::string dir = TempDir();
  EXPECT_EQ(Relay::Listen({dir + "/s.sock", 0}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Relay::Listen({dir + "/s.sock", 70000}).status().code(), Code::kInvalidArgument);
  auto one = Relay::Listen({dir + "/s.sock", 8000});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_FALSE(Relay::Listen({dir + "/s.sock", 8000}).ok()) << "a live listener is kept";
  one->reset();
  EXPECT_FALSE(os::Exists(dir + "/s.sock")) << "the socket file goes with the relay";
  (void)os::RemoveAll(dir);
}

// The child's exit is the relay's; the child was told PORT.
TEST(Relay, RunRelayedEndsWithTheChildsExitAndTellsItThePort) {
  const std::string dir = TempDir();
  auto es =
      RunRelayed({dir + "/s.sock", 8123},
                 {"sh", "-c", "[ \"$PORT\" = 8123 ] && [ \"$LATHE_PORT\" = 8123 ] && exit 7"});
  ASSERT_TRUE(es.ok()) << es.status().ToString();
  EXPECT_TRUE(es->exited);
  EXPECT_EQ(es->code, 7);
  EXPECT_FALSE(os::Exists(dir + "/s.sock"));
  auto missing = RunRelayed({dir + "/s.sock", 8123}, {dir + "/no-such-program"});
  EXPECT_TRUE(missing.status().IsNotFound()) << missing.status().ToString();
  (void)os::RemoveAll(dir);
}

}  // namespace
}  // namespace lathe::gateway
