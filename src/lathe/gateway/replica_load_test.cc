#include "lathe/gateway/replica_load.h"

#include <gtest/gtest.h>

namespace lathe::gateway {
namespace {

// As `lathe serve` renders them: one series per model, version and priority.
constexpr std::string_view kServe =
    R"(# HELP lathe_serve_queue_length Requests waiting, per priority level (1 is highest).
# TYPE lathe_serve_queue_length gauge
lathe_serve_queue_length{model="digits",version="1",priority="1"} 0
lathe_serve_queue_length{model="digits",version="1",priority="2"} 5
lathe_serve_queue_length{model="odd name",version="2",priority="1"} 2
# TYPE lathe_serve_inflight_requests gauge
lathe_serve_inflight_requests{model="digits",version="1",priority="1"} 1
lathe_serve_inflight_requests{model="digits",version="1",priority="2"} 6
lathe_serve_inflight_requests{model="odd name",version="2",priority="1"} 2
lathe_serve_queue_length_other 100
lathe_serve_requests_total{model="digits",version="1",outcome="success"} 40
)";

TEST(ReplicaLoad, SumsTheQueuesAndCountsRunningApartFromThem) {
  auto l = ParseReplicaLoad(kServe);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->queued, 7);   // 0 + 5 + 2; not the metric whose name only begins the same
  EXPECT_EQ(l->running, 2);  // 9 in flight at the replica, 7 of them queued
}

TEST(ReplicaLoad, LabelsWithSpacesAndBracesAndATimestamp) {
  auto l = ParseReplicaLoad(
      "lathe_serve_queue_length{model=\"a } b\",x=\"q\\\"}\"} 3 1700000000000\n"
      "lathe_serve_inflight_requests 4\n");
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->queued, 3);
  EXPECT_EQ(l->running, 1);
}

TEST(ReplicaLoad, NoQueueMetricIsNoFigure) {
  EXPECT_FALSE(ParseReplicaLoad("").has_value());
  EXPECT_FALSE(ParseReplicaLoad("<html>not found</html>").has_value());
  EXPECT_FALSE(ParseReplicaLoad("http_requests_total 5\nlathe_serve_inflight_requests 3\n"));
  EXPECT_FALSE(ParseReplicaLoad("lathe_serve_queue_length NaN\nlathe_serve_queue_length x\n"));
  // Samples that are not finite numbers are skipped, the others count.
  auto l = ParseReplicaLoad("lathe_serve_queue_length +Inf\nlathe_serve_queue_length{p=\"2\"} 2\n");
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->queued, 2);
  EXPECT_EQ(l->running, 0);
}

}  // namespace
}  // namespace lathe::gateway
