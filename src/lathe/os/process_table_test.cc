#include "lathe/os/process_table.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace lathe::os {
namespace {

TEST(ProcCgroup, PathsOfV1AndV2Lines) {
  EXPECT_EQ(ParseProcCgroup("4:memory:/process_api/3f\n1:cpu,cpuacct:/\n0::/user.slice/x\n"),
            (std::vector<std::string>{"/process_api/3f", "/", "/user.slice/x"}));
  EXPECT_TRUE(ParseProcCgroup("garbage\n").empty());
}

TEST(RealProcessTable, ReadsThisProcess) {
  ProcessTable& t = RealProcessTable();
  EXPECT_EQ(t.Parent(::getpid()), ::getppid());
  EXPECT_FALSE(t.CgroupPaths(::getpid()).empty());
  auto u = t.Usage(::getpid());
  ASSERT_TRUE(u.has_value());
  EXPECT_GT(u->rss_bytes, 0u);
  EXPECT_FALSE(t.Usage(0x3fffffff).has_value());  // above pid_max
}

}  // namespace
}  // namespace lathe::os
