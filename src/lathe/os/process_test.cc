#include "lathe/os/process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "lathe/os/command.h"
#include "lathe/os/files.h"

namespace lathe::os {
namespace {

TEST(Process, SelfIsAliveWithItsStartTime) {
  auto st = ProcessStartTime(getpid());
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(ProcessAlive(getpid(), st));
  EXPECT_FALSE(ProcessAlive(getpid(), *st + 1));  // a reused pid would differ
}

TEST(Process, TheOpenFileLimitIsRaisedNeverLowered) {
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  if (old.rlim_max < 512) GTEST_SKIP() << "hard open-file limit below 512";
  rlimit low{256, old.rlim_max};
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  EXPECT_EQ(RaiseOpenFileLimit(100), 256u);  // never lowered
  EXPECT_EQ(RaiseOpenFileLimit(512), 512u);  // within the hard limit: anyone may
  rlimit now{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &now), 0);
  EXPECT_EQ(now.rlim_cur, 512u);
  EXPECT_EQ(now.rlim_max, old.rlim_max);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &old), 0);
}

TEST(Process, SelfPidIsTheOneProcSelfNames) {
  auto self = ReadLink("/proc/self");
  ASSERT_TRUE(self.ok()) << self.status().ToString();
  EXPECT_EQ(std::to_string(SelfPid()), *self);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(SelfPid() == ::getpid() && SelfPid() != ::getppid() ? 0 : 1);
  int ws = 0;
  ASSERT_EQ(::waitpid(child, &ws, 0), child);
  EXPECT_TRUE(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);  // a child's is its own
}

TEST(Process, CurrentDirFollowsChdirAndFailsOnceTheDirectoryIsGone) {
  auto before = CurrentDir();
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  char tmpl[] = "/tmp/lathe-cwd-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  ASSERT_EQ(::chdir(tmpl), 0);
  auto inside = CurrentDir();
  ASSERT_EQ(::rmdir(tmpl), 0);
  auto removed = CurrentDir();
  ASSERT_EQ(::chdir(before->c_str()), 0);
  ASSERT_TRUE(inside.ok());
  EXPECT_EQ(*inside, tmpl);
  EXPECT_FALSE(removed.ok());  // getcwd's ENOENT, not a made-up path
  EXPECT_EQ(CurrentDir().value_or(""), *before);
}

TEST(Process, CurrentUmaskReadsWithoutChanging) {
  const mode_t old = ::umask(027);
  EXPECT_EQ(CurrentUmask(), 027u);
  EXPECT_EQ(CurrentUmask(), 027u);  // the first read left it as it was
  ::umask(0);
  EXPECT_EQ(CurrentUmask(), 0u);
  EXPECT_EQ(::umask(old), 0u);
}

TEST(Process, ResourceLimitsAreTheKernels) {
  rlimit files{}, procs{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &files), 0);
  ASSERT_EQ(::getrlimit(RLIMIT_NPROC, &procs), 0);
  auto conv = [](rlim_t v) { return v == RLIM_INFINITY ? kNoLimit : static_cast<uint64_t>(v); };
  auto f = GetResourceLimit(LimitedResource::kOpenFiles);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->soft, conv(files.rlim_cur));
  EXPECT_EQ(f->hard, conv(files.rlim_max));
  auto p = GetResourceLimit(LimitedResource::kProcesses);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->soft, conv(procs.rlim_cur));
  EXPECT_EQ(p->hard, conv(procs.rlim_max));

  // A lowered soft limit is seen as it is; unlimited reads as kNoLimit.
  if (files.rlim_cur > 64) {
    rlimit low{64, files.rlim_max};
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
    auto lowered = GetResourceLimit(LimitedResource::kOpenFiles);
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &files), 0);
    ASSERT_TRUE(lowered.ok());
    EXPECT_EQ(lowered->soft, 64u);
  }
}

TEST(Process, ZombieIsNotAlive) {
  pid_t pid = fork();
  if (pid == 0) _exit(3);
  // Wait until it is a zombie (exited, not reaped).
  for (int i = 0; i < 500 && ProcessAlive(pid); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(ProcessAlive(pid));
  int ws = 0;
  ASSERT_EQ(waitpid(pid, &ws, 0), pid);
  ExitStatus es = DecodeWaitStatus(ws);
  EXPECT_TRUE(es.exited);
  EXPECT_EQ(es.code, 3);
}

TEST(Process, DescendantsIncludeSetsidGrandchild) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  if (child == 0) {
    if (fork() == 0) {
      setsid();
      write(ready[1], "x", 1);
      pause();
      _exit(0);
    }
    pause();
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  auto d = Descendants(getpid());
  EXPECT_NE(std::find(d.begin(), d.end(), child), d.end());
  EXPECT_GE(d.size(), 2u);
  for (pid_t p : Descendants(child)) (void)SendSignal(p, SIGKILL);
  (void)SendSignal(child, SIGKILL);
  int ws = 0;
  waitpid(child, &ws, 0);
  ExitStatus es = DecodeWaitStatus(ws);
  EXPECT_EQ(es.signal, SIGKILL);
  EXPECT_EQ(SignalName(SIGKILL), "SIGKILL");
}

std::string TempDir() {
  char tmpl[] = "/tmp/lathe-spawn-XXXXXX";
  return ::mkdtemp(tmpl);
}

// The child reports, from inside, its session and process group (fields 6 and
// 5 of /proc/self/stat), what its stdin is, and whether a descriptor the
// parent left inheritable reached it; stdout and stderr both go to the file.
TEST(Process, SpawnDetachedRunsInItsOwnSessionWithItsOutputInTheFile) {
  std::string dir = TempDir();
  std::string out = dir + "/out.log";
  ASSERT_TRUE(WriteFileAtomic(out, "before\n", 0600, Durability::kNoSync).ok());
  int leak[2];
  ASSERT_EQ(::pipe(leak), 0);  // no O_CLOEXEC: inherited unless SpawnDetached closes it
  std::string probe = "/proc/self/fd/" + std::to_string(leak[1]);
  std::string script =
      "read -r pid comm state ppid pgrp sid rest < /proc/self/stat; "
      "echo \"pid=$pid sid=$sid pgrp=$pgrp\"; "
      "echo \"stdin=$(readlink /proc/self/fd/0)\"; "
      "[ -e " +
      probe +
      " ] && echo leaked || echo not-inherited; "
      "echo to-stderr >&2";
  auto pid = SpawnDetached({"/bin/sh", "-c", script}, out);
  ::close(leak[0]);
  ::close(leak[1]);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  int ws = 0;
  ASSERT_EQ(::waitpid(*pid, &ws, 0), *pid);
  EXPECT_TRUE(DecodeWaitStatus(ws).exited);
  EXPECT_EQ(DecodeWaitStatus(ws).code, 0);
  auto text = ReadFile(out);
  ASSERT_TRUE(text.ok());
  std::string id = std::to_string(*pid);
  EXPECT_NE(text->find("pid=" + id + " sid=" + id + " pgrp=" + id), std::string::npos) << *text;
  EXPECT_NE(getsid(0), *pid);
  EXPECT_EQ(text->rfind("before\n", 0), 0u) << "appended, not truncated: " << *text;
  EXPECT_NE(text->find("stdin=/dev/null"), std::string::npos) << *text;
  EXPECT_NE(text->find("not-inherited"), std::string::npos) << *text;
  EXPECT_NE(text->find("to-stderr"), std::string::npos) << *text;
  (void)RemoveAll(dir);
}

TEST(Process, SpawnDetachedReportsAProgramThatCannotRun) {
  std::string dir = TempDir();
  auto pid = SpawnDetached({dir + "/no-such-program"}, dir + "/out.log");
  EXPECT_TRUE(pid.status().IsNotFound()) << pid.status().ToString();
  EXPECT_NE(pid.status().message().find("no-such-program"), std::string::npos);
  EXPECT_TRUE(SpawnDetached({"/bin/true"}, dir + "/missing/out.log").status().IsNotFound());
  (void)RemoveAll(dir);
}

// The child has the caller's environment and no blocked signal even when the
// caller blocks some (the relay waits for SIGTERM with it blocked).
TEST(Process, SpawnChildInheritsTheEnvironmentButNotTheSignalMask) {
  std::string dir = TempDir();
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &term, &old), 0);
  SetEnvVar("LATHE_SPAWN_TEST", "seen");
  auto pid = SpawnChild({"sh", "-c",
                         "grep -q '^SigBlk:[[:space:]]*0*$' /proc/self/status || exit 5; "
                         "[ \"$LATHE_SPAWN_TEST\" = seen ] || exit 6; exit 3"});
  UnsetEnvVar("LATHE_SPAWN_TEST");
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  int ws = 0;
  ASSERT_EQ(::waitpid(*pid, &ws, 0), *pid);
  EXPECT_TRUE(DecodeWaitStatus(ws).exited);
  EXPECT_EQ(DecodeWaitStatus(ws).code, 3);
  auto missing = SpawnChild({dir + "/no-such-program"});
  EXPECT_TRUE(missing.status().IsNotFound()) << missing.status().ToString();
  (void)RemoveAll(dir);
}

TEST(Process, TryReapSeesTheExitOnlyOnce) {
  pid_t pid = fork();
  if (pid == 0) _exit(4);
  std::optional<ExitStatus> es;
  for (int i = 0; i < 1000 && !es; ++i) {
    es = TryReap(pid);
    if (!es) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(es.has_value());
  EXPECT_TRUE(es->exited);
  EXPECT_EQ(es->code, 4);
  EXPECT_FALSE(TryReap(pid).has_value());  // reaped: no longer a child
}

// A command whose exit status someone else took (waitpid by another thread)
// is an error, never a success.
TEST(Process, ACommandWhoseExitStatusWasTakenIsAnError) {
  std::atomic<bool> stop{false};
  std::thread thief([&] {
    while (!stop) {
      if (::waitpid(-1, nullptr, WNOHANG) <= 0) ::usleep(100);
    }
  });
  int errors = 0;
  for (int i = 0; i < 20; ++i) {
    auto r = RunCommand({"/bin/sh", "-c", "sleep 0.01; exit 3"}, 10000);
    if (!r.ok()) {
      ++errors;
      EXPECT_NE(r.status().message().find("exit status was lost"), std::string::npos)
          << r.status().ToString();
    } else {
      EXPECT_EQ(r->exit_code, 3);  // never 0
    }
  }
  stop = true;
  thief.join();
  EXPECT_GT(errors, 0);  // the thief won at least once in 20 tries
}

}  // namespace
}  // namespace lathe::os
