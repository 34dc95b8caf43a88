#include "lathe/common/prometheus.h"

#include <gtest/gtest.h>

namespace lathe::prom {
namespace {

void DeclareAll(Metrics& m) {
  m.Declare("req_total", Metrics::Type::kCounter, "Requests.");
  m.Declare("lat_seconds", Metrics::Type::kHistogram, "Latency.", {0.1, 1});
  m.Declare("queue", Metrics::Type::kGauge, "Queue.");
}

TEST(MetricsTest, HandlesRenderLikeNamedUpdates) {
  Metrics named, handles;
  DeclareAll(named);
  DeclareAll(handles);
  Labels a = {{"model", "m"}, {"version", "1"}};
  Labels b = {{"model", "m\"x"}, {"version", "2"}};
  named.Add("req_total", a);
  named.Add("req_total", a, 2);
  named.Add("req_total", b);
  named.Observe("lat_seconds", a, 0.05);
  named.Observe("lat_seconds", a, 0.5);
  named.Observe("lat_seconds", a, 7);

  Metrics::Series* ra = handles.Resolve("req_total", a);
  Metrics::Series* rb = handles.Resolve("req_total", b);
  Metrics::Series* la = handles.Resolve("lat_seconds", a);
  ASSERT_NE(ra, nullptr);
  ASSERT_NE(la, nullptr);
  handles.Add(ra);
  handles.Add(ra, 2);
  handles.Add(rb);
  handles.Observe(la, 0.05);
  handles.Observe(la, 0.5);
  handles.Observe(la, 7);
  EXPECT_EQ(handles.Render(), named.Render());
}

TEST(MetricsTest, CountAndObserveIsAnAddAndAnObservation) {
  Metrics apart, together;
  DeclareAll(apart);
  DeclareAll(together);
  Labels a = {{"model", "m"}};
  apart.Add("req_total", a);
  apart.Observe("lat_seconds", a, 0.5);
  apart.Add("req_total", a);
  apart.Observe("lat_seconds", a, 7);
  Metrics::Series* r = together.Resolve("req_total", a);
  Metrics::Series* l = together.Resolve("lat_seconds", a);
  together.CountAndObserve(r, l, 0.5);
  together.CountAndObserve(r, l, 7);
  together.CountAndObserve(nullptr, nullptr, 1);  // nothing
  EXPECT_EQ(together.Render(), apart.Render());
  EXPECT_NE(together.Render().find(R"(req_total{model="m"} 2)"), std::string::npos);
}

TEST(MetricsTest, ResolvedSeriesShowOnlyOnceUpdated) {
  Metrics m;
  DeclareAll(m);
  const std::string empty = m.Render();
  Labels a = {{"model", "m"}};
  Metrics::Series* r = m.Resolve("req_total", a);
  Metrics::Series* l = m.Resolve("lat_seconds", a);
  EXPECT_EQ(m.Render(), empty);
  m.Observe(l, 0.2);
  EXPECT_NE(m.Render().find(R"(lat_seconds_count{model="m"} 1)"), std::string::npos);
  EXPECT_EQ(m.Render().find("req_total{"), std::string::npos);
  m.Add("req_total", a);  // the named form reaches the same series
  m.Add(r);
  EXPECT_NE(m.Render().find(R"(req_total{model="m"} 2)"), std::string::npos);
}

TEST(MetricsTest, SetHistogramRendersLikeObservations) {
  Metrics observed, set;
  DeclareAll(observed);
  DeclareAll(set);
  Labels a = {{"model", "m"}};
  for (double v : {0.05, 0.5, 0.7, 7.0}) observed.Observe("lat_seconds", a, v);
  set.SetHistogram("lat_seconds", a, {1, 2}, 4, 0.05 + 0.5 + 0.7 + 7.0);
  EXPECT_EQ(set.Render(), observed.Render());
  // An empty one is rendered too, every bucket at 0.
  Metrics empty;
  DeclareAll(empty);
  empty.SetHistogram("lat_seconds", {}, {}, 0, 0);
  EXPECT_NE(empty.Render().find("lat_seconds_bucket{le=\"1\"} 0\n"), std::string::npos);
  EXPECT_NE(empty.Render().find("lat_seconds_count 0\n"), std::string::npos);
  // Not a histogram: nothing.
  empty.SetHistogram("queue", {}, {1}, 1, 1);
  EXPECT_EQ(empty.Render().find("queue{"), std::string::npos);
  EXPECT_EQ(empty.Render().find("queue 1"), std::string::npos);
}

TEST(MetricsTest, RetainSeriesKeepsTheNamedValuesAndSeriesWithoutTheLabel) {
  Metrics m;
  m.Declare("c_total", Metrics::Type::kCounter, "c");
  m.Add("c_total", {{"d", "a\"b"}, {"code", "200"}});
  m.Add("c_total", {{"code", "500"}, {"d", "a"}});
  m.Add("c_total", {{"d", "ab"}});
  m.Add("c_total", {{"other", "a"}});
  m.RetainSeries("c_total", "d", {"a\"b"});
  const std::string text = m.Render();
  EXPECT_NE(text.find("c_total{d=\"a\\\"b\",code=\"200\"} 1"), std::string::npos) << text;
  EXPECT_EQ(text.find("d=\"a\"}"), std::string::npos) << text;
  EXPECT_EQ(text.find("d=\"ab\""), std::string::npos) << text;
  EXPECT_NE(text.find("c_total{other=\"a\"} 1"), std::string::npos) << text;
}

TEST(MetricsTest, NoHandleForGaugesOrUnknownFamilies) {
  Metrics m;
  DeclareAll(m);
  EXPECT_EQ(m.Resolve("queue", {}), nullptr);
  EXPECT_EQ(m.Resolve("nope", {}), nullptr);
  m.Add(nullptr);  // no-ops
  m.Observe(nullptr, 1);
}

}  // namespace
}  // namespace lathe::prom
