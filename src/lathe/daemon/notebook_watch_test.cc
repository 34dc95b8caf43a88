#include "lathe/daemon/notebook_watch.h"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "lathe/os/test_util/fake_clock.h"

namespace lathe::daemon {
namespace {

// A client frame: FIN + opcode, masked, with the payload's length.
std::string Frame(unsigned opcode, size_t len) {
  std::string f;
  f += static_cast<char>(0x80 | opcode);
  if (len < 126) {
    f += static_cast<char>(0x80 | len);
  } else if (len < 65536) {
    f += static_cast<char>(0x80 | 126);
    f += static_cast<char>(len >> 8);
    f += static_cast<char>(len & 0xff);
  } else {
    f += static_cast<char>(0x80 | 127);
    for (int i = 7; i >= 0; --i)
      f += static_cast<char>((static_cast<uint64_t>(len) >> (8 * i)) & 0xff);
  }
  f += std::string(4, '\x5a');  // the mask
  f += std::string(len, 'x');
  return f;
}

TEST(WsDataFrames, CountsDataFramesNotPingsAndPongs) {
  WsDataFrames w;
  EXPECT_EQ(w.Feed(Frame(0xA, 4)), 0u);   // pong
  EXPECT_EQ(w.Feed(Frame(0x9, 0)), 0u);   // ping
  EXPECT_EQ(w.Feed(Frame(0x1, 20)), 1u);  // text
  EXPECT_EQ(w.Feed(Frame(0x2, 300) + Frame(0xA, 2) + Frame(0x1, 70000)), 2u);
  EXPECT_EQ(w.Feed(Frame(0x8, 2)), 0u);  // close
}

TEST(WsDataFrames, FollowsFramesSplitAnywhere) {
  const std::string bytes = Frame(0xA, 10) + Frame(0x1, 200) + Frame(0xA, 1) + Frame(0x2, 70000);
  for (size_t step : {1u, 2u, 3u, 7u, 100u, 4096u}) {
    WsDataFrames w;
    size_t frames = 0;
    for (size_t at = 0; at < bytes.size(); at += step) frames += w.Feed(bytes.substr(at, step));
    EXPECT_EQ(frames, 2u) << "step " << step;
  }
}

TEST(NotebookActivity, PagePollsAreNotTheUserAtWork) {
  EXPECT_FALSE(IsClientActivity("GET", "/api/kernels"));
  EXPECT_FALSE(IsClientActivity("GET", "/api/sessions"));
  EXPECT_FALSE(IsClientActivity("HEAD", "/api/status"));
  EXPECT_TRUE(IsClientActivity("PUT", "/api/contents/a.ipynb"));  // a save
  EXPECT_TRUE(IsClientActivity("POST", "/api/kernels"));
  EXPECT_TRUE(IsClientActivity("GET", "/notebooks/a.ipynb"));  // opening a page
  EXPECT_TRUE(IsClientActivity("GET", "/apiary"));
}

// A watch over one notebook whose socket answers nothing (not ready): it is
// never stopped as idle, however long.
TEST(NotebookWatch, ANotebookNotReadyIsNeverIdle) {
  os::FakeClock clock;
  int idle = 0;
  NotebookWatch::Hooks h;
  h.targets = [] {
    NotebookTarget t;
    t.run_id = "r1";
    t.attempt = 1;
    t.socket = "/nonexistent/jupyter.sock";
    t.idle_ms = 1000;
    return std::vector<NotebookTarget>{t};
  };
  h.on_idle = [&](const NotebookTarget&, const Json&) { ++idle; };
  NotebookWatchOptions o;
  o.ready_poll_ms = 0;
  NotebookWatch w(o, clock, h);
  for (int i = 0; i < 5; ++i) {
    w.Pass();
    clock.Advance(5000);
  }
  EXPECT_EQ(idle, 0);
  auto a = w.Activity("r1");
  ASSERT_TRUE(a.has_value());
  EXPECT_FALSE(a->ready);
}

// Jupyter's two answers the watch reads, from a unix socket: /api/status,
// and /api/kernels as the test sets it. Counts the requests it saw.
class FakeJupyter {
 public:
  FakeJupyter() {
    char tmpl[] = "/tmp/lathe-nbw-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    path = dir_ + "/jupyter.sock";
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeJupyter() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
    ::unlink(path.c_str());
    ::rmdir(dir_.c_str());
  }
  void SetKernels(std::string json) {
    std::lock_guard<std::mutex> l(mu_);
    kernels_ = std::move(json);
  }
  std::string path;
  std::atomic<int> requests{0};

 private:
  void Serve() {
    for (;;) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[4096];
      ssize_t n = ::read(c, buf, sizeof buf);
      std::string req(buf, n > 0 ? n : 0);
      std::string body;
      {
        std::lock_guard<std::mutex> l(mu_);
        body = req.starts_with("GET /api/kernels") ? kernels_ : R"({"started":"x"})";
      }
      ++requests;
      std::string answer =
          "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
      (void)!::write(c, answer.data(), answer.size());
      ::close(c);
    }
  }
  std::string dir_;
  int fd_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::string kernels_ = "[]";
};

struct Watched {
  FakeJupyter jupyter;
  os::FakeClock clock;
  std::vector<Json> idle;
  int ready = 0;
  std::map<int, int> util;
  std::unique_ptr<NotebookWatch> watch;

  explicit Watched(int poll_ms = 1000) {
    NotebookWatch::Hooks h;
    h.targets = [this] {
      NotebookTarget t;
      t.run_id = "r1";
      t.attempt = 1;
      t.uid = ::geteuid();
      t.socket = jupyter.path;
      t.token = "tok";
      t.idle_ms = 10'000;
      t.gpus = {1};
      return std::vector<NotebookTarget>{t};
    };
    h.gpu_utilization = [this] { return util; };
    h.on_ready = [this](const NotebookTarget&) { ++ready; };
    h.on_idle = [this](const NotebookTarget&, const Json& why) { idle.push_back(why); };
    NotebookWatchOptions o;
    o.poll_ms = poll_ms;
    o.ready_poll_ms = 0;
    watch = std::make_unique<NotebookWatch>(o, clock, h);
  }
  // Passes over `ms` of the fake clock, one a second.
  void Run(int64_t ms) {
    for (int64_t t = 0; t < ms; t += 1000) {
      watch->Pass();
      clock.Advance(1000);
    }
  }
};

TEST(NotebookWatch, AnIdleNotebookIsToldOnceAfterItsIdlePeriod) {
  Watched w;
  w.Run(9000);
  EXPECT_EQ(w.ready, 1);
  EXPECT_TRUE(w.idle.empty());
  w.Run(3000);
  ASSERT_EQ(w.idle.size(), 1u);
  EXPECT_EQ(w.idle[0]["idle_ms"], 10'000);
  EXPECT_EQ(w.idle[0]["last_active_by"], "start");
  w.Run(30000);
  EXPECT_EQ(w.idle.size(), 1u);  // once per attempt
}

TEST(NotebookWatch, ABusyKernelKeepsItWhatEverItPrints) {
  Watched w;
  w.jupyter.SetKernels(R"([{"id":"k1","execution_state":"busy","last_activity":"t1"}])");
  w.Run(60000);
  EXPECT_TRUE(w.idle.empty());
  EXPECT_EQ(w.watch->Activity("r1")->busy_kernels, 1);
  w.jupyter.SetKernels(R"([{"id":"k1","execution_state":"idle","last_activity":"t2"}])");
  w.Run(9000);
  EXPECT_TRUE(w.idle.empty());  // idle since its last activity, not since start
  w.Run(3000);
  ASSERT_EQ(w.idle.size(), 1u);
  EXPECT_EQ(w.idle[0]["last_active_by"], "kernel");
}

TEST(NotebookWatch, ClientMessagesAndABusyGpuKeepIt) {
  Watched w;
  for (int i = 0; i < 30; ++i) {
    w.watch->NoteClient("r1");
    w.Run(1000);
  }
  EXPECT_TRUE(w.idle.empty());
  EXPECT_EQ(w.watch->Activity("r1")->last_active_by, "client");
  w.util = {{0, 100}, {1, 40}};  // GPU 1 is the notebook's
  w.Run(30000);
  EXPECT_TRUE(w.idle.empty());
  EXPECT_EQ(w.watch->Activity("r1")->last_active_by, "gpu");
  w.util = {{0, 100}, {1, 2}};  // below the threshold; GPU 0 is another run's
  w.Run(12000);
  ASSERT_EQ(w.idle.size(), 1u);
  EXPECT_EQ(w.idle[0]["gpu_busy_pct"], 5);
}

// Passes come more often than looks at Jupyter (and at the GPUs): the
// idle stop, told on any pass, still says that the GPUs counted.
TEST(NotebookWatch, TheIdleReasonNamesTheGpusBetweenLooksToo) {
  Watched w(/*poll_ms=*/3000);
  w.util = {{1, 0}};
  w.Run(14000);
  ASSERT_EQ(w.idle.size(), 1u);
  EXPECT_EQ(w.idle[0]["gpu_busy_pct"], 5);
}

TEST(NotebookWatch, ItsOwnPollsAreNotActivity) {
  Watched w;
  w.Run(12000);
  EXPECT_GT(w.jupyter.requests.load(), 5);  // it did ask, every second
  EXPECT_EQ(w.idle.size(), 1u);
}

}  // namespace
}  // namespace lathe::daemon
