// The autoscaler: how many replicas a deployment wants, from the load its
// ready replicas carry. Pure; part of Reconcile (reconcile.h), apart so it
// can be tested on its own.
//
// Load = Σ over ready replicas of max(in flight at the front, running +
// queued as the replica reports them) + the requests the front holds (a
// request queued in a replica is in flight at the front too: counted once,
// and a replica whose own figures say more than the front's counts them);
// need = ⌈load / target_ongoing⌉, within [max(min, 1), max].
//   - fixed replicas (min == max): desired = min, load is not looked at.
//   - not yet set (-1): min; max(min, 1) when min is 0 and requests are held.
//   - need > desired without a break for upscale_delay_ms → desired = need.
//   - need < desired without a break for downscale_delay_ms → desired = need.
//   - min 0: no request anywhere (none in flight or queued at any replica,
//     none held) for zero_grace_ms → desired 0; at 0, a held request →
//     max(1, min) at once.
// A timer starts when its condition begins to hold and is cleared the moment
// it stops holding, or when desired changes. With no ready replica there is
// nothing to measure: desired stays and the up/down timers are cleared.
#pragma once

#include <cstdint>
#include <vector>

#include "lathe/deploy/reconcile.h"

namespace lathe::deploy {

struct LoadFigures {
  int ready = 0;         // ready replicas in traffic
  int64_t load = 0;      // Σ max(in flight, running + queued) over them, plus held requests
  int64_t any_work = 0;  // the same Σ over every live replica, plus held requests
  int64_t held = 0;      // requests the front holds
  int64_t queued = 0;    // Σ queued over the ready replicas, as they report it (part of load)
};

// Updates state.desired and the timers; appends deploy.scaled_* events.
void Autoscale(const Goal& goal, const LoadFigures& load, State& state, int64_t now_ms,
               std::vector<Event>& events);

}  // namespace lathe::deploy
