#include "lathe/telemetry/series.h"

#include <algorithm>

#include "lathe/common/json.h"

namespace lathe::telemetry {

void Point::Set(Field f, double v) {
  mean[f] = v;
  max[f] = v;
  known[f] = std::isnan(v) ? 0 : 1;
}

Point Fold(const std::vector<Point>& points, int64_t t_ms) {
  Point out;
  out.t_ms = t_ms;
  out.n = 0;
  std::array<double, kFieldCount> sum{};
  for (const Point& p : points) {
    out.n += p.n;
    out.reasons |= p.reasons;
    for (size_t f = 0; f < kFieldCount; ++f) {
      if (p.known[f] == 0) continue;
      sum[f] += p.mean[f] * p.known[f];
      out.known[f] += p.known[f];
      out.max[f] = std::isnan(out.max[f]) ? p.max[f] : std::max(out.max[f], p.max[f]);
    }
  }
  for (size_t f = 0; f < kFieldCount; ++f) {
    if (out.known[f] > 0) out.mean[f] = sum[f] / out.known[f];
  }
  return out;
}

// A sample: [reasons, v0, …] (null for unknown). A bucket: [reasons, n,
// [mean, max, known] per field].
std::string EncodePoint(const Point& p) {
  auto num = [](double v) { return std::isnan(v) ? Json(nullptr) : Json(v); };
  Json a = Json::array({p.reasons});
  if (p.n == 1) {
    for (size_t f = 0; f < kFieldCount; ++f) a.push_back(num(p.mean[f]));
  } else {
    a.push_back(p.n);
    for (size_t f = 0; f < kFieldCount; ++f) {
      a.push_back(Json::array({num(p.mean[f]), num(p.max[f]), p.known[f]}));
    }
  }
  return a.dump();
}

Result<Point> DecodePoint(const std::string& text, int64_t t_ms) {
  ASSIGN_OR_RETURN(Json a, ParseJson(text));
  auto bad = [&] { return Status::IoError("a telemetry point that does not parse: " + text); };
  auto val = [](const Json& v) { return v.is_number() ? v.get<double>() : kUnknown; };
  if (!a.is_array() || a.empty() || !a[0].is_number_unsigned()) return bad();
  Point p;
  p.t_ms = t_ms;
  p.reasons = a[0].get<uint64_t>();
  if (a.size() == 1 + kFieldCount) {
    for (size_t f = 0; f < kFieldCount; ++f) p.Set(static_cast<Field>(f), val(a[1 + f]));
    return p;
  }
  if (a.size() != 2 + kFieldCount || !a[1].is_number_unsigned()) return bad();
  p.n = a[1].get<uint32_t>();
  for (size_t f = 0; f < kFieldCount; ++f) {
    const Json& e = a[2 + f];
    if (!e.is_array() || e.size() != 3 || !e[2].is_number_unsigned()) return bad();
    p.mean[f] = val(e[0]);
    p.max[f] = val(e[1]);
    p.known[f] = e[2].get<uint32_t>();
  }
  return p;
}

int64_t Series::BucketOf(int64_t t_ms) const {
  int64_t b = tiers_.bucket_ms;
  return (t_ms >= 0 ? t_ms / b : (t_ms - b + 1) / b) * b;
}

// Folds every raw point of the oldest raw point's bucket into that bucket
// (merged with a bucket of the same start already folded, when the count
// bound forced a partial one).
void Series::FoldFront(SeriesChange& change) {
  const int64_t start = BucketOf(raw_.front().t_ms);
  std::vector<Point> group;
  while (!raw_.empty() && BucketOf(raw_.front().t_ms) == start) {
    group.push_back(raw_.front());
    raw_.pop_front();
  }
  if (!buckets_.empty() && buckets_.back().t_ms == start) {
    group.insert(group.begin(), buckets_.back());
    buckets_.pop_back();
  }
  buckets_.push_back(Fold(group, start));
  if (!change.buckets.empty() && change.buckets.back().t_ms == start) change.buckets.pop_back();
  change.buckets.push_back(buckets_.back());
  change.raw_removed_before = start + tiers_.bucket_ms;
}

SeriesChange Series::Add(const Point& p) {
  SeriesChange change;
  const int64_t last = !raw_.empty()       ? raw_.back().t_ms
                       : !buckets_.empty() ? buckets_.back().t_ms
                                           : INT64_MIN;
  if (p.t_ms <= last) return change;
  change.added = true;
  raw_.push_back(p);
  const int64_t newest = p.t_ms;
  // 1. Raw points past the raw tier (by age or count) go into their bucket.
  while (!raw_.empty() && (raw_.size() > tiers_.raw_max_points ||
                           raw_.front().t_ms < newest - tiers_.raw_window_ms)) {
    FoldFront(change);
  }
  // 2. Buckets past the bucket tier go.
  while (!buckets_.empty() && buckets_.front().t_ms < newest - tiers_.bucket_window_ms) {
    change.buckets_removed_before = buckets_.front().t_ms + 1;
    buckets_.pop_front();
  }
  std::erase_if(change.buckets,
                [&](const Point& b) { return b.t_ms < change.buckets_removed_before; });
  return change;
}

void Series::Restore(std::vector<Point> buckets, std::vector<Point> raw) {
  buckets_.assign(buckets.begin(), buckets.end());
  raw_.assign(raw.begin(), raw.end());
}

std::vector<Point> Series::Points(int64_t since_ms) const {
  std::vector<Point> out;
  for (const Point& b : buckets_) {
    if (b.t_ms >= since_ms) out.push_back(b);
  }
  for (const Point& r : raw_) {
    if (r.t_ms >= since_ms) out.push_back(r);
  }
  return out;
}

}  // namespace lathe::telemetry
