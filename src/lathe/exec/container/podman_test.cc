#include "lathe/exec/container/podman.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace lathe::exec {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

PodmanSetup TestSetup() {
  PodmanSetup s;
  s.dir = "/var/lib/lathe/images";
  return s;
}

ContainerRun TestRun() {
  ContainerRun r;
  r.run_id = "r-abc";
  r.attempt = 2;
  r.image_id = std::string(64, 'a');
  r.uid = 1001;
  r.gid = 1001;
  r.groups = {1001, 27};
  r.workdir = "/home/u/proj";
  r.env_file = "/run/a/container.env";
  r.mounts = {{"/home/u/proj", "/run/a/mnt/0", false}, {"/home/u/ro", "/run/a/mnt/1", true}};
  r.argv = {"python3", "-c", "print('hi; $(rm -rf /)')"};
  return r;
}

// The value after `flag` in argv, or "" when absent.
std::vector<std::string> ValuesOf(const std::vector<std::string>& argv, const std::string& flag) {
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == flag) out.push_back(argv[i + 1]);
  }
  return out;
}

TEST(PodmanRun, RunsAsTheUserWithoutPrivileges) {
  ContainerLaunch c = PodmanRun(TestSetup(), TestRun());
  EXPECT_THAT(ValuesOf(c.argv, "--user"), ElementsAre("1001:1001"));
  EXPECT_THAT(ValuesOf(c.argv, "--group-add"), ElementsAre("27"));  // the primary is --user's
  EXPECT_THAT(ValuesOf(c.argv, "--security-opt"), ElementsAre("no-new-privileges"));
  EXPECT_THAT(ValuesOf(c.argv, "--cap-drop"), ElementsAre("all"));
  EXPECT_THAT(ValuesOf(c.argv, "--name"), ElementsAre("lathe-r-abc-2"));
  EXPECT_THAT(ValuesOf(c.argv, "--network"), ElementsAre("host"));
  EXPECT_THAT(ValuesOf(c.argv, "--pull"), ElementsAre("never"));
  EXPECT_THAT(ValuesOf(c.argv, "--umask"), ElementsAre("0022"));
}

TEST(PodmanRun, MountsTheStagesAtTheUsersPathsWithoutSuidOrDevices) {
  ContainerLaunch c = PodmanRun(TestSetup(), TestRun());
  EXPECT_THAT(ValuesOf(c.argv, "--volume"), ElementsAre("/run/a/mnt/0:/home/u/proj:nosuid,nodev",
                                                        "/run/a/mnt/1:/home/u/ro:ro,nosuid,nodev"));
  EXPECT_EQ(c.mounts.size(), 2u);
  EXPECT_THAT(ValuesOf(c.argv, "--workdir"), ElementsAre("/home/u/proj"));
}

TEST(PodmanRun, TheCommandComesLastAndWhole) {
  ContainerRun r = TestRun();
  ContainerLaunch c = PodmanRun(TestSetup(), r);
  ASSERT_GE(c.argv.size(), 4u);
  // The image's entrypoint is cleared, then the image, then argv untouched.
  std::vector<std::string> tail(c.argv.end() - 6, c.argv.end());
  EXPECT_THAT(tail, ElementsAre("--entrypoint", "", r.image_id, "python3", "-c",
                                "print('hi; $(rm -rf /)')"));
  EXPECT_EQ(c.argv[0], "/usr/bin/podman");
  EXPECT_THAT(ValuesOf(c.argv, "--root"), ElementsAre("/var/lib/lathe/images/graph"));
}

TEST(PodmanRun, PodmansEnvironmentIsItsOwn) {
  ContainerLaunch c = PodmanRun(TestSetup(), TestRun());
  EXPECT_EQ(c.env.at("CONTAINERS_CONF"), "/var/lib/lathe/images/containers.conf");
  EXPECT_EQ(c.env.at("TMPDIR"), "/var/lib/lathe/images/tmp");
  EXPECT_EQ(c.env.count("LD_PRELOAD"), 0u);
  EXPECT_THAT(ValuesOf(c.argv, "--env-file"), ElementsAre("/run/a/container.env"));
  // No value of the run's environment is on podman's command line (ps shows it).
  EXPECT_TRUE(ValuesOf(c.argv, "--env").empty());
}

TEST(PodmanRun, CleanupRemovesTheContainerByName) {
  ContainerLaunch c = PodmanRun(TestSetup(), TestRun());
  ASSERT_FALSE(c.cleanup_argv.empty());
  EXPECT_EQ(c.cleanup_argv.back(), "lathe-r-abc-2");
  EXPECT_NE(std::find(c.cleanup_argv.begin(), c.cleanup_argv.end(), "rm"), c.cleanup_argv.end());
}

TEST(PodmanRun, OptionalPartsOnlyWhenAsked) {
  ContainerRun r = TestRun();
  r.shm_bytes = 1 << 30;
  r.cgroup_parent = "/lathe/r-abc-2";
  r.devices = {"/dev/nvidia1", "/dev/nvidiactl"};
  ContainerLaunch c = PodmanRun(TestSetup(), r);
  EXPECT_THAT(ValuesOf(c.argv, "--shm-size"), ElementsAre("1073741824"));
  EXPECT_THAT(ValuesOf(c.argv, "--cgroup-parent"), ElementsAre("/lathe/r-abc-2"));
  EXPECT_THAT(ValuesOf(c.argv, "--device"), ElementsAre("/dev/nvidia1", "/dev/nvidiactl"));
  ContainerLaunch plain = PodmanRun(TestSetup(), TestRun());
  EXPECT_TRUE(ValuesOf(plain.argv, "--shm-size").empty());
  EXPECT_TRUE(ValuesOf(plain.argv, "--device").empty());
}

TEST(ContainerEnvFile, OneLinePerVariableAndPathLeftToTheImage) {
  auto text = ContainerEnvFile({{"A", "1"}, {"PATH", "/usr/bin"}, {"B", "x=y z"}, {"E", ""}},
                               /*keep_path=*/false);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "A=1\nB=x=y z\nE=\n");
  auto kept = ContainerEnvFile({{"PATH", "/opt/bin"}}, /*keep_path=*/true);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, "PATH=/opt/bin\n");
}

TEST(ContainerEnvFile, ALineBreakIsRefusedNamingTheVariable) {
  auto text = ContainerEnvFile({{"KEY", "-----BEGIN\nxyz"}}, false);
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(text.status().ToString(), HasSubstr("KEY"));
}

TEST(DecodePodmanExit, SignalsFromStatusesAbove128) {
  EXPECT_EQ(DecodePodmanExit(0).code, 0);
  EXPECT_EQ(DecodePodmanExit(3).code, 3);
  EXPECT_EQ(DecodePodmanExit(137).signal, 9);
  EXPECT_FALSE(DecodePodmanExit(137).code.has_value());
  EXPECT_EQ(DecodePodmanExit(143).signal, 15);
  EXPECT_EQ(DecodePodmanExit(127).code, 127);
}

TEST(ContainersConf, CarriesTheLimitsGiven) {
  std::string conf = ContainersConf(TestSetup(), {1024, 20000}, {os::kNoLimit, os::kNoLimit});
  EXPECT_THAT(conf, HasSubstr("nofile=1024:20000"));
  EXPECT_THAT(conf, HasSubstr("nproc=32768:32768"));  // podman's own ceiling
  EXPECT_THAT(ContainersConf(TestSetup(), {1, 1}, {100, 200}), HasSubstr("nproc=100:200"));
  // Not /run/libpod, which every podman on the machine shares.
  EXPECT_THAT(conf, HasSubstr("tmp_dir = \"/var/lib/lathe/images/libpod\""));
  EXPECT_THAT(conf, HasSubstr("cgroup_manager = \"cgroupfs\""));
  EXPECT_THAT(conf, HasSubstr("runtime = \"runc\""));
}

TEST(PodmanBuild, RunsAsTheUserInTheirOwnStore) {
  BuildStore b;
  b.root = "/var/lib/lathe/image-builds";
  b.user = {1001, 1002, {1002, 27}, "u", "/home/u", "/bin/sh"};
  const auto argv = PodmanBuild(b, "/home/u/ctx", "/home/u/ctx/Containerfile", b.TmpDir() + "/iid");
  // setpriv first: nothing of the build runs as root.
  ASSERT_GE(argv.size(), 4u);
  EXPECT_EQ(argv[0], "/usr/bin/setpriv");
  EXPECT_EQ(argv[1], "--reuid=1001");
  EXPECT_EQ(argv[2], "--regid=1002");
  const auto podman = std::find(argv.begin(), argv.end(), "/usr/bin/podman");
  ASSERT_NE(podman, argv.end());
  EXPECT_EQ(*(podman - 1), "--");
  EXPECT_THAT(std::vector<std::string>(podman, argv.end()),
              ElementsAre("/usr/bin/podman", "--root", "/var/lib/lathe/image-builds/1001/graph",
                          "--runroot", "/var/lib/lathe/image-builds/1001/run", "--tmpdir",
                          "/var/lib/lathe/image-builds/1001/libpod", "--storage-driver", "vfs",
                          "--storage-opt", "vfs.ignore_chown_errors=true", "build", "--network",
                          "host", "--pull=never", "--layers", "--iidfile",
                          "/var/lib/lathe/image-builds/1001/tmp/iid", "--file",
                          "/home/u/ctx/Containerfile", "/home/u/ctx"));
  const auto env = BuildPodmanEnvironment(b);
  EXPECT_EQ(env.at("HOME"), b.Dir());
  EXPECT_EQ(env.at("XDG_RUNTIME_DIR"), "/var/lib/lathe/image-builds/1001/xdg");
  EXPECT_EQ(env.at("CONTAINERS_STORAGE_CONF"), "/var/lib/lathe/image-builds/storage.conf");
  EXPECT_EQ(env.count("LD_PRELOAD"), 0u);
  EXPECT_THAT(BuildStorageConf(), HasSubstr("ignore_chown_errors = \"true\""));
}

}  // namespace
}  // namespace lathe::exec
