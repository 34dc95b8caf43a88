#include "lathe/telemetry/attribution.h"

#include <gtest/gtest.h>

#include "lathe/os/test_util/fake_process_table.h"

namespace lathe::telemetry {
namespace {

gpu::Inventory TwoGpus() {
  gpu::Inventory inv;
  gpu::GpuInfo g0, g1;
  g0.index = 0;
  g0.processes = std::vector<gpu::GpuProcess>{{100, 1'000}, {200, 2'000}, {300, 4'000}};
  g1.index = 1;
  g1.processes = std::vector<gpu::GpuProcess>{{201, 8'000}, {400, 16'000}, {999, 32'000}};
  inv.gpus = {g0, g1};
  return inv;
}

TEST(Attribution, ByListByCgroupByAncestor) {
  os::FakeProcessTable table;
  // 100: listed by run a's backend. 200: in run b's cgroup (v1, a sub-cgroup).
  // 201: in run b's v2 cgroup. 300: a grandchild of 100 (a's), in no run's
  // cgroup. 400: someone else's. 999: gone from /proc.
  table.Set(100, {1, {"/a"}, {}});
  table.Set(200, {1, {"/other", "/svc/lathe/r-b/worker"}, {}});
  table.Set(201, {1, {"/svc/lathe/r-b"}, {}});
  table.Set(300, {301, {"/"}, {}});
  table.Set(301, {100, {"/"}, {}});
  table.Set(400, {1, {"/user.slice/lathe/r-bb"}, {}});
  std::vector<RunProcesses> runs = {
      {"r-a", {100}, {}},
      {"r-b", {}, {"/sys/fs/cgroup/memory/svc/lathe/r-b", "/sys/fs/cgroup/unified/svc/lathe/r-b"}},
  };
  Attribution a = Attribute(TwoGpus(), runs, table);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a["r-a"][0].memory_bytes, 1'000u + 4'000u);
  EXPECT_EQ(a["r-a"][0].pids, (std::vector<pid_t>{100, 300}));
  EXPECT_FALSE(a["r-a"].contains(1));
  EXPECT_EQ(a["r-b"][0].memory_bytes, 2'000u);
  EXPECT_EQ(a["r-b"][1].memory_bytes, 8'000u);
  EXPECT_EQ(a["r-b"].size(), 2u);  // 400 (r-bb) is not r-b's, 999 nobody's
}

TEST(Attribution, GpusWithoutAProcessListAreSkipped) {
  os::FakeProcessTable table;
  gpu::Inventory inv;
  inv.gpus.push_back(gpu::GpuInfo{});  // processes: nullopt
  EXPECT_TRUE(Attribute(inv, {{"r", {1}, {}}}, table).empty());
}

TEST(Attribution, CgroupPathUnder) {
  EXPECT_TRUE(CgroupPathUnder("/x/lathe/r-1", "/sys/fs/cgroup/memory/x/lathe/r-1"));
  EXPECT_TRUE(CgroupPathUnder("/x/lathe/r-1/a/b", "/sys/fs/cgroup/x/lathe/r-1"));
  EXPECT_FALSE(CgroupPathUnder("/x/lathe", "/sys/fs/cgroup/x/lathe/r-1"));
  EXPECT_FALSE(CgroupPathUnder("/x/lathe/r-11", "/sys/fs/cgroup/x/lathe/r-1"));
  EXPECT_FALSE(CgroupPathUnder("/r-1", "/sys/fs/cgroup/r-1"));  // one component is too little
  EXPECT_FALSE(CgroupPathUnder("/", "/sys/fs/cgroup/r-1"));
}

}  // namespace
}  // namespace lathe::telemetry
