#include "lathe/gateway/balancer.h"

#include <gtest/gtest.h>

#include <map>

namespace lathe::gateway {
namespace {

RouteReplica R(std::string id, std::string version = "m/1") {
  RouteReplica r;
  r.id = id;
  r.socket = "/run/" + id + ".sock";
  r.uid = 1001;
  r.version = std::move(version);
  return r;
}

// A balancer whose random draws are `u` each time.
struct Fixture {
  double u = 0.0;
  Balancer b{[this] { return u; }};
  void HealthyAll() {
    for (const auto& r : std::vector<ReplicaState>(b.replicas())) {
      b.ProbeResult(r.route.id, true, "", 1);
    }
  }
  std::string Pick(std::string_view exclude = {}) {
    auto c = b.Choose(exclude);
    return c ? c->id : "none";
  }
};

TEST(Balancer, NewReplicasWaitForTheirFirstGoodProbe) {
  Fixture f;
  auto fresh = f.b.Update({R("a"), R("b")}, {});
  EXPECT_EQ(fresh, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(f.b.AnyReady());
  EXPECT_EQ(f.Pick(), "none");
  EXPECT_TRUE(f.b.ProbeResult("a", true, "", 100));   // became healthy
  EXPECT_FALSE(f.b.ProbeResult("a", true, "", 200));  // was already
  EXPECT_EQ(f.Pick(), "a");
  EXPECT_EQ(f.b.replicas()[0].last_probe_ms, 200);
  EXPECT_EQ(f.b.replicas()[1].last_error, "not probed yet");
}

TEST(Balancer, LeastOutstandingThenRoundRobinOnTies) {
  Fixture f;
  f.b.Update({R("a"), R("b"), R("c")}, {});
  f.HealthyAll();
  // All at 0 in flight: round robin gives each one in turn.
  EXPECT_EQ(f.Pick(), "a");
  EXPECT_EQ(f.Pick(), "b");
  EXPECT_EQ(f.Pick(), "c");
  // b finishes: it alone has the fewest in flight.
  f.b.Finish("b", false);
  EXPECT_EQ(f.Pick(), "b");
  f.b.Finish("a", false);
  f.b.Finish("a", false);  // more Finish than Choose never goes below zero
  EXPECT_EQ(f.b.replicas()[0].in_flight, 0);
  EXPECT_EQ(f.Pick(), "a");
  EXPECT_EQ(f.b.replicas()[0].requests, 2);
  f.b.Finish("c", true);
  EXPECT_EQ(f.b.replicas()[2].errors, 1);
}

TEST(Balancer, UnhealthyAndDrainingReplicasGetNothing) {
  Fixture f;
  f.b.Update({R("a"), R("b")}, {});
  f.HealthyAll();
  f.b.ProbeResult("a", false, "GET /health answered 500", 5);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(f.Pick(), "b");
  EXPECT_EQ(f.b.replicas()[0].last_error, "GET /health answered 500");
  // A request that failed before any byte takes the replica out at once.
  f.b.RequestFailed("b", "connection refused", 6);
  EXPECT_EQ(f.Pick(), "none");
  EXPECT_EQ(f.b.healthy_count(), 0);
  f.b.ProbeResult("a", true, "", 7);
  f.b.ProbeResult("b", true, "", 7);
  // Draining: healthy, but no new requests; its in-flight count is kept.
  RouteReplica b = R("b");
  b.draining = true;
  auto fresh = f.b.Update({R("a"), b}, {});
  EXPECT_TRUE(fresh.empty());  // same socket and uid: health and counts kept
  for (int i = 0; i < 4; ++i) EXPECT_EQ(f.Pick(), "a");
  EXPECT_EQ(f.b.replicas()[1].in_flight, 4);  // from the picks before
  EXPECT_TRUE(f.b.replicas()[1].healthy);
  // Excluded (the replica a retry leaves): another one or none.
  EXPECT_EQ(f.Pick("a"), "none");
}

TEST(Balancer, AReplicaOnANewSocketStartsOver) {
  Fixture f;
  f.b.Update({R("a")}, {});
  f.HealthyAll();
  RouteReplica moved = R("a");
  moved.socket = "/run/elsewhere.sock";
  EXPECT_EQ(f.b.Update({moved}, {}), std::vector<std::string>{"a"});
  EXPECT_FALSE(f.b.AnyReady());
  EXPECT_EQ(f.b.Update({}, {}), std::vector<std::string>{});
  EXPECT_TRUE(f.b.replicas().empty());
  f.b.Finish("a", false);  // a request of a replica now gone: ignored
}

TEST(Balancer, VersionsByWeightAndAVersionWithoutHealthyReplicasGetsNoShare) {
  Fixture f;
  f.b.Update({R("old1", "m/1"), R("old2", "m/1"), R("new1", "m/2")}, {{"m/1", 90}, {"m/2", 10}});
  f.HealthyAll();
  // Draws below 0.9 fall on m/1 (versions in name order), above on m/2.
  f.u = 0.0;
  EXPECT_EQ(f.b.Choose()->version, "m/1");
  f.u = 0.89;
  EXPECT_EQ(f.b.Choose()->version, "m/1");
  f.u = 0.91;
  EXPECT_EQ(f.Pick(), "new1");
  // m/2 unhealthy: every draw goes to m/1.
  f.b.ProbeResult("new1", false, "down", 9);
  f.u = 0.99;
  EXPECT_EQ(f.b.Choose()->version, "m/1");
  // No weighted version has a candidate: any healthy replica serves.
  f.b.Update({R("old1", "m/1"), R("new1", "m/2")}, {{"m/3", 100}});
  f.b.ProbeResult("new1", true, "", 10);
  f.b.ProbeResult("old1", false, "down", 10);
  EXPECT_EQ(f.Pick(), "new1");
  // Weight 0 is no share while another version has one.
  f.b.Update({R("old1", "m/1"), R("new1", "m/2")}, {{"m/1", 0}, {"m/2", 100}});
  f.b.ProbeResult("old1", true, "", 11);
  for (double u : {0.0, 0.5, 0.99}) {
    f.u = u;
    EXPECT_EQ(f.Pick(), "new1") << u;
  }
  // The share follows the weights over many draws.
  f.b.Update({R("old1", "m/1"), R("new1", "m/2")}, {{"m/1", 75}, {"m/2", 25}});
  std::map<std::string, int> count;
  for (int i = 0; i < 100; ++i) {
    f.u = i / 100.0;
    ++count[f.b.Choose()->version];
  }
  EXPECT_EQ(count["m/1"], 75);
  EXPECT_EQ(count["m/2"], 25);
}

}  // namespace
}  // namespace lathe::gateway
