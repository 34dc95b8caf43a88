#include "lathe/sched/preempt.h"

#include <algorithm>
#include <tuple>

namespace lathe::sched {
namespace {

std::vector<size_t> EligibleInOrder(const std::vector<Holder>& holders, int priority) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < holders.size(); ++i) {
    if (holders[i].preemptible && holders[i].priority < priority) idx.push_back(i);
  }
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    const Holder& x = holders[a];
    const Holder& y = holders[b];
    return std::tie(x.priority, y.started_ms, x.id) < std::tie(y.priority, x.started_ms, y.id);
  });
  return idx;
}

bool Covered(const Amount& remaining) { return Covers(Amount{}, remaining); }

Amount Sum(const std::vector<Holder>& holders, const std::vector<size_t>& chosen) {
  Amount total;
  for (size_t i : chosen) total += holders[i].held;
  return total;
}

}  // namespace

std::vector<size_t> ChooseVictims(const std::vector<Holder>& holders, int priority,
                                  const Amount& deficit) {
  // 1-3. Greedy over eligible holders in preference order.
  std::vector<size_t> chosen;
  Amount remaining = deficit;
  for (size_t i : EligibleInOrder(holders, priority)) {
    if (Covered(remaining)) break;
    if (!Helps(holders[i].held, remaining)) continue;
    chosen.push_back(i);
    remaining -= holders[i].held;
  }
  if (!Covered(remaining)) return {};
  // 4. Prune, costliest first.
  for (size_t k = chosen.size(); k-- > 0;) {
    std::vector<size_t> without = chosen;
    without.erase(without.begin() + static_cast<std::ptrdiff_t>(k));
    if (Covers(Sum(holders, without), deficit)) chosen = std::move(without);
  }
  return chosen;
}

}  // namespace lathe::sched
