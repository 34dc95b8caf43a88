#include "lathe/os/process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace lathe::os {
namespace {

TEST(Process, SelfIsAliveWithItsStartTime) {
  auto st = ProcessStartTime(getpid());
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(ProcessAlive(getpid(), st));
  EXPECT_FALSE(ProcessAlive(getpid(), *st + 1));  // a reused pid would differ
}

TEST(Process, ZombieIsNotAlive) {
  pid_t pid = fork();
  if (pid == 0) _exit(3);
  // Wait until it is a zombie (exited, not reaped).
  for (int i = 0; i < 500 && ProcessAlive(pid); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(ProcessAlive(pid));
  int ws = 0;
  ASSERT_EQ(waitpid(pid, &ws, 0), pid);
  ExitStatus es = DecodeWaitStatus(ws);
  EXPECT_TRUE(es.exited);
  EXPECT_EQ(es.code, 3);
}

TEST(Process, DescendantsIncludeSetsidGrandchild) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  if (child == 0) {
    if (fork() == 0) {
      setsid();
      write(ready[1], "x", 1);
      pause();
      _exit(0);
    }
    pause();
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  auto d = Descendants(getpid());
  EXPECT_NE(std::find(d.begin(), d.end(), child), d.end());
  EXPECT_GE(d.size(), 2u);
  for (pid_t p : Descendants(child)) (void)SendSignal(p, SIGKILL);
  (void)SendSignal(child, SIGKILL);
  int ws = 0;
  waitpid(child, &ws, 0);
  ExitStatus es = DecodeWaitStatus(ws);
  EXPECT_EQ(es.signal, SIGKILL);
  EXPECT_EQ(SignalName(SIGKILL), "SIGKILL");
}

}  // namespace
}  // namespace lathe::os
