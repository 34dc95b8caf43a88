// Victim choice for preemption (internal to sched/; see scheduler.h step 3).
#pragma once

#include <cstddef>
#include <vector>

#include "lathe/sched/pool.h"

namespace lathe::sched {

// Chooses which of `holders` to preempt so that a job of `priority`, short by
// `deficit` (need minus free and releasing, per component), can be covered.
// Returns indices into `holders` in the order chosen, or empty when even all
// eligible holders together do not cover `deficit` (then nobody is preempted:
// stopping runs that would not let the job start only loses work).
//
//   1. Eligible: preemptible and priority strictly below `priority` (jobs
//      started by this Decision are not preemptible).
//   2. Sort by priority ascending, then started_ms descending (least work
//      lost), then id.
//   3. Greedy: take each eligible holder that helps a component still short,
//      until the deficit is covered. A normal run is never taken while low
//      runs still cover the rest.
//   4. Prune: walk the chosen ones from the last (the costliest) to the first,
//      dropping each one the others can do without. The result is minimal:
//      no victim can be removed.
std::vector<size_t> ChooseVictims(const std::vector<Holder>& holders, int priority,
                                  const Amount& deficit);

}  // namespace lathe::sched
