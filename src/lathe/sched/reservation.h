// The head's reservation and the backfill test (internal to sched/; see
// scheduler.h steps 4 and 5).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lathe/sched/pool.h"

namespace lathe::sched {

struct Shadow {
  std::optional<int64_t> shadow_ms;     // none = unknown (infinite)
  Amount extra;                         // never negative
  std::vector<std::string> waiting_on;  // holders whose end the head needs
};

// Reservation for a head needing `need` when `avail_now` (free + releasing,
// unclaimed) does not cover it.
//   1. Walk holders with a known end, by (end, id); an end before `now_ms`
//      counts as `now_ms`. Add each one's resources to the available amount;
//      the first end at which it covers `need` is the shadow time S (holders
//      ending at the same instant are all added).
//   2. Known S: extra = available at S - need; waiting_on = holders ending by S
//      that hold something the head is short of.
//   3. Unknown S: extra = max(0, avail_now - need) per component (first claim on
//      everything free); waiting_on = holders without a known end that hold
//      something the head is short of.
Shadow ComputeShadow(const Amount& need, const Amount& avail_now,
                     const std::vector<Holder>& holders, int64_t now_ms);

enum class BackfillVerdict {
  kEndsBeforeShadow,  // (a): known S and now + max_duration <= S
  kUsesExtra,         // (b): the request fits in shadow.extra
  kWouldDelay,        // neither: it would delay the head
};

// Whether `job` (which fits the free pool) may start without delaying the
// head. Prefers (a), which does not use up extra.
BackfillVerdict CheckBackfill(const QueuedJob& job, const Shadow& shadow, int64_t now_ms);

// now + duration, saturating; none when the duration is unknown or <= 0.
std::optional<int64_t> EndTime(int64_t now_ms, const std::optional<int64_t>& duration_ms);

}  // namespace lathe::sched
