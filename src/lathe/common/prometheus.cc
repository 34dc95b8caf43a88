#include "lathe/common/prometheus.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace lathe::prom {
namespace {

std::string Escape(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

// Inserts `extra` (e.g. le="0.5") into a rendered label set.
std::string WithLabel(const std::string& labels, const std::string& extra) {
  if (labels.empty()) return "{" + extra + "}";
  return labels.substr(0, labels.size() - 1) + "," + extra + "}";
}

}  // namespace

std::string RenderLabels(const Labels& labels) {
  if (labels.empty()) return "";
  std::string s = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) s += ',';
    s += labels[i].first + "=\"" + Escape(labels[i].second) + "\"";
  }
  return s + "}";
}

std::vector<double> Metrics::LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
          0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30};
}

std::vector<double> Metrics::BatchBuckets() {
  return {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
}

void Metrics::Declare(std::string name, Type type, std::string help, std::vector<double> buckets) {
  std::lock_guard<std::mutex> l(mu_);
  if (Find(name) != nullptr) return;
  families_.push_back(Family{std::move(name), std::move(help), type, std::move(buckets), {}});
}

Metrics::Family* Metrics::Find(std::string_view name) {
  for (auto& f : families_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

void Metrics::Add(std::string_view name, const Labels& labels, double v) {
  std::string key = RenderLabels(labels);
  std::lock_guard<std::mutex> l(mu_);
  if (Family* f = Find(name)) {
    Series& s = f->series[key];
    s.value += v;
    s.used = true;
  }
}

void Metrics::Set(std::string_view name, const Labels& labels, double v) {
  std::string key = RenderLabels(labels);
  std::lock_guard<std::mutex> l(mu_);
  if (Family* f = Find(name)) {
    Series& s = f->series[key];
    s.value = v;
    s.used = true;
  }
}

void Metrics::ClearGauge(std::string_view name) {
  std::lock_guard<std::mutex> l(mu_);
  if (Family* f = Find(name); f != nullptr && f->type == Type::kGauge) f->series.clear();
}

void Metrics::RetainSeries(std::string_view name, const std::string& label,
                           const std::set<std::string>& keep) {
  // A series' key is its rendered label set, {a="x",b="y"}: a kept value's
  // rendering (escaped as the key's) between '{' or ',' and ',' or '}'.
  std::vector<std::string> kept;
  for (const auto& v : keep) {
    std::string one = RenderLabels({{label, v}});
    kept.push_back(one.substr(1, one.size() - 2));
  }
  const std::string prefix = label + "=\"";
  auto has_label = [&](const std::string& key) {
    for (size_t at = key.find(prefix); at != std::string::npos; at = key.find(prefix, at + 1)) {
      if (at > 0 && (key[at - 1] == '{' || key[at - 1] == ',')) return true;
    }
    return false;
  };
  auto is_kept = [&](const std::string& key) {
    for (const auto& k : kept) {
      for (size_t at = key.find(k); at != std::string::npos; at = key.find(k, at + 1)) {
        const size_t end = at + k.size();
        if (at > 0 && (key[at - 1] == '{' || key[at - 1] == ',') && end < key.size() &&
            (key[end] == ',' || key[end] == '}')) {
          return true;
        }
      }
    }
    return false;
  };
  std::lock_guard<std::mutex> l(mu_);
  Family* f = Find(name);
  if (f == nullptr) return;
  for (auto it = f->series.begin(); it != f->series.end();) {
    it = has_label(it->first) && !is_kept(it->first) ? f->series.erase(it) : std::next(it);
  }
}

void Metrics::SetHistogram(std::string_view name, const Labels& labels,
                           const std::vector<uint64_t>& buckets, uint64_t count, double sum) {
  std::string key = RenderLabels(labels);
  std::lock_guard<std::mutex> l(mu_);
  Family* f = Find(name);
  if (f == nullptr || f->type != Type::kHistogram) return;
  Series& s = f->series[key];
  s.bounds = &f->bounds;
  s.buckets.assign(f->bounds.size(), 0);
  for (size_t i = 0; i < s.buckets.size() && i < buckets.size(); ++i) s.buckets[i] = buckets[i];
  s.count = count;
  s.value = sum;
  s.used = true;
}

void Metrics::ObserveLocked(const std::vector<double>& bounds, Series& s, double v) {
  if (s.buckets.empty()) s.buckets.assign(bounds.size(), 0);
  auto it = std::lower_bound(bounds.begin(), bounds.end(), v);
  if (it != bounds.end()) ++s.buckets[static_cast<size_t>(it - bounds.begin())];
  s.value += v;
  ++s.count;
  s.used = true;
}

void Metrics::Observe(std::string_view name, const Labels& labels, double v) {
  std::string key = RenderLabels(labels);
  std::lock_guard<std::mutex> l(mu_);
  if (Family* f = Find(name)) ObserveLocked(f->bounds, f->series[key], v);
}

Metrics::Series* Metrics::Resolve(std::string_view name, const Labels& labels) {
  std::string key = RenderLabels(labels);
  std::lock_guard<std::mutex> l(mu_);
  Family* f = Find(name);
  if (f == nullptr || f->type == Type::kGauge) return nullptr;
  Series& s = f->series[key];
  if (f->type == Type::kHistogram) s.bounds = &f->bounds;
  return &s;
}

void Metrics::Add(Series* s, double v) {
  if (s == nullptr) return;
  std::lock_guard<std::mutex> l(mu_);
  s->value += v;
  s->used = true;
}

void Metrics::Observe(Series* s, double v) {
  if (s == nullptr || s->bounds == nullptr) return;
  std::lock_guard<std::mutex> l(mu_);
  ObserveLocked(*s->bounds, *s, v);
}

void Metrics::CountAndObserve(Series* counter, Series* histogram, double v) {
  std::lock_guard<std::mutex> l(mu_);
  if (counter != nullptr) {
    counter->value += 1;
    counter->used = true;
  }
  if (histogram != nullptr && histogram->bounds != nullptr) {
    ObserveLocked(*histogram->bounds, *histogram, v);
  }
}

std::string Metrics::Render() const {
  std::lock_guard<std::mutex> l(mu_);
  std::string out;
  for (const auto& f : families_) {
    const char* type = f.type == Type::kCounter ? "counter"
                       : f.type == Type::kGauge ? "gauge"
                                                : "histogram";
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", f.name, f.help, f.name, type);
    for (const auto& [labels, s] : f.series) {
      if (!s.used) continue;  // resolved, never updated
      if (f.type != Type::kHistogram) {
        out += fmt::format("{}{} {}\n", f.name, labels, Number(s.value));
        continue;
      }
      uint64_t cum = 0;
      for (size_t i = 0; i < f.bounds.size(); ++i) {
        cum += i < s.buckets.size() ? s.buckets[i] : 0;
        out += fmt::format("{}_bucket{} {}\n", f.name,
                           WithLabel(labels, "le=\"" + Number(f.bounds[i]) + "\""), cum);
      }
      out += fmt::format("{}_bucket{} {}\n", f.name, WithLabel(labels, "le=\"+Inf\""), s.count);
      out += fmt::format("{}_sum{} {}\n", f.name, labels, Number(s.value));
      out += fmt::format("{}_count{} {}\n", f.name, labels, s.count);
    }
  }
  return out;
}

}  // namespace lathe::prom
