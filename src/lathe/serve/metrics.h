// A small Prometheus registry: counters, gauges and histograms with labels,
// rendered in the text exposition format (version 0.0.4), clean under
// `promtool check metrics`. The metric names `lathe serve` exports are listed
// in docs/serving.md. Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lathe::serve {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Metrics {
 public:
  enum class Type { kCounter, kGauge, kHistogram };

  // Declares a family (once, before use). `buckets` are the histogram's upper
  // bounds, ascending; +Inf is implicit.
  void Declare(std::string name, Type type, std::string help, std::vector<double> buckets = {});

  void Add(std::string_view name, const Labels& labels, double v = 1);   // counter
  void Set(std::string_view name, const Labels& labels, double v);       // gauge
  void Observe(std::string_view name, const Labels& labels, double v);   // histogram
  // Removes every series of a gauge (before setting fresh values at scrape time).
  void ClearGauge(std::string_view name);

  std::string Render() const;

  // Bucket sets in seconds and in batch rows.
  static std::vector<double> LatencyBuckets();
  static std::vector<double> BatchBuckets();

 private:
  struct Series {
    double value = 0;               // counter or gauge; histogram sum
    uint64_t count = 0;             // histogram
    std::vector<uint64_t> buckets;  // histogram, not cumulative
  };
  struct Family {
    std::string name, help;
    Type type;
    std::vector<double> bounds;
    std::map<std::string, Series> series;  // key: rendered label set {a="b",...}
  };
  Family* Find(std::string_view name);

  mutable std::mutex mu_;
  std::vector<Family> families_;  // guarded by mu_; declaration order
};

// The label set as Prometheus writes it: {a="x",b="y"} (values escaped); "" when empty.
std::string RenderLabels(const Labels& labels);

}  // namespace lathe::serve
