#include "lathe/deploy/autoscaler.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "lathe/common/units.h"

namespace lathe::deploy {
namespace {

std::string Ms(int64_t ms) { return FormatDuration(std::chrono::milliseconds(ms)); }

// ⌈load / target⌉; a target of 0 or less is taken as 1 (the spec's checks
// refuse it; the reconciler must not divide by it either way).
int Need(int64_t load, double target) {
  if (!(target > 0)) target = 1;
  double n = std::ceil(static_cast<double>(load) / target - 1e-9);
  return n > 1e6 ? 1000000 : static_cast<int>(n);
}

// Starts `since` when `holds` begins and clears it when it stops; whether it
// has held for `delay_ms`.
bool HeldFor(bool holds, int64_t& since, int64_t now_ms, int64_t delay_ms) {
  if (!holds) {
    since = -1;
    return false;
  }
  if (since < 0) since = now_ms;
  return now_ms - since >= delay_ms;
}

void ClearTimers(State& s) {
  s.above_since_ms = -1;
  s.below_since_ms = -1;
}

Event ScaleEvent(std::string id, const LoadFigures& load, const Goal& goal, int from, int to,
                 int64_t held_ms) {
  return Event{"info",
               std::move(id),
               {{"load", std::to_string(load.load)},
                {"queued", std::to_string(load.queued)},
                {"replicas", std::to_string(load.ready)},
                {"target", fmt::format("{}", goal.target_ongoing)},
                {"from", std::to_string(from)},
                {"to", std::to_string(to)},
                {"duration", Ms(held_ms)}}};
}

}  // namespace

void Autoscale(const Goal& goal, const LoadFigures& load, State& s, int64_t now_ms,
               std::vector<Event>& events) {
  const int lo = std::max(0, goal.min_replicas);
  const int hi = std::max(lo, goal.max_replicas);
  // 1. Fixed replicas, or the first call.
  if (lo == hi) {
    s.desired = lo;
    ClearTimers(s);
    s.idle_since_ms = -1;
    return;
  }
  if (s.desired < 0) s.desired = (lo == 0 && load.held > 0) ? 1 : lo;
  s.desired = std::clamp(s.desired, lo, hi);

  // 2. At zero: a held request brings the first replica back at once.
  if (s.desired == 0) {
    ClearTimers(s);
    s.idle_since_ms = -1;
    if (load.held > 0) {
      s.desired = std::max(1, lo);
      events.push_back(
          Event{"info",
                "deploy.scaling_from_zero",
                {{"held", std::to_string(load.held)}, {"to", std::to_string(s.desired)}}});
    }
    return;
  }

  // 3. Min 0 and nothing to do for the grace period: to zero.
  if (HeldFor(lo == 0 && load.any_work == 0, s.idle_since_ms, now_ms, goal.zero_grace_ms)) {
    events.push_back(
        Event{"info",
              "deploy.scaled_to_zero",
              {{"from", std::to_string(s.desired)}, {"duration", Ms(now_ms - s.idle_since_ms)}}});
    s.desired = 0;
    s.idle_since_ms = -1;
    ClearTimers(s);
    return;
  }

  // 4. Up or down by the need, each after its delay.
  if (load.ready == 0) {
    ClearTimers(s);
    return;
  }
  const int need = std::clamp(Need(load.load, goal.target_ongoing), std::max(lo, 1), hi);
  const int from = s.desired;
  const bool up = HeldFor(need > from, s.above_since_ms, now_ms, goal.upscale_delay_ms);
  const bool down = HeldFor(need < from, s.below_since_ms, now_ms, goal.downscale_delay_ms);
  if (up || down) {
    int64_t since = up ? s.above_since_ms : s.below_since_ms;
    s.desired = need;
    events.push_back(ScaleEvent(up ? "deploy.scaled_up" : "deploy.scaled_down", load, goal, from,
                                need, now_ms - since));
    ClearTimers(s);
  }
}

}  // namespace lathe::deploy
