// The run lifecycle. Every transition is committed to the state store before
// it is acted on.
//
//   queued ─▶ starting ─▶ running ─▶ stopping ─▶ stopped | preempted | failed
//                │           │                       (preempted, or failed with
//                │           └──▶ succeeded | failed | lost      retries left,
//                └──▶ failed (could not start)                   go back to queued)
//   queued ─▶ stopped (cancelled before it started)
//   starting ─▶ queued (the daemon died before the process was started)
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

}  // namespace lathe::run
