#include "lathe/os/terminal.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

namespace lathe::os {
namespace {

// In a child (so that the test's own output stays where it is): standard
// input, output and error made a pipe, then a terminal (a pseudo-terminal's
// slave). The exit code has one bit per answer that was wrong.
int ChildAnswers() {
  int p[2];
  if (::pipe(p) != 0) return 64;
  int wrong = 0;
  ::dup2(p[0], 0);
  ::dup2(p[1], 1);
  ::dup2(p[1], 2);
  if (StdinIsTerminal() || StdoutIsTerminal() || StderrIsTerminal()) wrong |= 1;
  int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) return 32;
  const char* name = ::ptsname(master);
  int tty = name != nullptr ? ::open(name, O_RDWR | O_NOCTTY) : -1;
  if (tty < 0) return 32;
  ::dup2(tty, 1);
  if (StdinIsTerminal() || !StdoutIsTerminal() || StderrIsTerminal()) wrong |= 2;
  ::dup2(tty, 2);
  ::dup2(tty, 0);
  if (!StdinIsTerminal() || !StdoutIsTerminal() || !StderrIsTerminal()) wrong |= 4;
  return wrong;
}

TEST(Terminal, EachStandardStreamIsAskedOnItsOwn) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(ChildAnswers());
  int ws = 0;
  ASSERT_EQ(::waitpid(child, &ws, 0), child);
  ASSERT_TRUE(WIFEXITED(ws));
  if (WEXITSTATUS(ws) == 32) GTEST_SKIP() << "no pseudo-terminal here";
  EXPECT_EQ(WEXITSTATUS(ws), 0);
}

}  // namespace
}  // namespace lathe::os
