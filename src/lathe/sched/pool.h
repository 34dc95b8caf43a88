// Resource arithmetic for the scheduler (internal to sched/; the contract is
// scheduler.h). An Amount is a signed resource vector so that an
// over-committed node (running runs using more than the node has, e.g. after
// the node shrank) simply has a negative free amount: nothing fits, nothing
// underflows. A FreePool is what is free now, with concrete GPU indices.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lathe/sched/scheduler.h"

namespace lathe::sched {

// Tolerance for cpu sums (0.1 + 0.2 cores must fit in 0.3).
inline constexpr double kCpuEpsilon = 1e-9;

struct Amount {
  int64_t gpus = 0;
  double cpus = 0;
  int64_t memory_bytes = 0;
};

Amount operator+(const Amount& a, const Amount& b);
Amount operator-(const Amount& a, const Amount& b);
Amount& operator+=(Amount& a, const Amount& b);
Amount& operator-=(Amount& a, const Amount& b);

// A request as an Amount (memory saturates at 2^60 bytes, so sums never overflow).
Amount ToAmount(const Resources& r);
// Back to Resources, negative parts clamped to 0.
Resources ToResources(const Amount& a);
// Each component clamped below at 0.
Amount ClampNonNegative(const Amount& a);
// How much `have` lacks for `need`, per component; 0 where `need` asks for
// nothing (a request of 0 cpus fits even on an over-committed node) or where
// `have` suffices (cpus within kCpuEpsilon).
Amount Shortfall(const Amount& need, const Amount& have);
// Shortfall(need, have) is zero in every component.
bool Covers(const Amount& have, const Amount& need);
// Some component of `need` is > 0 where `give` is > 0 too: `give` helps.
bool Helps(const Amount& give, const Amount& need);

// "2 GPUs, 1.5 cpus, 16GiB memory"; zero components are left out; "nothing"
// when all are zero.
std::string Describe(const Amount& a);
// For each component where `need` exceeds `have`: "needs 2 GPUs, 1 free",
// joined by "; ". Empty when `have` covers `need`.
std::string DescribeShortfall(const Amount& need, const Amount& have);

struct FreePool {
  std::set<int> gpus;  // usable, unheld, unassigned indices
  double cpus = 0;     // may be negative when over-committed
  int64_t memory_bytes = 0;
  std::vector<std::string> gpu_names;  // NodeState::gpu_names, for typed requests

  Amount amount() const;
  // The free GPUs a request may have: all of them, or those of r.gpu_type.
  std::set<int> GpusFor(const Resources& r) const;
  bool Fits(const Resources& r) const;
  // Takes `r` out: its cpus and memory, and PickGpus(GpusFor(r), r.gpus),
  // which it returns. Requires Fits(r).
  std::vector<int> Take(const Resources& r);
};

// A run that holds resources during one Schedule call: a running run that is
// not stopping and not a victim, or a job started by this Decision.
struct Holder {
  std::string id;
  int priority = 0;
  int64_t started_ms = 0;
  bool preemptible = false;       // false for jobs started by this Decision
  Amount held;                    // usable GPUs it owns, cpus, memory
  std::optional<int64_t> end_ms;  // when it frees up; none = never known
};

// Chooses `count` indices from `free` (requires count <= free.size()),
// deterministically:
//   1. if some run of consecutive free indices holds `count`, the shortest such
//      run (best fit, keeps larger runs whole), lowest start on ties, and the
//      first `count` indices in it;
//   2. otherwise the lowest `count` indices.
// Result ascending.
std::vector<int> PickGpus(const std::set<int>& free, int count);

}  // namespace lathe::sched
