#include "lathe/exec/slurm/slurm_state.h"

#include <gtest/gtest.h>

#include <csignal>

namespace lathe::exec {
namespace {

TEST(SlurmState, EveryStateHasItsPlace) {
  for (const char* s :
       {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"}) {
    EXPECT_EQ(ClassifySlurmState(s), SlurmJobClass::kQueued) << s;
  }
  for (const char* s :
       {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "RESIZING", "STAGE_OUT"}) {
    EXPECT_EQ(ClassifySlurmState(s), SlurmJobClass::kRunning) << s;
  }
  for (const char* s : {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL",
                        "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED"}) {
    EXPECT_EQ(ClassifySlurmState(s), SlurmJobClass::kEnded) << s;
  }
  EXPECT_EQ(ClassifySlurmState("CANCELLED by 1001"), SlurmJobClass::kEnded);  // sacct's form
  for (const char* s : {"", "running", "PENDING_SOMETHING_NEW", "UNKNOWN"}) {
    EXPECT_EQ(ClassifySlurmState(s), SlurmJobClass::kUnknown) << s;
  }
}

TEST(SlurmState, SqueueLinesAreReadAndJunkSkipped) {
  auto jobs = ParseSqueue(
      "12|PENDING|Resources\n"
      "  13|RUNNING|None  \n"
      "14|COMPLETED\n"
      "slurm_load_jobs error: something\n"
      "x|RUNNING|None\n"
      "15||None\n"
      "\n");
  ASSERT_EQ(jobs.size(), 3u);
  EXPECT_EQ(jobs["12"].state, "PENDING");
  EXPECT_EQ(jobs["12"].reason, "Resources");
  EXPECT_EQ(jobs["13"].state, "RUNNING");
  EXPECT_EQ(jobs["13"].reason, "None");
  EXPECT_EQ(jobs["14"].state, "COMPLETED");
  EXPECT_EQ(jobs["14"].reason, "");
  EXPECT_TRUE(ParseSqueue("").empty());
}

TEST(SlurmState, TheNoteLeavesOutAReasonOfNone) {
  EXPECT_EQ(SlurmNote({"PENDING", "Resources"}), "PENDING (Resources)");
  EXPECT_EQ(SlurmNote({"PENDING", "QOSMaxGRESPerUser"}), "PENDING (QOSMaxGRESPerUser)");
  EXPECT_EQ(SlurmNote({"RUNNING", "None"}), "RUNNING");
  EXPECT_EQ(SlurmNote({"RUNNING", ""}), "RUNNING");
}

TEST(SlurmState, SacctKeepsEachJobsOwnLine) {
  auto jobs = ParseSacct(
      "12|FAILED|3:0\n"
      "12.batch|FAILED|3:0\n"
      "12.extern|COMPLETED|0:0\n"
      "13|CANCELLED by 1001|0:15\n"
      "14|COMPLETED|0:0\n"
      "junk\n");
  ASSERT_EQ(jobs.size(), 3u);
  EXPECT_EQ(jobs["12"].state, "FAILED");
  EXPECT_EQ(jobs["12"].exit_code, 3);
  EXPECT_EQ(jobs["12"].signal, 0);
  EXPECT_EQ(jobs["13"].state, "CANCELLED");
  EXPECT_EQ(jobs["13"].signal, 15);
  EXPECT_EQ(jobs["14"].exit_code, 0);
}

TEST(SlurmState, AnEndWithoutAnExitRecordBecomesOne) {
  auto rec = [](const char* state, int code, int sig) {
    return SlurmExitRecord({state, code, sig}, true, "", 1000);
  };
  EXPECT_EQ(rec("COMPLETED", 0, 0)->exit_code, 0);
  EXPECT_EQ(rec("FAILED", 3, 0)->exit_code, 3);
  EXPECT_EQ(rec("FAILED", 0, 0)->exit_code, 1);  // failed, the code unknown
  EXPECT_EQ(rec("FAILED", 0, 9)->signal, 9);
  EXPECT_EQ(rec("CANCELLED", 0, 0)->signal, SIGTERM);
  EXPECT_EQ(rec("CANCELLED", 0, 9)->signal, SIGKILL);
  EXPECT_EQ(rec("TIMEOUT", 0, 0)->signal, SIGTERM);
  EXPECT_EQ(rec("PREEMPTED", 0, 0)->signal, SIGTERM);
  EXPECT_EQ(rec("DEADLINE", 0, 0)->signal, SIGTERM);
  EXPECT_EQ(rec("NODE_FAIL", 0, 0)->signal, SIGKILL);
  auto oom = rec("OUT_OF_MEMORY", 0, 0);
  EXPECT_TRUE(oom->oom_killed);
  EXPECT_EQ(oom->signal, SIGKILL);
  EXPECT_FALSE(oom->exit_code.has_value());
  EXPECT_EQ(rec("COMPLETED", 0, 0)->finished_at_ms, 1000);
  EXPECT_FALSE(rec("RUNNING", 0, 0).has_value());
  EXPECT_FALSE(rec("PENDING", 0, 0).has_value());
  EXPECT_FALSE(rec("WHATEVER", 0, 0).has_value());
}

TEST(SlurmState, AJobThatEndedBeforeTheRunStartedIsAStartError) {
  auto e = SlurmExitRecord({"FAILED", 127, 0}, false,
                           "/var/spool/slurmd/job00012/slurm_script: 3: exec: lathe: not found", 5);
  ASSERT_TRUE(e.has_value());
  EXPECT_FALSE(e->exit_code.has_value());
  EXPECT_EQ(e->start_error,
            "the Slurm job ended FAILED before the run started: "
            "/var/spool/slurmd/job00012/slurm_script: 3: exec: lathe: not found");
  EXPECT_EQ(SlurmExitRecord({"BOOT_FAIL", 0, 0}, false, "", 5)->start_error,
            "the Slurm job ended BOOT_FAIL before the run started");
  // Cancelled while queued: stopped, not a failure to start.
  auto cancelled = SlurmExitRecord({"CANCELLED", 0, 0}, false, "", 5);
  EXPECT_EQ(cancelled->start_error, "");
  EXPECT_EQ(cancelled->signal, SIGTERM);
}

}  // namespace
}  // namespace lathe::exec
