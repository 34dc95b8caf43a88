#include "lathe/os/command.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace lathe::os
