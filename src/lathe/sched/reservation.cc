#include "lathe/sched/reservation.h"

#include <algorithm>
#include <limits>
#include <tuple>

namespace lathe::sched {
namespace {

// Holders with a known end, by (end, id), ends clamped to now.
std::vector<const Holder*> ByEnd(const std::vector<Holder>& holders) {
  std::vector<const Holder*> out;
  for (const Holder& h : holders) {
    if (h.end_ms) out.push_back(&h);
  }
  std::sort(out.begin(), out.end(), [](const Holder* a, const Holder* b) {
    return std::tie(*a->end_ms, a->id) < std::tie(*b->end_ms, b->id);
  });
  return out;
}

// Holders (from `pool`) that hold something in a component where `avail`
// falls short of `need`, sorted by id.
std::vector<std::string> Blockers(const std::vector<const Holder*>& pool, const Amount& need,
                                  const Amount& avail) {
  Amount shortfall = Shortfall(need, avail);
  std::vector<std::string> ids;
  for (const Holder* h : pool) {
    if (Helps(h->held, shortfall)) ids.push_back(h->id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace

Shadow ComputeShadow(const Amount& need, const Amount& avail_now,
                     const std::vector<Holder>& holders, int64_t now_ms) {
  Shadow s;
  // 1. Walk known ends.
  std::vector<const Holder*> by_end = ByEnd(holders);
  Amount avail = avail_now;
  for (size_t i = 0; i < by_end.size(); ++i) {
    int64_t t = std::max(*by_end[i]->end_ms, now_ms);
    avail += by_end[i]->held;
    bool last_at_t = i + 1 == by_end.size() || std::max(*by_end[i + 1]->end_ms, now_ms) != t;
    if (!last_at_t || !Covers(avail, need)) continue;
    // 2. Known shadow time.
    s.shadow_ms = t;
    s.extra = ClampNonNegative(avail - need);
    std::vector<const Holder*> ending(by_end.begin(),
                                      by_end.begin() + static_cast<std::ptrdiff_t>(i + 1));
    s.waiting_on = Blockers(ending, need, avail_now);
    return s;
  }
  // 3. Unknown shadow time.
  s.extra = ClampNonNegative(avail_now - need);
  std::vector<const Holder*> endless;
  for (const Holder& h : holders) {
    if (!h.end_ms) endless.push_back(&h);
  }
  s.waiting_on = Blockers(endless, need, avail_now);
  return s;
}

BackfillVerdict CheckBackfill(const QueuedJob& job, const Shadow& shadow, int64_t now_ms) {
  std::optional<int64_t> end = EndTime(now_ms, job.max_duration_ms);
  if (shadow.shadow_ms && end && *end <= *shadow.shadow_ms)
    return BackfillVerdict::kEndsBeforeShadow;
  if (Covers(shadow.extra, ToAmount(job.req))) return BackfillVerdict::kUsesExtra;
  return BackfillVerdict::kWouldDelay;
}

std::optional<int64_t> EndTime(int64_t now_ms, const std::optional<int64_t>& duration_ms) {
  if (!duration_ms || *duration_ms <= 0) return std::nullopt;
  if (now_ms > std::numeric_limits<int64_t>::max() - *duration_ms) {
    return std::numeric_limits<int64_t>::max();
  }
  return now_ms + *duration_ms;
}

}  // namespace lathe::sched
