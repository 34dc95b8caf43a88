// Resource profiles at submission (config.yaml `profiles:`): filled in under
// the spec's own fields, typed GPUs on this node, a profile's partition and
// GPU type handed to a cluster pool, and what can never run refused with the
// profile named. The backends are fakes; time moves only when a test says.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "lathe/daemon/daemon.h"
#include "lathe/exec/test_util/fake_backend.h"
#include "lathe/os/test_util/fake_clock.h"

namespace lathe::daemon {
namespace {

using exec::FakeBackend;
using state::RunRecord;

run::Profile MakeProfile(const std::string& name, const Json& fields) {
  auto p = run::ProfileFromJson(name, fields);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : run::Profile{};
}

class DaemonProfilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-profiles-test-XXXXXX";
    home_ = ::mkdtemp(tmpl);
    cluster_.caps.places_runs = true;
    cluster_.caps.private_shm = false;
    cluster_.caps.multi_node = true;
    DaemonOptions o;
    o.home = home_;
    o.gpus = "sim:2x24GB:L4,2x80GB:A100";  // the A100s are 2 and 3
    o.backend = &local_;
    o.pools = {{"cluster", &cluster_}};
    for (const auto& p :
         {MakeProfile("a100x1", {{"gpus", 1}, {"gpu_type", "A100"}, {"memory", "1GB"}}),
          MakeProfile("big", {{"gpus", 2},
                              {"gpu_type", "A100"},
                              {"shm", "1GB"},
                              {"pool", "cluster"},
                              {"partition", "gpu-a100"}}),
          MakeProfile("h100", {{"gpus", 1}, {"gpu_type", "H100"}}),
          MakeProfile("huge", {{"gpus", 9}}), MakeProfile("pair", {{"cpus", 1}, {"nodes", 2}}),
          MakeProfile("wide", {{"gpus", 1}, {"nodes", 4}, {"pool", "cluster"}})}) {
      o.profiles[p.name] = p;
    }
    auto d = Daemon::Create(o, clock_);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
  }
  void TearDown() override {
    daemon_.reset();
    std::filesystem::remove_all(home_);
  }

  Result<daemon::Submission> TrySubmit(Json spec) {
    spec["command"] = {"train"};
    spec["workdir"] = "/tmp";
    return daemon_->Submit(me_, spec);
  }
  RunRecord Submit(Json spec) {
    auto s = TrySubmit(std::move(spec));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? s->run : RunRecord{};
  }
  RunRecord Get(const std::string& id) {
    auto r = daemon_->Access(me_, id, AccessAction::kRead);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : RunRecord{};
  }
  std::string Arg(const Status& s, const std::string& key) {
    for (const auto& a : s.args()) {
      if (a.key == key) return a.value;
    }
    return "";
  }

  std::string home_;
  os::FakeClock clock_;
  FakeBackend local_;
  FakeBackend cluster_;
  std::unique_ptr<Daemon> daemon_;
  Caller me_{::geteuid(), "me", true};
};

TEST_F(DaemonProfilesTest, AProfileFillsWhatTheSpecLeavesOutAndLandsOnItsGpuType) {
  RunRecord r = Submit({{"profile", "a100x1"}});
  EXPECT_EQ(r.spec.profile, "a100x1");
  EXPECT_EQ(r.spec.gpus, 1);
  EXPECT_EQ(r.spec.gpu_type, "A100");
  EXPECT_EQ(r.spec.memory_bytes, 1'000'000'000u);
  RunRecord mine = Submit({{"profile", "a100x1"}, {"memory", "2GB"}, {"gpus", 2}});
  EXPECT_EQ(mine.spec.memory_bytes, 2'000'000'000u);
  EXPECT_EQ(mine.spec.gpus, 2);
  daemon_->StepForTest();
  daemon_->StepForTest();
  // The first takes the best-fitting A100, the second waits for both.
  EXPECT_EQ(Get(r.id).gpus, std::vector<int>{2});
  EXPECT_EQ(Get(mine.id).state, run::RunState::kQueued);
}

TEST_F(DaemonProfilesTest, AClusterProfileHandsItsTypeAndPartitionToThePool) {
  RunRecord r = Submit({{"profile", "big"}});
  EXPECT_EQ(r.spec.pool, "cluster");
  EXPECT_EQ(r.spec.shm_bytes, 0u);  // the pool has no private /dev/shm: the profile's is left out
  daemon_->StepForTest();
  auto a = cluster_.Get(r.id, 1);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->request.gpu_count, 2);
  EXPECT_EQ(a->request.gpu_type, "A100");
  EXPECT_EQ(a->request.partition, "gpu-a100");
  // An shm the spec gives itself stays (the pool's Check judges it).
  EXPECT_EQ(Submit({{"profile", "big"}, {"shm", "1GB"}}).spec.shm_bytes, 1'000'000'000u);
  // The spec's own pool wins: here the node has two A100s.
  RunRecord here = Submit({{"profile", "big"}, {"pool", "local"}});
  EXPECT_EQ(here.spec.pool, "");
}

TEST_F(DaemonProfilesTest, UnknownAndImpossibleProfilesAreRefusedNamingTheField) {
  auto unknown = TrySubmit({{"profile", "nope"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().msg_id(), "profile.unknown");
  EXPECT_EQ(Arg(unknown.status(), "allowed"), "a100x1, big, h100, huge, pair, wide");
  auto h100 = TrySubmit({{"profile", "h100"}});
  ASSERT_FALSE(h100.ok());
  EXPECT_EQ(h100.status().msg_id(), "profile.gpu_type_unmatched");
  EXPECT_EQ(Arg(h100.status(), "matching"), "0");
  auto huge = TrySubmit({{"profile", "huge"}});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().msg_id(), "profile.unsatisfiable");
  EXPECT_EQ(Arg(huge.status(), "field"), "gpus");
  EXPECT_EQ(Arg(huge.status(), "available"), "4");
  // Three A100s are more than the node has, with or without a profile.
  auto three = TrySubmit({{"gpus", 3}, {"gpu_type", "a100"}});
  ASSERT_FALSE(three.ok());
  EXPECT_EQ(three.status().msg_id(), "spec.gpu_type_unmatched");
  EXPECT_TRUE(TrySubmit({{"gpus", 2}, {"gpu_type", "l4"}}).ok());
}

TEST_F(DaemonProfilesTest, ProfilesSayWhereEachRunsAndWhetherItFitsNow) {
  Json j = daemon_->ProfilesJson();
  std::map<std::string, Json> by_name;
  for (const auto& p : j["profiles"]) by_name[p["name"].get<std::string>()] = p;
  ASSERT_EQ(by_name.size(), 6u);
  EXPECT_EQ(by_name["a100x1"]["fits"], "yes");
  EXPECT_EQ(by_name["a100x1"]["free_gpus"], 2);
  EXPECT_EQ(by_name["a100x1"]["pool"], "local");
  // The cluster answered without the partition the profile names.
  EXPECT_EQ(by_name["big"]["fits"], "never");
  EXPECT_EQ(by_name["big"]["reason"]["msg_id"], "profiles.why.no_partition");
  EXPECT_EQ(by_name["big"]["pool"], "cluster");
  EXPECT_EQ(by_name["big"]["fields"]["partition"], "gpu-a100");
  EXPECT_EQ(by_name["h100"]["fits"], "never");
  EXPECT_EQ(by_name["h100"]["reason"]["msg_id"], "profile.gpu_type_unmatched");
  EXPECT_EQ(by_name["huge"]["fits"], "never");
  // Both A100s taken: a100x1 no longer fits now.
  Submit({{"gpus", 2}, {"gpu_type", "A100"}});
  daemon_->StepForTest();
  daemon_->StepForTest();
  const Json after = daemon_->ProfilesJson();  // held: the loop reads into it
  for (const auto& p : after["profiles"]) {
    if (p["name"] == "a100x1") {
      EXPECT_EQ(p["fits"], "no");
      EXPECT_EQ(p["free_gpus"], 0);
    }
  }
}

// A cluster profile is judged by the pool's sinfo: its partition, its GPU
// type, how many GPUs the partition has and has free.
TEST_F(DaemonProfilesTest, AClusterProfileFitsAsItsPartitionSays) {
  auto big = [&] {
    const Json all = daemon_->ProfilesJson();  // held: the loop reads into it
    for (const auto& p : all["profiles"]) {
      if (p["name"] == "big") return p;
    }
    return Json();
  };
  exec::Partition part;
  part.name = "gpu-a100";
  part.gpu_types = {"a100-sxm4"};
  part.gpus_total = 8;
  part.gpus_used = 7;
  part.nodes_idle = 0;
  cluster_.description.partitions = {part};
  EXPECT_EQ(big()["fits"], "no");
  EXPECT_EQ(big()["free_gpus"], 1);
  cluster_.description.partitions[0].gpus_used = 2;
  EXPECT_EQ(big()["fits"], "yes");
  cluster_.description.partitions[0].gpu_types = {"v100"};
  EXPECT_EQ(big()["fits"], "never");
  EXPECT_EQ(big()["reason"]["msg_id"], "profiles.why.no_gpu_type");
  cluster_.description.partitions[0].gpu_types = {"a100"};
  cluster_.description.partitions[0].gpus_total = 1;
  EXPECT_EQ(big()["reason"]["msg_id"], "profiles.why.partition_gpus");
  cluster_.description.error = Status::Unavailable("sinfo failed");
  EXPECT_EQ(big()["fits"], "unknown");
}

// A profile's nodes: refused, naming the profile, where an attempt runs on
// one node, as the spec's own --nodes is; taken by a pool that spans nodes;
// listed with the fit they allow.
TEST_F(DaemonProfilesTest, AProfilesNodesAreRefusedWhereAnAttemptRunsOnOneNode) {
  auto s = TrySubmit({{"profile", "pair"}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().msg_id(), "profile.nodes_not_supported");
  EXPECT_EQ(Arg(s.status(), "profile"), "pair");
  EXPECT_EQ(Arg(s.status(), "nodes"), "2");
  EXPECT_EQ(Arg(s.status(), "pool"), "local");
  EXPECT_EQ(TrySubmit({{"nodes", 2}}).status().msg_id(), "spec.nodes_not_supported");
  // The spec's own nodes win over the profile's.
  RunRecord one = Submit({{"profile", "pair"}, {"nodes", 1}});
  EXPECT_EQ(one.spec.nodes, 1);
  EXPECT_EQ(one.spec.cpus, 1.0);
  EXPECT_EQ(one.spec.profile, "pair");
  // A pool that runs an attempt on several nodes takes them; gpus stay per node.
  RunRecord wide = Submit({{"profile", "wide"}});
  EXPECT_EQ(wide.spec.nodes, 4);
  EXPECT_EQ(wide.spec.gpus, 1);
  EXPECT_EQ(wide.spec.pool, "cluster");
  auto listed = [&](const std::string& name) {
    const Json all = daemon_->ProfilesJson();
    for (const auto& p : all["profiles"]) {
      if (p["name"] == name) return p;
    }
    return Json();
  };
  EXPECT_EQ(listed("pair")["fields"], (Json{{"cpus", 1.0}, {"nodes", 2}}));
  EXPECT_EQ(listed("pair")["fits"], "never");
  EXPECT_EQ(listed("pair")["reason"]["msg_id"], "profile.nodes_not_supported");
  exec::Partition part;
  part.name = "gpu";
  part.is_default = true;
  part.gpus_total = 8;
  part.nodes_total = 2;
  cluster_.description.partitions = {part};
  EXPECT_EQ(listed("wide")["fits"], "never");
  EXPECT_EQ(listed("wide")["reason"]["msg_id"], "profiles.why.partition_nodes");
  cluster_.description.partitions[0].nodes_total = 4;
  EXPECT_EQ(listed("wide")["fits"], "yes");
  cluster_.description.partitions[0].gpus_used = 5;  // 3 free, 4 asked for (1 on each of 4)
  EXPECT_EQ(listed("wide")["fits"], "no");
}

}  // namespace
}  // namespace lathe::daemon
