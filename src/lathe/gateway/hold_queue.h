// The requests a deployment holds while it has no healthy replica (scale
// from zero, every replica restarting): bounded in number (max_held) and in
// time (each until its deadline). Pure bookkeeping: the caller passes the
// time, answers what comes out, and guards the queue with its own lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

namespace lathe::gateway {

template <typename T>
class HoldQueue {
 public:
  // True when `max_held` are held already: the next one is refused.
  bool Full(size_t max_held) const { return items_.size() >= max_held; }
  // Holds `item` until `deadline_ms` (the caller checks Full first).
  void Hold(T item, int64_t deadline_ms) { items_.push_back({deadline_ms, std::move(item)}); }
  // Those whose deadline is at or before `now_ms`, oldest first, taken out.
  std::vector<T> TakeExpired(int64_t now_ms) {
    std::vector<T> out;
    for (auto it = items_.begin(); it != items_.end();) {
      if (it->first <= now_ms) {
        out.push_back(std::move(it->second));
        it = items_.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }
  // Every one, oldest first (a replica became healthy, or the front stops).
  std::vector<T> TakeAll() {
    std::vector<T> out;
    for (auto& [deadline, item] : items_) out.push_back(std::move(item));
    items_.clear();
    return out;
  }
  size_t size() const { return items_.size(); }

 private:
  std::deque<std::pair<int64_t, T>> items_;  // oldest first; deadlines may differ (hold_ms changed)
};

}  // namespace lathe::gateway
