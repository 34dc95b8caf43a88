#include "lathe/gateway/front_metrics.h"

#include <gtest/gtest.h>

namespace lathe::gateway {
namespace {

TEST(RequestWindow, RateAndPercentilesOfTheLastTenSeconds) {
  RequestWindow w;
  EXPECT_EQ(w.Rps(0), 0);
  EXPECT_EQ(w.PercentileMs(0, 0.5), 0);
  for (int i = 1; i <= 100; ++i) w.Add(1000 + i, i);  // 1..100 ms
  EXPECT_DOUBLE_EQ(w.Rps(2000), 10.0);                // 100 in 10 s
  EXPECT_EQ(w.PercentileMs(2000, 0.5), 50);
  EXPECT_EQ(w.PercentileMs(2000, 0.99), 99);
  EXPECT_EQ(w.PercentileMs(2000, 1.0), 100);
  // 10 s after the 50th, the first 50 are out of the window.
  EXPECT_DOUBLE_EQ(w.Rps(1050 + RequestWindow::kWindowMs), 5.0);
  EXPECT_EQ(w.PercentileMs(1050 + RequestWindow::kWindowMs, 0.5), 75);
  EXPECT_EQ(w.Rps(100000), 0);
}

TEST(RequestWindow, LatenciesCopiedOutGiveTheSamePercentiles) {
  RequestWindow w;
  for (int i = 1; i <= 100; ++i) w.Add(1000, i);  // 1..100 ms
  std::vector<double> v;
  w.AppendLatencies(2000, v);
  ASSERT_EQ(v.size(), 100u);
  EXPECT_EQ(RequestWindow::Percentile(v, 0.5), 50);
  EXPECT_EQ(RequestWindow::Percentile(v, 0.99), 99);
  EXPECT_EQ(RequestWindow::Percentile(v, 0.5), w.PercentileMs(2000, 0.5));
  std::vector<double> none;
  w.AppendLatencies(1000 + RequestWindow::kWindowMs, none);  // all out of the window now
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(RequestWindow::Percentile(none, 0.5), 0);
  EXPECT_EQ(w.Rps(1000 + RequestWindow::kWindowMs), 0);
}

TEST(FrontMetrics, SeriesPerDeploymentAndCode) {
  FrontMetrics m;
  m.Record("digits", 200, 0.003);
  m.Record("digits", 200, 0.004);
  m.Record("digits", 503, 0.0001);
  std::string text = m.Render({{"digits", 3, 1, 2, 1}});
  EXPECT_NE(text.find("lathe_deployment_requests_total{deployment=\"digits\",code=\"200\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("lathe_deployment_requests_total{deployment=\"digits\",code=\"503\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("lathe_deployment_request_duration_seconds_count{deployment=\"digits\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("lathe_deployment_in_flight{deployment=\"digits\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("lathe_deployment_held{deployment=\"digits\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("lathe_deployment_replicas{deployment=\"digits\",state=\"wanted\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("lathe_deployment_replicas{deployment=\"digits\",state=\"healthy\"} 1\n"),
            std::string::npos);
  // A deployment gone from the routes has no gauges at the next scrape.
  text = m.Render({});
  EXPECT_EQ(text.find("lathe_deployment_in_flight{"), std::string::npos);
  // … nor counters and latencies: they go with it, those of a live one stay.
  EXPECT_EQ(text.find("deployment=\"digits\""), std::string::npos) << text;
  m.Record("digits", 200, 0.003);
  m.Record("digits2", 200, 0.003);
  text = m.Render({{"digits2", 0, 0, 1, 1}});
  EXPECT_EQ(text.find("deployment=\"digits\""), std::string::npos) << text;
  EXPECT_NE(text.find("lathe_deployment_requests_total{deployment=\"digits2\",code=\"200\"} 1\n"),
            std::string::npos)
      << text;  // A deployment that comes back starts from zero (the series it had went,
  // and the handles Record keeps for it with them).
  m.Record("digits", 200, 0.003);
  text = m.Render({{"digits", 0, 0, 1, 1}, {"digits2", 0, 0, 1, 1}});
  EXPECT_NE(text.find("lathe_deployment_requests_total{deployment=\"digits\",code=\"200\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("lathe_deployment_request_duration_seconds_count{deployment=\"digits\"} 1\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace lathe::gateway
