#include "lathe/run/state.h"

#include <utility>

namespace lathe::run {
namespace {
constexpr std::pair<RunState, std::string_view> kNames[] = {
    {RunState::kQueued, "queued"},       {RunState::kStarting, "starting"},
    {RunState::kRunning, "running"},     {RunState::kStopping, "stopping"},
    {RunState::kSucceeded, "succeeded"}, {RunState::kFailed, "failed"},
    {RunState::kStopped, "stopped"},     {RunState::kPreempted, "preempted"},
    {RunState::kLost, "lost"},
};
}  // namespace

std::string_view StateName(RunState s) {
  for (const auto& [state, name] : kNames) {
    if (state == s) return name;
  }
  return "unknown";
}

std::optional<RunState> StateFromName(std::string_view name) {
  for (const auto& [state, n] : kNames) {
    if (n == name) return state;
  }
  return std::nullopt;
}

bool IsTerminal(RunState s) {
  return s == RunState::kSucceeded || s == RunState::kFailed || s == RunState::kStopped ||
         s == RunState::kPreempted || s == RunState::kLost;
}

bool IsActive(RunState s) {
  return s == RunState::kStarting || s == RunState::kRunning || s == RunState::kStopping;
}

bool CanTransition(RunState from, RunState to) {
  using S = RunState;
  switch (from) {
    case S::kQueued:
      return to == S::kStarting || to == S::kStopped;
    case S::kStarting:
      // -> queued: the daemon died before the process was started.
      return to == S::kRunning || to == S::kFailed || to == S::kStopping || to == S::kLost ||
             to == S::kQueued;
    case S::kRunning:
      // -> preempted: a pool's cluster preempted it (or lost its node) without a stop of ours.
      return to == S::kStopping || to == S::kSucceeded || to == S::kFailed || to == S::kLost ||
             to == S::kPreempted;
    case S::kStopping:
      return to == S::kStopped || to == S::kPreempted || to == S::kFailed || to == S::kSucceeded ||
             to == S::kLost;
    case S::kPreempted:
    case S::kFailed:
    case S::kLost:
    case S::kSucceeded:
    case S::kStopped:
      // requeue after preemption, a retry, or a notebook restarted
      return to == S::kQueued;
  }
  return false;
}

std::string_view StopIntentName(StopIntent i) {
  switch (i) {
    case StopIntent::kUser:
      return "user";
    case StopIntent::kPreempt:
      return "preempt";
    case StopIntent::kTimeout:
      return "timeout";
    case StopIntent::kIdle:
      return "idle";
    case StopIntent::kNone:
      break;
  }
  return "";
}

StopIntent StopIntentFromName(std::string_view name) {
  for (StopIntent i :
       {StopIntent::kUser, StopIntent::kPreempt, StopIntent::kTimeout, StopIntent::kIdle}) {
    if (StopIntentName(i) == name) return i;
  }
  return StopIntent::kNone;
}

std::string_view RunKindName(RunKind k) {
  switch (k) {
    case RunKind::kNotebook:
      return "notebook";
    case RunKind::kService:
      return "service";
    case RunKind::kJob:
      break;
  }
  return "job";
}

std::optional<RunKind> RunKindFromName(std::string_view name) {
  for (RunKind k : {RunKind::kJob, RunKind::kNotebook, RunKind::kService}) {
    if (RunKindName(k) == name) return k;
  }
  return std::nullopt;
}

}  // namespace lathe::run
