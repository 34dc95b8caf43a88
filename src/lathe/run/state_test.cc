#include "lathe/run/state.h"

#include <gtest/gtest.h>

#include <set>
#include <utility>

namespace lathe::run {
namespace {

constexpr RunState kAll[] = {RunState::kQueued,   RunState::kStarting,  RunState::kRunning,
                             RunState::kStopping, RunState::kSucceeded, RunState::kFailed,
                             RunState::kStopped,  RunState::kPreempted, RunState::kLost};

TEST(RunState, NamesRoundTrip) {
  for (RunState s : kAll) EXPECT_EQ(StateFromName(StateName(s)), s);
  EXPECT_FALSE(StateFromName("bogus").has_value());
}

TEST(RunState, ExactlyTheDocumentedTransitions) {
  using S = RunState;
  const std::set<std::pair<S, S>> allowed = {
      {S::kQueued, S::kStarting},    {S::kQueued, S::kStopped},     {S::kStarting, S::kRunning},
      {S::kStarting, S::kFailed},    {S::kStarting, S::kStopping},  {S::kStarting, S::kLost},
      {S::kStarting, S::kQueued},    {S::kRunning, S::kStopping},   {S::kRunning, S::kSucceeded},
      {S::kRunning, S::kFailed},     {S::kRunning, S::kLost},       {S::kRunning, S::kPreempted},
      {S::kStopping, S::kStopped},   {S::kStopping, S::kPreempted}, {S::kStopping, S::kFailed},
      {S::kStopping, S::kSucceeded}, {S::kStopping, S::kLost},      {S::kPreempted, S::kQueued},
      {S::kFailed, S::kQueued},      {S::kLost, S::kQueued},        {S::kSucceeded, S::kQueued},
      {S::kStopped, S::kQueued},
  };
  for (S from : kAll) {
    for (S to : kAll) {
      EXPECT_EQ(CanTransition(from, to), allowed.count({from, to}) == 1)
          << StateName(from) << " -> " << StateName(to);
    }
  }
}

TEST(RunState, TerminalAndActiveArePartitions) {
  for (RunState s : kAll) {
    EXPECT_FALSE(IsTerminal(s) && IsActive(s)) << StateName(s);
    EXPECT_EQ(!IsTerminal(s) && !IsActive(s), s == RunState::kQueued) << StateName(s);
  }
  // A notebook that ended may be restarted (lathe notebook restart).
  EXPECT_TRUE(CanTransition(RunState::kStopped, RunState::kQueued));
  EXPECT_FALSE(CanTransition(RunState::kStopped, RunState::kRunning));
}

TEST(StopIntent, NamesRoundTripAndUnknownTextIsNone) {
  for (StopIntent i : {StopIntent::kNone, StopIntent::kUser, StopIntent::kPreempt,
                       StopIntent::kTimeout, StopIntent::kIdle}) {
    EXPECT_EQ(StopIntentFromName(StopIntentName(i)), i);
  }
  EXPECT_EQ(StopIntentName(StopIntent::kPreempt), "preempt");  // stored in the database as text
  EXPECT_EQ(StopIntentFromName("drain"), StopIntent::kNone);
}

TEST(RunKind, NamesRoundTrip) {
  for (RunKind k : {RunKind::kJob, RunKind::kNotebook, RunKind::kService}) {
    EXPECT_EQ(RunKindFromName(RunKindName(k)), k);
  }
  EXPECT_EQ(RunKindName(RunKind::kJob), "job");
  EXPECT_FALSE(RunKindFromName("batch").has_value());
}

}  // namespace
}  // namespace lathe::run
