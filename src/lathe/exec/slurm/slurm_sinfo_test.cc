#include "lathe/exec/slurm/slurm_sinfo.h"

#include <gtest/gtest.h>

#include "lathe/os/files.h"

// testdata/sinfo_*.txt are what Slurm 22.05 printed for SinfoArgs() on the
// private cluster of tests/integ/slurm_cluster.py (one node, 2 CPUs, 2 fake
// GPUs): idle; with a one-GPU job and a second, DOWN partition "long"
// (MaxTime 2 days); then with the node draining.
namespace lathe::exec {
namespace {

const std::string kTestdata = std::string(LATHE_SOURCE_DIR) + "/src/lathe/exec/slurm/testdata/";

std::vector<Partition> Golden(const std::string& name) {
  auto text = os::ReadFile(kTestdata + name);
  EXPECT_TRUE(text.ok()) << name;
  auto parts = ParseSinfo(text.ok() ? *text : "");
  EXPECT_TRUE(parts.ok()) << parts.status().ToString();
  return parts.ok() ? *parts : std::vector<Partition>{};
}

constexpr int64_t kMinute = 60'000;
constexpr int64_t kHour = 60 * kMinute;
constexpr int64_t kDay = 24 * kHour;

TEST(SlurmDuration, EveryFormatSbatchReads) {
  EXPECT_EQ(ParseSlurmDuration("infinite"), -1);
  EXPECT_EQ(ParseSlurmDuration("UNLIMITED"), -1);
  EXPECT_EQ(ParseSlurmDuration("Infinite"), -1);
  EXPECT_EQ(ParseSlurmDuration("30"), 30 * kMinute);              // MM
  EXPECT_EQ(ParseSlurmDuration("90"), 90 * kMinute);              // past an hour
  EXPECT_EQ(ParseSlurmDuration("30:15"), 30 * kMinute + 15'000);  // MM:SS
  EXPECT_EQ(ParseSlurmDuration("1:00:00"), kHour);                // HH:MM:SS
  EXPECT_EQ(ParseSlurmDuration("12:34:56"), 12 * kHour + 34 * kMinute + 56'000);
  EXPECT_EQ(ParseSlurmDuration("2-00"), 2 * kDay);  // D-HH
  EXPECT_EQ(ParseSlurmDuration("1-02"), kDay + 2 * kHour);
  EXPECT_EQ(ParseSlurmDuration("1-02:03"), kDay + 2 * kHour + 3 * kMinute);  // D-HH:MM
  EXPECT_EQ(ParseSlurmDuration("1-02:03:04"),                                // D-HH:MM:SS
            kDay + 2 * kHour + 3 * kMinute + 4'000);
  EXPECT_EQ(ParseSlurmDuration("0"), 0);
  EXPECT_EQ(ParseSlurmDuration("365-00:00:00"), 365 * kDay);
}

TEST(SlurmDuration, AnythingElseIsNotADuration) {
  for (const char* bad : {"",
                          "n/a",
                          "NONE",
                          "1:2:3:4",
                          "-1",
                          "1-",
                          "-",
                          "1--2",
                          "1-2-3",
                          ":",
                          "1:",
                          ":30",
                          "1.5",
                          " 30",
                          "30 ",
                          "+5",
                          "1-2:3:4:5",
                          "abc",
                          "1e3",
                          "9999999999",
                          "1-9999999999",
                          "00000000000000000001",
                          "１２"}) {
    EXPECT_EQ(ParseSlurmDuration(bad), std::nullopt) << '"' << bad << '"';
  }
  // The largest parts stay inside int64 milliseconds.
  auto big = ParseSlurmDuration("999999999-999999999:999999999:999999999");
  ASSERT_TRUE(big.has_value());
  EXPECT_GT(*big, 0);
}

TEST(SlurmGres, GpusAndTheirTypes) {
  std::vector<std::string> types;
  EXPECT_EQ(GresGpuCount("gpu:fake:2", &types), 2);
  EXPECT_EQ(types, std::vector<std::string>{"fake"});
  types.clear();
  EXPECT_EQ(GresGpuCount("gpu:a100:4(S:0-1),gpu:v100:2(S:1),shard:a100:16", &types), 6);
  EXPECT_EQ(types, (std::vector<std::string>{"a100", "v100"}));
  EXPECT_EQ(GresGpuCount("gpu:2"), 2);
  EXPECT_EQ(GresGpuCount("gpu"), 1);
  EXPECT_EQ(GresGpuCount("gpu:a100"), 1);
  // GresUsed: the parentheses may hold commas.
  EXPECT_EQ(GresGpuCount("gpu:fake:1(IDX:0)"), 1);
  EXPECT_EQ(GresGpuCount("gpu:fake:0(IDX:N/A)"), 0);
  EXPECT_EQ(GresGpuCount("gpu:a100:3(IDX:0,2-3),gpu:v100:0(IDX:N/A)"), 3);
  EXPECT_EQ(GresGpuCount("gpu:0(IDX:N/A)"), 0);
  // Nothing, other GRES, garbage.
  types.clear();
  for (const char* none : {"", "(null)", "shard:8", "mps:100", "gpus:4", "gpu:a:b:c:d", "gpu:a:x",
                           "gpu:a:-3", "gpu:a:99999999999", ",,,", "(((", ")))gpu:2"}) {
    EXPECT_EQ(GresGpuCount(none, &types), 0) << '"' << none << '"';
  }
  EXPECT_TRUE(types.empty());
}

TEST(SlurmNodeState, Classes) {
  EXPECT_EQ(ClassifyNodeState("idle"), SlurmNodeClass::kIdle);
  EXPECT_EQ(ClassifyNodeState("idle~"), SlurmNodeClass::kIdle);
  EXPECT_EQ(ClassifyNodeState("idle*"), SlurmNodeClass::kDown);  // not responding
  EXPECT_EQ(ClassifyNodeState("mixed"), SlurmNodeClass::kAllocated);
  EXPECT_EQ(ClassifyNodeState("allocated"), SlurmNodeClass::kAllocated);
  EXPECT_EQ(ClassifyNodeState("completing"), SlurmNodeClass::kAllocated);
  EXPECT_EQ(ClassifyNodeState("mixed+drain"), SlurmNodeClass::kAllocated);
  EXPECT_EQ(ClassifyNodeState("draining"), SlurmNodeClass::kDown);
  EXPECT_EQ(ClassifyNodeState("drained"), SlurmNodeClass::kDown);
  EXPECT_EQ(ClassifyNodeState("down*"), SlurmNodeClass::kDown);
  EXPECT_EQ(ClassifyNodeState("DOWN"), SlurmNodeClass::kDown);
  EXPECT_EQ(ClassifyNodeState("fail"), SlurmNodeClass::kDown);
  EXPECT_EQ(ClassifyNodeState("reserved"), SlurmNodeClass::kOther);
  EXPECT_EQ(ClassifyNodeState("planned"), SlurmNodeClass::kOther);
  EXPECT_EQ(ClassifyNodeState("unknown"), SlurmNodeClass::kOther);
  EXPECT_EQ(ClassifyNodeState(""), SlurmNodeClass::kOther);
  EXPECT_EQ(ClassifyNodeState("something_new"), SlurmNodeClass::kOther);
}

TEST(Sinfo, RealIdleCluster) {
  auto parts = Golden("sinfo_idle.txt");
  ASSERT_EQ(parts.size(), 1u);
  const Partition& p = parts[0];
  EXPECT_EQ(p.name, "debug");
  EXPECT_TRUE(p.is_default);
  EXPECT_EQ(p.state, "up");
  EXPECT_EQ(p.max_time_ms, -1);
  EXPECT_EQ(p.nodes_total, 1);
  EXPECT_EQ(p.nodes_idle, 1);
  EXPECT_EQ(p.nodes_allocated, 0);
  EXPECT_EQ(p.nodes_down, 0);
  EXPECT_EQ(p.cpus_total, 2);
  EXPECT_EQ(p.cpus_allocated, 0);
  EXPECT_EQ(p.gpus_total, 2);
  EXPECT_EQ(p.gpus_used, 0);
  EXPECT_EQ(p.gpu_types, std::vector<std::string>{"fake"});
  EXPECT_EQ(p.memory_mb, 4000);
}

TEST(Sinfo, RealClusterWithAJobAndADownPartition) {
  auto parts = Golden("sinfo_one_gpu_job.txt");
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].name, "debug");
  EXPECT_EQ(parts[0].nodes_allocated, 1);
  EXPECT_EQ(parts[0].nodes_idle, 0);
  EXPECT_EQ(parts[0].gpus_used, 1);
  EXPECT_EQ(parts[0].cpus_allocated, 1);
  EXPECT_EQ(parts[1].name, "long");
  EXPECT_FALSE(parts[1].is_default);
  EXPECT_EQ(parts[1].state, "down");
  EXPECT_EQ(parts[1].max_time_ms, 2 * kDay);
  EXPECT_EQ(parts[1].gpus_total, 2);  // the same node, counted in both
}

TEST(Sinfo, RealDrainingNodeIsDown) {
  auto parts = Golden("sinfo_draining.txt");
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].nodes_down, 1);
  EXPECT_EQ(parts[0].nodes_allocated, 0);
  EXPECT_EQ(parts[0].gpus_used, 1);
}

TEST(Sinfo, SumsNodesPerPartitionInFirstSeenOrder) {
  auto parts = ParseSinfo(
      "gpu|gpu|n1|idle|0/64/0/64|gpu:a100:8(S:0-1)|gpu:a100:0(IDX:N/A)|512000|2-00:00:00|up\n"
      "cpu|cpu*|c1|allocated|32/0/0/32|(null)|gpu:0|128000|1:00:00|up\r\n"
      "\n"
      "gpu|gpu|n2|mixed|8/56/0/"
      "64|gpu:a100:4(S:0),gpu:h100:4(S:1)|gpu:a100:3(IDX:0-2),gpu:h100:0(IDX:N/A)|"
      "512000|2-00:00:00|up\n"
      "gpu|gpu|n3|down*|0/0/64/64|gpu:h100:8|gpu:h100:0(IDX:N/A)|512000|2-00:00:00|up\n"
      "gpu|gpu|n4|reserved|0/64/0/64|gpu:8|gpu:0|512000|2-00:00:00|up\n");
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  ASSERT_EQ(parts->size(), 2u);
  const Partition& g = (*parts)[0];
  EXPECT_EQ(g.name, "gpu");
  EXPECT_FALSE(g.is_default);
  EXPECT_EQ(g.nodes_total, 4);
  EXPECT_EQ(g.nodes_idle, 1);
  EXPECT_EQ(g.nodes_allocated, 1);
  EXPECT_EQ(g.nodes_down, 1);
  EXPECT_EQ(g.gpus_total, 32);
  EXPECT_EQ(g.gpus_used, 3);
  EXPECT_EQ(g.gpu_types, (std::vector<std::string>{"a100", "h100"}));
  EXPECT_EQ(g.cpus_total, 256);
  EXPECT_EQ(g.cpus_allocated, 8);
  EXPECT_EQ(g.memory_mb, 4 * 512000);
  EXPECT_EQ(g.max_time_ms, 2 * kDay);
  const Partition& c = (*parts)[1];
  EXPECT_TRUE(c.is_default);
  EXPECT_EQ(c.gpus_total, 0);
  EXPECT_TRUE(c.gpu_types.empty());
  EXPECT_EQ(c.max_time_ms, kHour);
}

TEST(Sinfo, NothingIsNoPartition) {
  for (const char* empty : {"", "\n", "\n\n  \n", "\r\n"}) {
    auto parts = ParseSinfo(empty);
    ASSERT_TRUE(parts.ok());
    EXPECT_TRUE(parts->empty());
  }
}

TEST(Sinfo, AnUnreadableTimeIsNoLimitAndAnUnknownGresNoGpu) {
  auto parts = ParseSinfo("p|p|n|idle|0/1/0/1|weird:::(|garbage|10|n/a|UP\n");
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  EXPECT_EQ((*parts)[0].max_time_ms, -1);
  EXPECT_EQ((*parts)[0].gpus_total, 0);
  EXPECT_EQ((*parts)[0].state, "up");
}

TEST(Sinfo, HostileLinesAreRefusedNamingTheLine) {
  for (const char* bad : {
           "debug|debug*|vm|idle|0/2/0/2|gpu:fake:2|gpu:fake:0|4000|infinite\n",  // 9 fields
           "debug|debug*|vm|idle|0/2/0/2|gpu:fake:2|gpu:fake:0|4000|infinite|up|x\n",
           "|debug*|vm|idle|0/2/0/2|gpu:fake:2|gpu:fake:0|4000|infinite|up\n",
           "debug|debug*|vm|idle|0/2/0|gpu:fake:2|gpu:fake:0|4000|infinite|up\n",
           "debug|debug*|vm|idle|a/2/0/2|gpu:fake:2|gpu:fake:0|4000|infinite|up\n",
           "debug|debug*|vm|idle|0/2/0/-2|gpu:fake:2|gpu:fake:0|4000|infinite|up\n",
           "debug|debug*|vm|idle|0/2/0/99999999999|gpu:fake:2|gpu:fake:0|4000|infinite|up\n",
           "debug|debug*|vm|idle|0/2/0/2|gpu:fake:2|gpu:fake:0|4000+|infinite|up\n",
           "de\x1b[31mbug|debug*|vm|idle|0/2/0/2|gpu:fake:2|gpu:fake:0|4000|infinite|up\n",
           "PARTITION NODES STATE\n",
       }) {
    auto parts = ParseSinfo(bad);
    ASSERT_FALSE(parts.ok()) << bad;
    EXPECT_EQ(parts.status().code(), Code::kInvalidArgument);
    EXPECT_NE(parts.status().message().find("sinfo: "), std::string::npos);
    EXPECT_EQ(parts.status().message().find('\x1b'), std::string::npos);
  }
}

TEST(Sinfo, ALongLineIsShownCut) {
  std::string line(100000, 'x');
  auto parts = ParseSinfo(line);
  ASSERT_FALSE(parts.ok());
  EXPECT_LT(parts.status().message().size(), 400u);
}

TEST(Sinfo, ArgsAskForOneLinePerNodeWithoutPadding) {
  std::vector<std::string> args = SinfoArgs();
  ASSERT_EQ(args.size(), 3u);
  EXPECT_EQ(args[0], "--noheader");
  EXPECT_EQ(args[1], "--Node");
  // Every field unpadded (":0") and as many separators as ParseSinfo expects.
  EXPECT_EQ(std::count(args[2].begin(), args[2].end(), '|'), 9);
  EXPECT_EQ(std::count(args[2].begin(), args[2].end(), ','), 9);
}

}  // namespace
}  // namespace lathe::exec
