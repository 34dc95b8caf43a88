// A small Prometheus registry: counters, gauges and histograms with labels,
// rendered in the text exposition format (version 0.0.4), clean under
// `promtool check metrics`. The metric names `lathe serve` exports are listed
// in docs/serving.md, those of the deployments' front in docs/gateway.md.
// Thread-safe.
//
// Hot paths resolve a series once (Resolve) and update it through the handle:
// no label rendering, no lookup, one short lock per update.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lathe::prom {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Metrics {
 public:
  enum class Type { kCounter, kGauge, kHistogram };

  // Declares a family (once, before use). `buckets` are the histogram's upper
  // bounds, ascending; +Inf is implicit.
  void Declare(std::string name, Type type, std::string help, std::vector<double> buckets = {});

  void Add(std::string_view name, const Labels& labels, double v = 1);  // counter
  void Set(std::string_view name, const Labels& labels, double v);      // gauge
  void Observe(std::string_view name, const Labels& labels, double v);  // histogram

  // One series of a counter or histogram family, resolved ahead of its
  // updates. It is rendered only once it has been updated (by either form), so
  // resolving every series a model version may touch changes no output.
  // Handles stay valid as long as this Metrics; gauges have none (their series
  // are cleared at scrape time).
  class Series {
    friend class Metrics;
    double value = 0;                             // counter or gauge; histogram sum
    uint64_t count = 0;                           // histogram
    std::vector<uint64_t> buckets;                // histogram, not cumulative
    bool used = false;                            // rendered only once updated
    const std::vector<double>* bounds = nullptr;  // histogram: its family's bucket bounds
  };
  // nullptr when `name` is not declared or is a gauge.
  Series* Resolve(std::string_view name, const Labels& labels);
  void Add(Series* s, double v = 1);  // counter; null: nothing
  void Observe(Series* s, double v);  // histogram; null: nothing
  // Add(counter, 1) and Observe(histogram, v) under one lock: one event
  // that is counted and timed (a request), for callers on a hot path.
  void CountAndObserve(Series* counter, Series* histogram, double v);

  // Removes every series of a gauge (before setting fresh values at scrape time).
  void ClearGauge(std::string_view name);
  // Removes the series of family `name` whose label `label` has none of
  // `keep` as its value (those of a deployment that is gone); series without
  // that label stay. Handles of removed series must not be held.
  void RetainSeries(std::string_view name, const std::string& label,
                    const std::set<std::string>& keep);

  // Sets a histogram series from counts kept elsewhere (a component that
  // keeps its own, such as the daemon's scheduling latency): `buckets` holds
  // the observations per bound of the family, not cumulative (missing ones
  // count 0), `count` all of them (those above the last bound included),
  // `sum` their total. The series is rendered even when `count` is 0.
  void SetHistogram(std::string_view name, const Labels& labels,
                    const std::vector<uint64_t>& buckets, uint64_t count, double sum);

  std::string Render() const;

  // Bucket sets in seconds and in batch rows.
  static std::vector<double> LatencyBuckets();
  static std::vector<double> BatchBuckets();

 private:
  struct Family {
    std::string name, help;
    Type type;
    std::vector<double> bounds;
    std::map<std::string, Series> series;  // key: rendered label set {a="b",...}
  };
  Family* Find(std::string_view name);
  // Requires mu_; `bounds` are those of the family of `s`.
  static void ObserveLocked(const std::vector<double>& bounds, Series& s, double v);

  mutable std::mutex mu_;
  std::deque<Family>
      families_;  // guarded by mu_; declaration order (a deque: handles point into it)
};

// The label set as Prometheus writes it: {a="x",b="y"} (values escaped); "" when empty.
std::string RenderLabels(const Labels& labels);

}  // namespace lathe::prom
