// The run lifecycle. Every transition is committed to the state store before
// it is acted on.
//
//   queued ─▶ starting ─▶ running ─▶ stopping ─▶ stopped | preempted | failed
//                │           │                       (preempted, or failed with
//                │           └──▶ succeeded | failed | lost      retries left,
//                └──▶ failed (could not start)                   go back to queued)
//   queued ─▶ stopped (cancelled before it started)
//   starting ─▶ queued (the daemon died before the process was started)
//   running ─▶ preempted (a pool's cluster preempted it or lost its node)
#pragma once

#include <optional>
#include <string_view>

namespace lathe::run {

enum class RunState {
  kQueued,
  kStarting,
  kRunning,
  kStopping,
  kSucceeded,
  kFailed,
  kStopped,
  kPreempted,
  kLost,
};

std::string_view StateName(RunState s);
std::optional<RunState> StateFromName(std::string_view name);

// True for succeeded, failed, stopped, preempted and lost. (A preempted or
// retried run is requeued by a new transition preempted/failed -> queued.)
bool IsTerminal(RunState s);
// True for starting, running and stopping: a process may exist.
bool IsActive(RunState s);

// Whether `from -> to` is an allowed transition (see the diagram above).
bool CanTransition(RunState from, RunState to);

// Why the daemon is stopping a run; decides the state it ends in (stopped,
// preempted and requeued, failed for exceeding max_duration).
// kIdle: a notebook idle for its whole idle period (daemon/notebook_watch.h).
enum class StopIntent { kNone, kUser, kPreempt, kTimeout, kIdle };
std::string_view StopIntentName(StopIntent i);  // "", "user", "preempt", "timeout", "idle"
// Unknown text (a newer daemon's) reads as kNone.
StopIntent StopIntentFromName(std::string_view name);

// What a run is. Jobs end; notebooks and services run until stopped.
enum class RunKind { kJob, kNotebook, kService };
std::string_view RunKindName(RunKind k);  // "job", "notebook", "service"
std::optional<RunKind> RunKindFromName(std::string_view name);

}  // namespace lathe::run
