#include "lathe/os/command.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

namespace lathe::os {
namespace {

TEST(Command, RunsCollectsAndTimesOut) {
  auto r = RunCommand({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, 10000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
  // A command that would hang (and a grandchild holding the pipe) is killed.
  auto slow = RunCommand({"/bin/sh", "-c", "sleep 30 & sleep 30"}, 200);
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.status().code(), Code::kDeadlineExceeded);
  auto missing = RunCommand({"/nonexistent/lathe-test-binary"}, 1000);
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(missing.status().IsNotFound());
}

TEST(Command, WithEnvGivesTheCommandExactlyThatEnvironment) {
  ::setenv("LATHE_COMMAND_TEST_LEAK", "leaked", 1);
  auto r = RunCommandWithEnv({"/usr/bin/env"}, {{"A", "1"}, {"B", "two words"}}, 10000);
  ::unsetenv("LATHE_COMMAND_TEST_LEAK");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->out, "A=1\nB=two words\n");
  auto empty = RunCommandWithEnv({"/usr/bin/env"}, {}, 10000);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->out, "");
  auto missing = RunCommandWithEnv({"/nonexistent/lathe-test-binary"}, {}, 1000);
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(missing.status().IsNotFound());
}

TEST(Command, StreamsOutputAndKeepsTheTailOfStderr) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  auto r = RunCommandStreaming(
      {"/bin/sh", "-c", "echo out; printf '10%%\\r20%%\\r' >&2; echo fatal: the end >&2; exit 4"},
      fds[1], 16);
  ::close(fds[1]);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 4);
  EXPECT_EQ(r->err, "\nfatal: the end\n");  // the last 16 bytes
  std::string seen;
  char buf[256];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) seen.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  EXPECT_EQ(seen, "out\n10%\n20%\nfatal: the end\n");  // progress redraws as lines
  auto missing = RunCommandStreaming({"/nonexistent/lathe-test-binary"}, 2, 100);
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(missing.status().IsNotFound());
}

}  // namespace
}  // namespace lathe::os
