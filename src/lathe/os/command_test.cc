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

TEST(Command, GivesLinesAsTheyComeWithStdinAndTheEnvironment) {
  char path[] = "/tmp/lathe-command-test-XXXXXX";
  int in = ::mkstemp(path);
  ASSERT_GE(in, 0);
  ::unlink(path);
  ASSERT_EQ(::write(in, "from stdin\n", 11), 11);
  ASSERT_EQ(::lseek(in, 0, SEEK_SET), 0);
  std::vector<std::string> lines;
  auto r = RunCommandLines(
      {"/bin/sh", "-c", "cat; echo \"$X\"; printf '1/2\\r2/2\\r\\n' >&2; printf 'no end'; exit 3"},
      {{"X", "only this"}}, in, 10000, 6, [&](std::string_view l) { lines.emplace_back(l); });
  ::close(in);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(lines, (std::vector<std::string>{"from stdin", "only this", "1/2", "2/2", "no end"}));
  EXPECT_EQ(r->out, "no end");  // the last 6 bytes
  auto slow = RunCommandLines({"/bin/sleep", "30"}, {}, -1, 200, 100, [](std::string_view) {});
  EXPECT_EQ(slow.status().code(), Code::kDeadlineExceeded);
  auto missing = RunCommandLines({"/nonexistent/lathe-test-binary"}, {}, -1, 1000, 100,
                                 [](std::string_view) {});
  EXPECT_TRUE(missing.status().IsNotFound());
}

}  // namespace
}  // namespace lathe::os
