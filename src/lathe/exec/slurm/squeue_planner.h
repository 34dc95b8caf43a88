// When the Slurm backend asks squeue again: at once after a change it made
// (a Launch, a Signal) or saw (a job changed state or left the queue), then
// with a wait that doubles while nothing changes, from min_interval_ms up
// to max_interval_ms. Between two asks the backend answers from what it
// last heard. Pure: the caller passes the time (a monotonic clock, ms).
// Not thread-safe; the backend holds its mutex around it.
#pragma once

#include <cstdint>
#include <limits>

namespace lathe::exec {

class SqueuePlanner {
 public:
  struct Options {
    int64_t min_interval_ms = 2000;
    int64_t max_interval_ms = 60000;
  };
  SqueuePlanner() : SqueuePlanner(Options{}) {}
  explicit SqueuePlanner(Options options) : opts_(options), wait_ms_(options.min_interval_ms) {}

  // Whether squeue should be asked now.
  bool Due(int64_t now_ms) const { return now_ms >= next_ms_; }
  // squeue was asked at `now_ms` (or failed); `changed`: its answer differed
  // from the last (a state, a job gone). Schedules the next ask.
  void Asked(int64_t now_ms, bool changed) {
    if (changed) wait_ms_ = opts_.min_interval_ms;
    next_ms_ = now_ms + wait_ms_;
    wait_ms_ = wait_ms_ > opts_.max_interval_ms / 2 ? opts_.max_interval_ms : wait_ms_ * 2;
  }
  // Something changed on our side (a job submitted, signalled): ask at once,
  // and soon again.
  void Reset() {
    wait_ms_ = opts_.min_interval_ms;
    next_ms_ = std::numeric_limits<int64_t>::min();
  }
  // When the next ask is due (for tests and logs).
  int64_t next_ms() const { return next_ms_; }

 private:
  const Options opts_;
  int64_t wait_ms_;  // the wait after the next ask, unless it sees a change
  int64_t next_ms_ = std::numeric_limits<int64_t>::min();
};

}  // namespace lathe::exec
