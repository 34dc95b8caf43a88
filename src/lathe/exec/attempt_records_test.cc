#include "lathe/exec/attempt_records.h"

#include <gtest/gtest.h>

namespace lathe::exec {
namespace {

LaunchConfig Minimal() {
  LaunchConfig c;
  c.run_id = "r-x";
  c.attempt = 1;
  c.argv = {"true"};
  return c;
}

TEST(AttemptRecords, InheritEnvRoundTripsAndIsOptional) {
  LaunchConfig c = Minimal();
  c.inherit_env = {"CUDA_VISIBLE_DEVICES", "SLURM_*"};
  auto back = LaunchFromJson(LaunchToJson(c));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->inherit_env, c.inherit_env);
  Json old = LaunchToJson(Minimal());
  old.erase("inherit_env");  // written by a Lathe from before the field
  auto older = LaunchFromJson(old);
  ASSERT_TRUE(older.ok()) << older.status().ToString();
  EXPECT_TRUE(older->inherit_env.empty());
}

TEST(AttemptRecords, InheritedVariablesGoOverTheLaunchEnvironmentByNameOrPrefix) {
  std::map<std::string, std::string> env = {{"CUDA_VISIBLE_DEVICES", ""}, {"HOME", "/home/u"}};
  auto out = InheritEnvironment(env, {"CUDA_VISIBLE_DEVICES", "SLURM_*"},
                                {"CUDA_VISIBLE_DEVICES=0,1", "SLURM_JOB_ID=42", "SLURM_X=a=b",
                                 "SLURMD_NODENAME=n1", "HOME=/root", "PATH=/bin", "junk", "=x"});
  EXPECT_EQ(out, (std::map<std::string, std::string>{{"CUDA_VISIBLE_DEVICES", "0,1"},
                                                     {"HOME", "/home/u"},
                                                     {"SLURM_JOB_ID", "42"},
                                                     {"SLURM_X", "a=b"}}));
  // Not in the monitor's environment: the launch config's value stays.
  EXPECT_EQ(InheritEnvironment(env, {"CUDA_VISIBLE_DEVICES"}, {}), env);
}

TEST(AttemptRecords, WhatNeedsRootIsRefusedNamingTheField) {
  EXPECT_TRUE(CheckUnprivilegedLaunch(Minimal()).ok());
  LaunchConfig shm = Minimal();
  shm.shm_bytes = 1 << 20;
  LaunchConfig net = Minimal();
  net.isolated_network = true;
  LaunchConfig ro = Minimal();
  ro.readonly_paths = {"/x"};
  for (const auto& [c, field] : {std::pair{shm, "shm_bytes"}, std::pair{net, "isolated_network"},
                                 std::pair{ro, "readonly_paths"}}) {
    Status st = CheckUnprivilegedLaunch(c);
    EXPECT_EQ(st.code(), Code::kFailedPrecondition);
    EXPECT_NE(st.message().find(field), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace lathe::exec
