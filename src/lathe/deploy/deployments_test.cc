// The deployment manager against a run supervisor in memory (FakeRuns) and
// a front that says what the test tells it: rollout, rollback on a failed
// replica, scaling up, down, to zero and back, a lost replica, and a daemon
// restart in the middle of a rollout. The reconciler's own rules are tested
// in reconcile_test.cc; these tests check that the manager carries its
// decisions out on runs and keeps what it must across a restart.
#include "lathe/deploy/deployments.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "lathe/deploy/test_util/fake_runs.h"
#include "lathe/os/test_util/fake_clock.h"

namespace lathe::deploy {
namespace {

using run::RunState;

// The front as the test wants it: which replicas are healthy, how many
// requests it holds; what the manager wrote as routes.
class FakeFront final : public FrontControl {
 public:
  struct Seen {
    std::set<std::string> healthy;
    std::map<std::string, int> held;  // deployment -> held requests
    std::vector<Json> routes;
  };
  explicit FakeFront(std::shared_ptr<Seen> seen) : seen_(std::move(seen)) {}
  Status Ensure() override { return Status::OK(); }
  bool Running() override { return true; }
  Result<Json> FrontStatus() override {
    Json deployments = Json::array();
    for (const Json& d :
         seen_->routes.empty() ? Json::array() : seen_->routes.back()["deployments"]) {
      Json replicas = Json::array();
      for (const Json& r : d["replicas"]) {
        const std::string id = r["id"];
        replicas.push_back(
            {{"id", id}, {"healthy", seen_->healthy.count(id) > 0}, {"in_flight", 0}});
      }
      const std::string name = d["name"];
      deployments.push_back({{"name", name}, {"held", seen_->held[name]}, {"replicas", replicas}});
    }
    return Json{{"deployments", deployments}};
  }
  Result<std::string> Metrics() override { return std::string(); }
  Status WriteRoutes(Json routes) override {
    seen_->routes.push_back(std::move(routes));
    return Status::OK();
  }
  int port() const override { return 7733; }
  const GatewayConfig& config() const override { return config_; }

 private:
  std::shared_ptr<Seen> seen_;
  GatewayConfig config_;
};

class DeploymentsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-deployments-test-XXXXXX";
    home_ = ::mkdtemp(tmpl);
    runs_ = std::make_unique<FakeRuns>(home_);
    registry_ = std::make_unique<Registry>(*runs_, runs_->paths().db, clock_);
    StartManager();
  }
  void TearDown() override {
    manager_.reset();
    std::filesystem::remove_all(home_);
  }
  // A manager as a daemon (re)start makes one: on the same database and runs.
  void StartManager() {
    manager_.reset();
    DeploymentOptions o;
    o.make_front = [seen = front_] { return std::make_unique<FakeFront>(seen); };
    manager_ = std::make_unique<Deployments>(*runs_, *registry_, o, clock_);
    ASSERT_TRUE(manager_->Open().ok());
  }
  void Step(int ticks = 1) {
    for (int i = 0; i < ticks; ++i) {
      manager_->StepForTest();
      clock_.Advance(250);
    }
  }
  Json Create(Json spec) {
    auto d = manager_->Create(owner_, spec);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? *d : Json();
  }
  Json Update(const Json& patch) {
    auto d = manager_->Update(owner_, "web", patch);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? *d : Json();
  }
  Json Get() {
    auto d = manager_->Get(owner_, "web");
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? *d : Json();
  }
  // Every queued replica of "web" runs and answers healthy.
  void RunQueued() {
    for (const auto& r : runs_->In("me/web", RunState::kQueued)) {
      runs_->SetState(r.id, RunState::kRunning);
      front_->healthy.insert(r.id);
    }
  }
  size_t Count(RunState s) { return runs_->In("me/web", s).size(); }
  // "web" created with `replicas`, placed, running and healthy; the id of its
  // oldest running replica.
  std::string Serving(int replicas) {
    Create(Web(replicas));
    Step();
    RunQueued();
    Step();
    return runs_->In("me/web", RunState::kRunning).at(0).id;
  }
  std::vector<std::string> EventIds() {
    std::vector<std::string> ids;
    auto e = manager_->Events(owner_, "web", 0);
    if (e.ok())
      for (const auto& x : (*e)["events"]) ids.push_back(x.value("msg_id", ""));
    return ids;
  }
  bool HasEvent(const std::string& id) {
    auto ids = EventIds();
    return std::find(ids.begin(), ids.end(), id) != ids.end();
  }

  static Json Web(int replicas) {
    return {{"name", "web"}, {"command", {"srv", "--v1"}}, {"port", 8000}, {"replicas", replicas}};
  }

  std::string home_;
  os::FakeClock clock_;
  std::shared_ptr<FakeFront::Seen> front_ = std::make_shared<FakeFront::Seen>();
  std::unique_ptr<FakeRuns> runs_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<Deployments> manager_;
  daemon::Caller owner_{::geteuid(), "me", false};
};

TEST_F(DeploymentsTest, ReplicasAreTypedServiceRunsOfTheRevisionBehindTheRelay) {
  Create(Web(2));
  Step();
  auto queued = runs_->In("me/web", RunState::kQueued);
  ASSERT_EQ(queued.size(), 2u);
  const run::RunSpec& s = queued[0].spec;
  EXPECT_EQ(s.type, run::RunKind::kService);
  EXPECT_EQ(s.deployment, "me/web");  // its key: OWNER/NAME
  EXPECT_EQ(s.deployment_version, "rev-1");
  ASSERT_GE(s.command.size(), 6u);
  EXPECT_EQ(s.command[0], runs_->self_exe());
  EXPECT_EQ(s.command[1], "__relay");
  EXPECT_EQ(s.command.back(), "--v1");
  EXPECT_EQ(s.env.at("LATHE_DEPLOYMENT"), "me/web");
  EXPECT_EQ(s.env.at("LATHE_DEPLOYMENT_REVISION"), "rev-1");
  ASSERT_EQ(s.ports.size(), 1u);
  EXPECT_EQ(s.ports[0].port, 8000);
  EXPECT_EQ(s.deployment_socket.rfind(home_ + "/deployments/sockets/web-", 0), 0u);
  EXPECT_TRUE(
      std::filesystem::is_directory(s.deployment_socket.substr(0, s.deployment_socket.rfind('/'))));
  // A spec the JSON edge would take as it is.
  auto again = run::SpecFromJson(run::SpecToJson(s));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, s);
  for (const auto& o : runs_->SubmittedOptions()) EXPECT_TRUE(o.replica);
  // Running and healthy: the deployment is, and the front routes to both
  // (the front learns of a replica from the routes, then answers for it).
  RunQueued();
  Step(2);
  EXPECT_EQ(Get()["health"], "healthy");
  ASSERT_FALSE(front_->routes.empty());
  EXPECT_EQ(front_->routes.back()["deployments"][0]["replicas"].size(), 2u);
}

// In an image: the image's id is pinned at create (resolved among the
// owner's images), each replica runs the command itself in it (its relay
// beside the container), and another image is another revision.
TEST_F(DeploymentsTest, ACommandInAnImagePinsItsIdAndRunsWithoutTheRelayWrapper) {
  Json spec = Web(1);
  spec["image"] = "srv";
  spec["image_id"] = std::string(64, 'f');  // the daemon's: what the caller says is dropped
  Json d = Create(spec);
  EXPECT_EQ(d["spec"]["image"], "srv");
  EXPECT_EQ(d["spec"]["image_id"], std::string(64, 'b'));
  Step();
  auto queued = runs_->In("me/web", RunState::kQueued);
  ASSERT_EQ(queued.size(), 1u);
  const run::RunSpec& s = queued[0].spec;
  EXPECT_EQ(s.command, (std::vector<std::string>{"srv", "--v1"}));
  EXPECT_EQ(s.image, "srv");
  EXPECT_EQ(s.image_id, std::string(64, 'b'));
  EXPECT_FALSE(s.deployment_socket.empty());
  // Changing nothing of the image: the same revision; naming one again: resolved again.
  EXPECT_EQ(Update({{"replicas", 1}})["version"], "rev-1");
  Json moved = Update({{"image", "srv2"}});
  EXPECT_EQ(moved["spec"]["image"], "srv2");
  EXPECT_EQ(moved["spec"]["revision"], 2);
}

// A deployment's `profile:` fills what each replica asks for, as a run's
// does; what the deployment gives wins, and the stored spec keeps both.
TEST_F(DeploymentsTest, AProfileGivesTheReplicasItsResources) {
  std::map<std::string, run::Profile> profiles;
  profiles["small"] = *run::ProfileFromJson(
      "small", {{"gpus", 1}, {"gpu_type", "A100"}, {"memory", "24GB"}, {"shm", "1GB"}});
  profiles["wide"] = *run::ProfileFromJson("wide", {{"gpus", 1}, {"nodes", 4}});
  profiles["away"] = *run::ProfileFromJson("away", {{"cpus", 2}, {"pool", "cluster"}});
  profiles["here"] = *run::ProfileFromJson(
      "here", {{"cpus", 2}, {"pool", "local"}, {"nodes", 1}, {"partition", "gpu"}});
  runs_->SetProfiles(profiles);
  runs_->SetGpus(4, 4);
  Json spec = Web(2);
  spec["profile"] = "small";
  spec["memory"] = "8GB";  // given: wins
  Json d = Create(spec);
  Step();
  auto queued = runs_->In("me/web", RunState::kQueued);
  ASSERT_EQ(queued.size(), 2u);
  EXPECT_EQ(queued[0].spec.gpus, 1);
  EXPECT_EQ(queued[0].spec.gpu_type, "A100");
  EXPECT_EQ(queued[0].spec.memory_bytes, 8'000'000'000ull);
  EXPECT_EQ(queued[0].spec.shm_bytes, 0u);  // a replica has no /dev/shm of its own
  EXPECT_EQ(queued[0].spec.profile, "small");
  const Json stored = Get()["spec"];
  EXPECT_EQ(stored["profile"], "small");
  EXPECT_EQ(stored["gpus"], 1);
  EXPECT_EQ(stored["gpu_type"], "A100");
  EXPECT_EQ(stored["memory"], 8'000'000'000ull);
  // An update that names a profile asks for its fields anew.
  Update({{"profile", "here"}});
  EXPECT_EQ(Get()["spec"]["profile"], "here");
  EXPECT_EQ(Get()["spec"]["cpus"], 2.0);
  EXPECT_EQ(Get()["spec"]["gpus"], 1);  // "here" leaves gpus as they were
  // What a replica cannot take is refused, naming the profile and the field.
  for (const auto& [name, field] :
       std::vector<std::pair<std::string, std::string>>{{"wide", "nodes"}, {"away", "pool"}}) {
    Json other = Web(1);
    other["name"] = "web-" + name;
    other["profile"] = name;
    auto refused = manager_->Create(owner_, other);
    ASSERT_FALSE(refused.ok()) << name;
    EXPECT_EQ(refused.status().msg_id(), "profile.not_for_deployment") << name;
    EXPECT_NE(refused.status().message().find(field), std::string::npos)
        << refused.status().message();
  }
  Json unknown = Web(1);
  unknown["name"] = "web-huge";
  unknown["profile"] = "huge";
  auto refused = manager_->Create(owner_, unknown);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().msg_id(), "profile.unknown");
  EXPECT_NE(refused.status().message().find("away, here, small, wide"), std::string::npos)
      << refused.status().message();
  EXPECT_FALSE(manager_->Update(owner_, "web", {{"profile", "huge"}}).ok());
}

TEST_F(DeploymentsTest, ScalesUpDownToZeroAndBack) {
  Serving(1);
  Update({{"replicas", 3}});
  Step();
  EXPECT_EQ(Count(RunState::kQueued), 2u);
  RunQueued();
  Step();
  EXPECT_EQ(Count(RunState::kRunning), 3u);
  Update({{"replicas", 1}});
  Step(3);
  EXPECT_EQ(Count(RunState::kRunning), 1u);
  EXPECT_EQ(runs_->Stopped().size(), 2u);
  // To zero once idle past the grace; back with a request held at the front.
  Update({{"autoscale", {{"min", 0}, {"max", 2}, {"zero_grace", "1s"}}}});
  for (int i = 0; i < 40 && Count(RunState::kRunning) > 0; ++i) Step();
  EXPECT_EQ(Count(RunState::kRunning), 0u);
  EXPECT_EQ(Count(RunState::kQueued), 0u);
  front_->held["me/web"] = 1;
  Step(2);
  EXPECT_EQ(Count(RunState::kQueued), 1u);
}

TEST_F(DeploymentsTest, ARolloutReplacesTheOldRevisionOnceTheNewIsReady) {
  const std::string old_id = Serving(1);
  Update({{"command", {"srv", "--v2"}}});
  Step();
  auto queued = runs_->In("me/web", RunState::kQueued);
  ASSERT_EQ(queued.size(), 1u);
  EXPECT_EQ(queued[0].spec.deployment_version, "rev-2");
  EXPECT_EQ(queued[0].spec.command.back(), "--v2");
  RunQueued();
  Step(4);
  auto stopped = runs_->Stopped();
  EXPECT_NE(std::find(stopped.begin(), stopped.end(), old_id), stopped.end());
  EXPECT_EQ(Get()["version"], "rev-2");
}

// {"revision": "rev-1"} brings rev-1's program back, rolled out as rev-3.
TEST_F(DeploymentsTest, AnEarlierRevisionComesBackAsANewOne) {
  Serving(1);
  Update({{"command", {"srv", "--v2"}}, {"env", {{"MODE", "two"}}}});
  Step();
  RunQueued();
  Step(4);
  ASSERT_EQ(Get()["version"], "rev-2");
  Update({{"revision", "rev-1"}});
  Step();
  auto queued = runs_->In("me/web", RunState::kQueued);
  ASSERT_EQ(queued.size(), 1u);
  EXPECT_EQ(queued[0].spec.deployment_version, "rev-3");
  EXPECT_EQ(queued[0].spec.command.back(), "--v1");
  EXPECT_EQ(queued[0].spec.env.count("MODE"), 0u);
  RunQueued();
  Step(4);
  EXPECT_EQ(Get()["version"], "rev-3");
  auto gone = manager_->Update(owner_, "web", {{"revision", "rev-9"}});
  EXPECT_EQ(gone.status().msg_id(), "deploy.no_revision");
  auto bad = manager_->Update(owner_, "web", {{"revision", true}});
  EXPECT_EQ(bad.status().msg_id(), "spec.wrong_type");
  EXPECT_TRUE(manager_->Update(owner_, "web", {{"revision", 2}}).ok());  // the counter, sent back
}

TEST_F(DeploymentsTest, ANewReplicaThatFailsRollsBackAndTheOldKeepsServing) {
  const std::string old_id = Serving(1);
  Update({{"command", {"srv", "--broken"}}});
  Step();
  auto queued = runs_->In("me/web", RunState::kQueued);
  ASSERT_EQ(queued.size(), 1u);
  runs_->SetState(queued[0].id, RunState::kFailed, clock_.NowMs(), "exit code 1");
  Step(3);
  EXPECT_TRUE(HasEvent("deploy.rolled_back"));
  EXPECT_EQ(Get()["version"], "rev-1");
  EXPECT_EQ(Count(RunState::kQueued), 0u);  // the failed revision is not retried
  auto stopped = runs_->Stopped();
  EXPECT_EQ(std::find(stopped.begin(), stopped.end(), old_id), stopped.end());
  EXPECT_EQ(Count(RunState::kRunning), 1u);
}

TEST_F(DeploymentsTest, ALostReplicaIsReplaced) {
  const std::string lost = Serving(2);
  front_->healthy.erase(lost);
  runs_->SetState(lost, RunState::kLost, clock_.NowMs(), "its monitor vanished");
  // Replaced after the crash-loop backoff an ended replica earns (1 s at first).
  for (int i = 0; i < 20 && Count(RunState::kQueued) == 0; ++i) Step();
  EXPECT_EQ(Count(RunState::kQueued), 1u);
  EXPECT_EQ(Count(RunState::kRunning), 1u);
}

TEST_F(DeploymentsTest, AReplicaStoppedByHandIsReplacedAsNoFailure) {
  const std::string stopped = Serving(1);
  front_->healthy.erase(stopped);
  runs_->SetStopIntent(stopped, run::StopIntent::kUser);
  runs_->SetState(stopped, RunState::kStopped, clock_.NowMs(), "exited with code 143");
  Step();
  EXPECT_EQ(Count(RunState::kQueued), 1u);  // at once: no crash-loop backoff
  EXPECT_TRUE(HasEvent("deploy.replica_ended"));
  EXPECT_FALSE(HasEvent("deploy.replica_crashed"));
}

TEST_F(DeploymentsTest, ARemovingDeploymentSaysSo) {
  Serving(1);
  ASSERT_TRUE(manager_->Delete(owner_, "web").ok());
  Json d = Get();
  EXPECT_EQ(d["health"], "removing");
  EXPECT_EQ(d["reason_id"], "deploy.health.removing");
  EXPECT_EQ(d["replicas"]["wanted"], 0);
  EXPECT_NE(d["reason_text"].value("zh", "").find("删除"), std::string::npos) << d.dump();
  auto listed = manager_->List(owner_);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ((*listed)["deployments"][0]["health"], "removing");
}

TEST_F(DeploymentsTest, AnUnknownModelSaysWhyInBothLanguages) {
  auto d = manager_->Create(owner_, {{"name", "x"}, {"model", "nosuch@prod"}});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().msg_id(), "deploy.unknown_model");
  std::string en, zh;
  for (const auto& a : d.status().args()) {
    if (a.key == "detail") en = a.value;
    if (a.key == "detail_zh") zh = a.value;
  }
  EXPECT_NE(en.find("nosuch"), std::string::npos) << en;
  EXPECT_NE(zh.find("nosuch"), std::string::npos) << zh;
  EXPECT_NE(zh, en);
}

TEST_F(DeploymentsTest, AnUpdateAnswerNamesWhoMadeIt) {
  Serving(1);
  EXPECT_EQ(Update({{"replicas", 2}})["changed_by"], "me");
}

TEST_F(DeploymentsTest, ADaemonRestartMidRolloutFinishesItWithoutASecondNewReplica) {
  const std::string old_id = Serving(1);
  Update({{"command", {"srv", "--v2"}}});
  Step();
  ASSERT_EQ(Count(RunState::kQueued), 1u);
  StartManager();  // the daemon restarts; the runs and the database stay
  Step(2);
  EXPECT_EQ(Count(RunState::kQueued), 1u);  // the rollout's replica, not another
  RunQueued();
  Step(4);
  auto stopped = runs_->Stopped();
  EXPECT_NE(std::find(stopped.begin(), stopped.end(), old_id), stopped.end());
  EXPECT_EQ(Get()["version"], "rev-2");
}

}  // namespace
}  // namespace lathe::deploy
