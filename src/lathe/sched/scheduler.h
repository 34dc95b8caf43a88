// The scheduler core: which queued runs start now, on which GPUs, and which
// running runs must be preempted. Pure logic — no I/O, no clock, no threads;
// the caller passes the time. One call computes one Decision from a snapshot
// of the node; the daemon applies it (writes it to SQLite, then acts) and
// calls again whenever something changes. Thread-safe: no shared state.
//
// Contract
//   * Resources: `gpus` is a count (0 allowed), `cpus` a double (0 = no
//     reservation), `memory_bytes` (0 = none). A run gets exactly
//     `gpus` specific indices (CUDA_VISIBLE_DEVICES).
//   * Usable GPUs are [0, gpu_count) minus `unavailable_gpus`. A request that
//     exceeds the usable GPUs, the cpus or the memory of the node can never
//     start: it is listed in Decision::impossible (with Validate's message)
//     and otherwise ignored — the scheduler never waits or loops on it.
//   * Order: priority descending (any int; low 0 < normal 1 < high 2), then
//     `seq` ascending (FIFO), then `id` (only to stay deterministic).
//   * Determinism: the Decision depends only on the inputs as sets (the order
//     of `queued` and `running` does not matter).
//   * Safety: a started run never gets a GPU that is unusable, held by any
//     running run (stopping ones included) or given to another start, and
//     starts never push cpus or memory above the node's totals. A component a
//     job asks 0 of never blocks it, even on an over-committed node.
//
// Algorithm (Schedule)
//   1. Drop impossible requests into Decision::impossible; sort the rest.
//      Each later step first checks the job's quota, its user's then its
//      project's (CheckQuota): a job over either waits kQuota and the step
//      goes on with the next.
//   2. Free pool = usable GPUs not held by any running run, and cpus/memory
//      not used by any running run. "Releasing" pool = what `stopping` runs
//      hold: it frees up soon.
//   3. Claim phase, in queue order. A job that fits the free pool starts
//      (GPUs: see PickGpus in pool.h). A job that does not fit but is covered
//      by free + releasing claims that much (releasing first, so the free
//      pool stays usable by others) and waits kReleasing. Otherwise, if
//      preempting running, preemptible, non-stopping runs of strictly lower
//      priority would cover it, the victims are chosen (lowest priority, then
//      most recently started; an irredundant set, see preempt.h), their
//      resources join the releasing pool, the job claims and waits
//      kPreempting. Because claimed resources are removed before later jobs
//      are looked at — and next round the claimant still comes first in the
//      order — victims' resources stay reserved for the job that preempted
//      them, and no further victims are taken while earlier ones still stop.
//      Claims are what lets several high jobs preempt in the same round.
//   4. The first job that can neither start nor claim becomes the head and
//      gets the one time-based reservation (EASY backfilling: only the head;
//      the jobs behind it get none, so a job behind the head may be delayed
//      by backfill — the price of keeping the node busy).
//      Shadow time S = the earliest time at which free + releasing + what
//      holders with a known end (running runs' deadline_ms, or now +
//      max_duration for jobs started in step 3) have released covers it.
//      Runs with no deadline never free up; claimed resources never do.
//      Extra = what is left over at S after the head takes its share.
//      When S is unknown (infinite) the head gets first claim on everything
//      free or releasing that it needs: extra = max(0, free + releasing - need).
//   5. Backfill phase, for every job after the head: it starts iff it fits the
//      free pool now AND (a) S is known and now + max_duration <= S, or
//      (b) its whole request fits in what remains of Extra (then Extra shrinks).
//      No preemption and no claims after the head.
//   Every job in the queue ends up in exactly one of start, waiting, impossible.
//
// What holds (checked by scheduler_property_test.cc)
//   * A job of strictly higher priority never waits because of a lower job's
//     reservation or claim: every job ahead of the head started or claimed,
//     and no job behind the head outranks it.
//   * A job starts while a higher-priority job waits only if that job holds a
//     claim, or both are at/behind the head and the starting job passed step 5.
//   * The head still fits at S after every start of this Decision (known S),
//     or keeps min(need, free + releasing) per component (unknown S).
//   * Every victim has strictly lower priority than the job it was taken for;
//     that job was not covered by free + releasing, is covered with its
//     victims, and is no longer covered if any one of them is left out.
//   * The head could not claim even by preempting every eligible run.
//   * No user's or project's starts and claims take them past a limit of
//     their Account; a job that waits kQuota would have.
//   * "Outranks" above means comes earlier in the order (priority, then fair
//     share): among jobs of one priority, a job of the user with less usage
//     never waits while a job of a user with more usage starts, unless that
//     job holds a claim, or both are at/behind the head (backfill).
//   * Preemption is unchanged by fair share: victims have strictly lower
//     priority, never the same priority and more usage.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"

namespace lathe::sched {

// Conventional priority levels; any int is allowed.
inline constexpr int kPriorityLow = 0;
inline constexpr int kPriorityNormal = 1;
inline constexpr int kPriorityHigh = 2;

struct Resources {
  int gpus = 0;               // count of whole GPUs
  double cpus = 0;            // cores; 0 = no reservation
  uint64_t memory_bytes = 0;  // 0 = no reservation
  // "" = any GPU; else only GPUs whose name GpuTypeMatches it. A typed job
  // starts when enough matching GPUs are free; it never claims, preempts or
  // becomes the head (its wait is kResources), so it holds no one back.
  std::string gpu_type;
};

struct NodeState {
  int gpu_count = 0;                  // indices 0 .. gpu_count-1
  std::vector<int> unavailable_gpus;  // never assigned; out-of-range ignored
  double cpus = 0;                    // total cores
  uint64_t memory_bytes = 0;          // total memory
  // The GPUs' names by index ("NVIDIA A100-SXM4-80GB"); an index without
  // one matches no gpu_type.
  std::vector<std::string> gpu_names;
};

// Whether a GPU named `gpu_name` is of `type`: `type` is a case-insensitive
// substring of the name ("A100" matches "NVIDIA A100-SXM4-80GB"); an empty
// type matches every GPU.
bool GpuTypeMatches(std::string_view gpu_name, std::string_view type);
// The usable GPUs of `node` whose names match `type`, ascending.
std::vector<int> MatchingGpus(const NodeState& node, std::string_view type);

struct QueuedJob {
  std::string id;
  int priority = kPriorityNormal;
  int64_t seq = 0;  // submit order; FIFO within a priority and a usage
  Resources req;
  std::optional<int64_t> max_duration_ms;  // <= 0 is treated as unknown
  std::string user;                        // the Account it counts against; "" = none
  bool notebook = false;                   // counts against QuotaLimits::notebooks
  std::string project;  // its project's Account (Schedule's `projects`); "" = none
};

// A user's limits; none = unlimited. Counted over the user's active runs
// (starting, running, stopping) and this Decision's starts and claims.
struct QuotaLimits {
  std::optional<int> gpus;          // GPUs held at once
  std::optional<int> runs;          // runs active at once
  std::optional<int> notebooks;     // notebook runs active at once
  std::optional<double> gpu_hours;  // GPU-hours per period_ms (rolling, usage.h)
  int64_t period_ms = 0;            // of gpu_hours
};

// What the caller knows of one user (or one project): limits, what they
// hold now, usage.
struct Account {
  QuotaLimits limits;
  int gpus_held = 0;          // by their active runs
  int runs_held = 0;          // active runs
  int notebooks_held = 0;     // active notebook runs
  double gpu_hours_used = 0;  // in the last limits.period_ms (usage.h GpuHoursIn)
  double share_usage = 0;     // decayed GPU-hours (usage.h DecayedGpuHours)
};
using Accounts = std::map<std::string, Account>;  // by QueuedJob::user (or ::project)

struct RunningJob {
  std::string id;
  int priority = kPriorityNormal;
  int64_t started_ms = 0;
  std::vector<int> gpu_indices;
  Resources req;                       // cpus and memory it holds
  std::optional<int64_t> deadline_ms;  // start + max_duration; none = never ends
  bool preemptible = true;             // false: never chosen as a victim
  bool stopping = false;               // being stopped: frees up soon
};

struct Placement {
  std::string id;
  std::vector<int> gpu_indices;  // ascending; exactly req.gpus of them
};

struct Unschedulable {
  std::string id;
  std::string reason;  // Validate's message, e.g. "gpus: requested 5, this machine has 4"
};

enum class WaitReason {
  kReserved,     // the head: holds the reservation (Decision::reservation)
  kReleasing,    // has claimed resources that stopping runs are releasing
  kPreempting,   // victims were chosen for it in this Decision
  kResources,    // after the head; does not fit the free resources now
  kReservation,  // after the head; fits now but would delay the head
  kQuota,        // its user's or project's quota would be exceeded (Waiting::quota says which)
};

// Which limit holds a job back (kQuota).
enum class QuotaKind { kGpus, kRuns, kNotebooks, kGpuHours };
const char* QuotaKindName(QuotaKind k);  // "gpus", "runs", "notebooks", "gpu_hours"

struct QuotaHit {
  std::string user;
  QuotaKind kind = QuotaKind::kGpus;
  double held = 0;        // GPUs/runs/notebooks held, or GPU-hours used
  double limit = 0;       // the limit
  double asked = 0;       // what the job adds (GPUs; 1 run or notebook; 0 for GPU-hours)
  int64_t period_ms = 0;  // kGpuHours: the window
  std::string project;    // "": the user's limit; else this project's
};

// Stable lower-case name ("reserved", "releasing", ...) for JSON.
const char* WaitReasonName(WaitReason r);

struct Waiting {
  std::string id;
  WaitReason reason;
  std::string detail;                // English, for display: "needs 2 GPUs, 1 free"
  std::vector<std::string> victims;  // kPreempting: the runs preempted for it
  std::optional<QuotaHit> quota;     // kQuota: the limit it is held by
};

struct Reservation {
  std::string id;                       // the head job
  std::optional<int64_t> shadow_ms;     // starts by then if deadlines hold; none = unknown
  Resources extra;                      // left for backfill (b) after starts
  std::vector<std::string> waiting_on;  // running runs whose end it needs
};

// What a Decision leaves: enough for the caller to tell, without another
// Schedule call, that a job queued since cannot change anything until
// something else changes (MightChange). Adding a job to the queue frees
// nothing; it can only start itself (it fits what is free, or claims what
// stopping runs release), preempt, or — placed before the head — change the
// reservation that jobs behind it wait on.
struct Headroom {
  int64_t free_gpus = 0;  // free now plus what stopping runs release (negative: over-committed)
  double free_cpus = 0;
  int64_t free_memory_bytes = 0;
  std::optional<int> lowest_preemptible;  // priority of the lowest preemptible run holding
  // The lowest priority of a waiting job whose wait a job sorted before it
  // could change: one that claims what stopping runs release, one preempting,
  // and the head when a job waits on its reservation.
  std::optional<int> contested_priority;
};

struct Decision {
  std::vector<Placement> start;            // queue order
  std::vector<std::string> preempt;        // victims, in the order chosen
  std::vector<Unschedulable> impossible;   // queue order
  std::vector<Waiting> waiting;            // queue order
  std::optional<Reservation> reservation;  // when some job can neither start nor claim
  Headroom headroom;                       // after the starts, claims and preemptions above
};

// False only when, once the Decision that gave `h` is carried out (its starts
// running, its victims stopping), a Schedule call with `j` added to the queue
// would start, claim and preempt what it would without `j`: `j` fits nothing
// free or released, outranks no preemptible run, and sorts after every job
// whose claim, preemption or reservation it could take over. Conservative:
// true whenever unsure.
bool MightChange(const Headroom& h, const QueuedJob& j);
// "needs 1 GPUs, 0 free": why `j` waits, as the pass would say for a job
// after the head that does not fit.
std::string ShortfallFor(const Headroom& h, const QueuedJob& j);

// Computes one scheduling decision. `now_ms` is the caller's clock.
// `accounts`: quotas and fair-share usage by user (empty: no quotas, FIFO
// within a priority). `projects`: quotas by project (QueuedJob::project);
// a job starts or claims only when its user's account and its project's
// both allow it (the user's is checked first and named when both are hit).
// A project's share_usage is not read: fair share is per user.
Decision Schedule(const NodeState& node, std::vector<QueuedJob> queued,
                  const std::vector<RunningJob>& running, int64_t now_ms,
                  const Accounts& accounts = {}, const Accounts& projects = {});

// The limit of `a` that starting `j` would exceed, given what `a` holds;
// none when it fits. Checked in this order: gpus, runs, notebooks, GPU-hours
// (GPU-hours: only for a job that asks for GPUs, and only once the used
// hours reach the limit — how long the job will run is not known).
std::optional<QuotaHit> CheckQuota(const QueuedJob& j, const Account& a);

// OK when `req` can ever start on `node`; otherwise InvalidArgument naming
// each field and its limit, e.g. "gpus: requested 5, this machine has 4".
// Unavailable GPUs count as absent ("... but only 3 usable"). Negative or
// non-finite values are rejected too. Used at submit time and by Schedule for
// Decision::impossible, so the two always agree.
Status Validate(const NodeState& node, const Resources& req);

// The reason a job waits (or is impossible) in `d`, for display; "" when it
// starts or is not in `d`.
std::string WhyWaiting(const Decision& d, const std::string& id);

}  // namespace lathe::sched
