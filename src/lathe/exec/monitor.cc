#include "lathe/exec/monitor.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>

#include "lathe/exec/attempt_records.h"
#include "lathe/exec/checkpoint_records.h"
#include "lathe/exec/container/podman.h"
#include "lathe/os/cgroup.h"
#include "lathe/os/clock.h"
#include "lathe/os/command.h"
#include "lathe/os/fd.h"
#include "lathe/os/files.h"
#include "lathe/os/identity.h"
#include "lathe/os/mounts.h"
#include "lathe/os/netns.h"
#include "lathe/os/process.h"
#include "lathe/run/log_format.h"
#include "lathe/run/log_writer.h"

extern char** environ;

namespace lathe::exec {

using run::FdLogFile;
using run::FormatLogRecord;
using run::kMaxLineBytes;
using run::LogWriter;
using run::LogWriterOptions;

namespace {

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
int64_t NowMs() { return NowNs() / 1'000'000; }
int64_t MonoMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// The handshake and the child's error pipe: best effort, nothing to do if
// the reader has gone.
void WriteAllFd(int fd, std::string_view s) { (void)os::WriteFullErrno(fd, s.data(), s.size()); }

// ---- the run's process (child side of the monitor's fork) -------------------

// Set once the monitor has been told the run started (a setup step runs
// first): from then on the error pipe is the log's stderr (SetupStep).
bool g_reporting_to_log = false;

[[noreturn]] void FailChild(int errpipe, const std::string& msg) {
  WriteAllFd(errpipe, g_reporting_to_log ? "lathe: " + msg + "\n" : msg);
  _exit(127);
}

void JoinCgroups(const LaunchConfig& c, int errpipe) {
  std::string pid = std::to_string(getpid());
  for (const auto& dir : c.cgroup_dirs) {
    int fd = ::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    int err = fd < 0 ? errno : os::WriteFullErrno(fd, pid.data(), pid.size());
    if (err != 0) FailChild(errpipe, "cannot join cgroup " + dir + ": " + std::strerror(err));
    ::close(fd);
  }
}

// The run's own mount namespace, made once, its mounts private.
void OwnMountNamespace(int errpipe, const char* what) {
  static bool made = false;
  if (made) return;
  if (::unshare(CLONE_NEWNS) != 0) {
    FailChild(errpipe, std::string("cannot create a mount namespace for ") + what + ": " +
                           std::strerror(errno));
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    FailChild(errpipe, std::string("cannot make mounts private: ") + std::strerror(errno));
  }
  made = true;
}

void PrivateShm(const LaunchConfig& c, int errpipe) {
  if (c.shm_bytes == 0) return;
  OwnMountNamespace(errpipe, "shm");
  std::string opts = "size=" + std::to_string(c.shm_bytes) + ",mode=1777";
  if (::mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0) {
    FailChild(errpipe, std::string("cannot mount /dev/shm: ") + std::strerror(errno));
  }
}

void IsolateNetwork(const LaunchConfig& c, int errpipe) {
  if (!c.isolated_network) return;
  if (Status s = os::EnterNewNetworkNamespace(); !s.ok()) {
    FailChild(errpipe, "cannot give the run a network namespace of its own (network: isolated): " +
                           s.message());
  }
}

void DropPrivileges(const LaunchConfig& c, int errpipe) {
  if (::getuid() != 0 || c.uid == 0) return;
  if (::setgroups(c.groups.size(), c.groups.data()) != 0 || ::setgid(c.gid) != 0 ||
      ::setuid(c.uid) != 0) {
    FailChild(errpipe, std::string("cannot switch to uid ") + std::to_string(c.uid) + ": " +
                           std::strerror(errno));
  }
}

// execvp with the run's environment, in a process whose stdin, stdout and
// stderr are /dev/null and the log's pipes, with signals as a program expects.
void ExecWithEnvironment(const std::map<std::string, std::string>& env,
                         const std::vector<std::string>& args, int out_fd, int err_fd) {
  int devnull = ::open("/dev/null", O_RDONLY);
  ::dup2(devnull, 0);
  ::dup2(out_fd, 1);
  ::dup2(err_fd, 2);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int s : {SIGPIPE, SIGHUP, SIGTERM, SIGINT}) ::signal(s, SIG_DFL);
  // execvp looks PATH up in environ, so install the run's environment first.
  static std::vector<std::string> env_store;
  static std::vector<char*> envp;
  for (const auto& [k, v] : env) env_store.push_back(k + "=" + v);
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  environ = envp.data();
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
}

void ExecWithRunEnvironment(const LaunchConfig& c, const std::vector<std::string>& args, int out_fd,
                            int err_fd) {
  ExecWithEnvironment(c.env, args, out_fd, err_fd);
}

// The setup step, as the run's user, in a child this process waits for.
void RunSetupStep(const LaunchConfig& c, int out_fd, int err_fd, int errpipe) {
  ::dup2(err_fd, errpipe);
  ::fcntl(errpipe, F_SETFD, FD_CLOEXEC);
  g_reporting_to_log = true;
  pid_t step = ::fork();
  if (step < 0)
    FailChild(errpipe, std::string("cannot fork the setup step: ") + std::strerror(errno));
  if (step == 0) {
    DropPrivileges(c, errpipe);
    ::umask(static_cast<mode_t>(c.umask));
    if (::chdir("/") != 0) _exit(127);
    ExecWithRunEnvironment(c, c.setup_argv, out_fd, err_fd);
    FailChild(errpipe, "cannot execute " + c.setup_argv[0] + ": " + std::strerror(errno));
  }
  int ws = 0;
  while (::waitpid(step, &ws, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(ws)) _exit(128 + WTERMSIG(ws));
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) _exit(WIFEXITED(ws) ? WEXITSTATUS(ws) : 1);
}

// One path the user named, made read-only in the run's namespace. This
// process is root and the path is the user's to change at any moment (a
// component swapped for a symlink between two lookups would redirect a mount
// by path onto /etc), so the directory is opened once, as the user, not
// through a symlink, owned by the user, and the bind acts on that descriptor
// alone (os/mounts.h): what gets mounted, and where, is that one directory.
void MountReadOnly(const LaunchConfig& c, const std::string& path, int errpipe) {
  os::FsIdentity id{c.uid, c.gid, c.groups, std::to_string(c.uid)};
  auto dir = os::OpenOwnedDirAs(path, id);
  Status st = dir.ok() ? os::BindReadOnlyOnItself(dir->get(), path) : dir.status();
  if (!st.ok()) FailChild(errpipe, "cannot mount " + path + " read-only: " + st.message());
}

// The setup step (a read-only workspace's clone), then the read-only
// mounts. The step may take minutes and prints progress, so the monitor is
// told first that the run has started (the error pipe becomes the log's
// stderr: it reads the output meanwhile, and a later failure is the run's
// exit status with its reason in the log). The step runs as the user in a
// child; this process stays root for the mounts, and its blocked signals
// (the monitor's mask) keep it waiting while a stop ends the step.
void SetupThenMountReadOnly(const LaunchConfig& c, int out_fd, int err_fd, int errpipe) {
  if (c.setup_argv.empty() && c.readonly_paths.empty()) return;
  if (!c.setup_argv.empty()) RunSetupStep(c, out_fd, err_fd, errpipe);
  if (c.readonly_paths.empty()) return;
  OwnMountNamespace(errpipe, "a read-only workspace");
  for (const auto& path : c.readonly_paths) MountReadOnly(c, path, errpipe);
}

// A run in an image: each directory the run sees is opened as its user and
// bound onto root's staging directory, in this process's own mount
// namespace, which podman (a child) inherits; podman is handed the stages.
void StageContainerMounts(const LaunchConfig& c, int errpipe) {
  if (c.container.mounts.empty()) return;
  OwnMountNamespace(errpipe, "a run in an image");
  os::FsIdentity id{c.uid, c.gid, c.groups, std::to_string(c.uid)};
  for (const auto& m : c.container.mounts) {
    Status st = os::MakeDirs(m.stage, 0700);
    if (st.ok()) {
      auto dir = os::OpenDirAs(m.source, id);
      st = dir.ok() ? os::BindDirOnto(dir->get(), m.stage, m.readonly, m.source) : dir.status();
    }
    if (!st.ok()) FailChild(errpipe, "cannot mount " + m.source + " in the image: " + st.message());
  }
}

// A program beside the container (ContainerLaunch::sidecar_argv: a command
// replica's relay), forked from the process about to become podman: it is
// the run's user, in the run's cgroups and network namespace, its output in
// the run's log, and podman's exit is its SIGTERM (PR_SET_PDEATHSIG; podman
// ends with the container, so the relay never outlives the program).
void StartSidecar(const LaunchConfig& c, int out_fd, int err_fd, int errpipe) {
  if (c.container.sidecar_argv.empty()) return;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) FailChild(errpipe, std::string("cannot fork: ") + std::strerror(errno));
  if (pid > 0) return;
  DropPrivileges(c, errpipe);
  ::umask(static_cast<mode_t>(c.umask));
  // Set after the identity changed (which clears it); the parent may have gone meanwhile.
  if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || ::getppid() != parent) _exit(0);
  if (::chdir("/") != 0) _exit(127);
  ExecWithRunEnvironment(c, c.container.sidecar_argv, out_fd, err_fd);
  FailChild(errpipe, "cannot execute " + c.container.sidecar_argv[0] + ": " + std::strerror(errno));
}

// podman runs as root (it sets up the container) and runs the program as
// the run's user; no-new-privileges is already set and passes to it.
[[noreturn]] void ExecContainer(const LaunchConfig& c, int out_fd, int err_fd, int errpipe) {
  StageContainerMounts(c, errpipe);
  StartSidecar(c, out_fd, err_fd, errpipe);
  if (::chdir("/") != 0) FailChild(errpipe, std::string("chdir /: ") + std::strerror(errno));
  ExecWithEnvironment(c.container.env, c.container.argv, out_fd, err_fd);
  FailChild(errpipe, "cannot execute " + c.container.argv[0] + ": " + std::strerror(errno));
}

[[noreturn]] void ExecChild(const LaunchConfig& c, int out_fd, int err_fd, int errpipe) {
  ::setpgid(0, 0);
  // No set-user-ID program gives the run (or its setup step) more than its
  // user has: a run never becomes root again (docs/security.md).
  if (Status st = os::ForbidNewPrivileges(); !st.ok()) FailChild(errpipe, st.message());
  JoinCgroups(c, errpipe);
  if (c.container.empty()) PrivateShm(c, errpipe);  // an image's is podman's --shm-size
  IsolateNetwork(c, errpipe);
  SetupThenMountReadOnly(c, out_fd, err_fd, errpipe);
  if (!c.container.empty()) ExecContainer(c, out_fd, err_fd, errpipe);
  DropPrivileges(c, errpipe);
  ::umask(static_cast<mode_t>(c.umask));  // the submitter's, not the monitor's
  if (!c.workdir.empty() && ::chdir(c.workdir.c_str()) != 0) {
    FailChild(errpipe, "cannot enter working directory " + c.workdir + ": " + std::strerror(errno));
  }
  ExecWithRunEnvironment(c, c.argv, out_fd, err_fd);
  int err = errno;
  if (err == ENOENT) FailChild(errpipe, "command not found: " + c.argv[0]);
  FailChild(errpipe, "cannot execute " + c.argv[0] + ": " + std::strerror(err));
}

// ---- the monitor's loop --------------------------------------------------------

constexpr int kLogRetryMs = 100;  // retrying held log output

// Splits one stream's bytes into log records for the writer.
class StreamLog {
 public:
  StreamLog(std::string_view name, LogWriter& writer) : name_(name), writer_(writer) {}
  void Add(std::string_view data) {
    buf_.append(data);
    std::string out;
    int64_t ns = NowNs();
    size_t pos = 0;
    while (true) {
      size_t nl = buf_.find('\n', pos);
      if (nl != std::string::npos && nl - pos <= kMaxLineBytes) {
        out += FormatLogRecord(ns, name_, false, std::string_view(buf_).substr(pos, nl - pos));
        last_line_.assign(buf_, pos, nl - pos);
        pos = nl + 1;
      } else if (buf_.size() - pos > kMaxLineBytes) {
        out += FormatLogRecord(ns, name_, true, std::string_view(buf_).substr(pos, kMaxLineBytes));
        pos += kMaxLineBytes;
      } else {
        break;
      }
    }
    buf_.erase(0, pos);
    writer_.Append(std::move(out));
  }
  // The last whole line written (podman's "Error: ..." when it could not
  // start a container).
  const std::string& last_line() const { return last_line_; }
  void Flush() {
    if (buf_.empty()) return;
    last_line_ = buf_;
    writer_.Append(FormatLogRecord(NowNs(), name_, false, buf_));
    buf_.clear();
  }

 private:
  std::string name_;
  LogWriter& writer_;
  std::string buf_;
  std::string last_line_;
};

// A monitor without a handshake (a Slurm job) that cannot start the run
// says why where the backend looks: exit.json, and its own stderr.
void RecordStartFailure(const LaunchConfig& c, const std::string& why) {
  std::fprintf(stderr, "monitor: %s\n", why.c_str());
  if (c.exit_path.empty()) return;
  ExitRecord e;
  e.start_error = why;
  e.finished_at_ms = NowMs();
  Status st = os::WriteFileAtomic(c.exit_path, ExitToJson(e).dump() + "\n", 0644);
  if (!st.ok()) std::fprintf(stderr, "monitor: %s\n", st.ToString().c_str());
}

class Monitor {
 public:
  Monitor(LaunchConfig c, DirWatchStart watch) : c_(std::move(c)), watch_(std::move(watch)) {}
  int Run(int handshake_fd);

 private:
  Status Start();
  void StartRecordingCheckpoints();
  void StopRecordingCheckpoints();
  void Loop();
  void OnSignal();
  void Warn();
  void KillTree(int sig);
  bool ReadStream(int& fd, StreamLog& log);
  void FlushLogAtEnd(int64_t wait_ms);
  void Finish();
  void FinishContainer(ExitRecord& e);
  void ReserveExitRecord();
  Status WriteExit(const std::string& text);
  int DetachedExitCode() const;

  LaunchConfig c_;
  int exit_fd_ = -1;  // exit.json.pending with its blocks reserved
  std::unique_ptr<os::RunCgroup> cgroup_;
  int log_fd_ = -1;
  std::unique_ptr<LogWriter> log_;
  int out_fd_ = -1, err_fd_ = -1, sig_fd_ = -1;
  pid_t child_ = 0;
  std::optional<int> wstatus_;
  std::string start_error_;
  bool killed_ = false;
  int stop_signal_ = 0;  // the first signal asking to stop the run (ExitRecord::stop_signal)
  std::string last_stderr_line_;  // of a run in an image: podman's reason it did not start
  int64_t warn_at_ms_ = 0;        // MonoMs() of LaunchConfig::warn_after_ms; 0: none (or done)
  DirWatchStart watch_;
  std::function<void()> stop_watch_;  // set while the checkpoint directory is watched
};

// On the watch's thread: one record per settled burst. The records file is
// the watch's alone; a record that cannot be written is said on stderr
// (Slurm's output file), and the daemon still captures when the run ends.
void Monitor::StartRecordingCheckpoints() {
  if (c_.checkpoint_dir.empty() || c_.checkpoint_records.empty() || !watch_) return;
  auto seq = std::make_shared<int64_t>(0);
  const std::string records = c_.checkpoint_records;
  auto stop = watch_(c_.checkpoint_dir, [records, seq](const std::vector<std::string>& paths) {
    CheckpointRecord r{++*seq, NowMs(), paths};
    if (Status st = AppendCheckpointRecord(records, r); !st.ok()) {
      std::fprintf(stderr, "monitor: checkpoint not recorded: %s\n", st.ToString().c_str());
    }
  });
  if (!stop.ok()) {
    std::fprintf(stderr, "monitor: checkpoint directory %s not watched: %s\n",
                 c_.checkpoint_dir.c_str(), stop.status().ToString().c_str());
    return;
  }
  stop_watch_ = std::move(stop).value();
}

void Monitor::StopRecordingCheckpoints() {
  if (!stop_watch_) return;
  stop_watch_();  // the last checkpoint, written as the run ended, is recorded
  stop_watch_ = nullptr;
}

void Monitor::ReserveExitRecord() {
  constexpr off_t kReserveBytes = 4096;
  std::string pending = c_.exit_path + ".pending";
  exit_fd_ = ::open(pending.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (exit_fd_ >= 0 && ::posix_fallocate(exit_fd_, 0, kReserveBytes) != 0) {
    ::close(exit_fd_);
    exit_fd_ = -1;
  }
}

Status Monitor::Start() {
  ReserveExitRecord();
  // Never through a symlink: the log is root's to write, the user's to read.
  log_fd_ =
      ::open(c_.log_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (log_fd_ < 0) return ErrnoStatus("open log " + c_.log_path, errno);
  // Best effort: a log left root's is still readable through the daemon.
  if (::getuid() == 0) (void)::fchown(log_fd_, c_.uid, c_.gid);
  struct stat st {};
  uint64_t log_size = ::fstat(log_fd_, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  LogWriterOptions lo;
  lo.max_held_bytes = c_.log_hold_bytes;
  lo.max_stall_ms = c_.log_stall_ms;
  lo.max_file_bytes = c_.log_max_bytes;
  log_ = std::make_unique<LogWriter>(FdLogFile(log_fd_), log_size, os::RealClock(), lo);
  if (!c_.cgroup_dirs.empty()) {
    auto cg = os::RunCgroup::Open(c_.cgroup_dirs);
    if (cg.ok()) cgroup_ = std::move(cg).value();
  }
  int out[2], err[2], errpipe[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 ||
      ::pipe2(errpipe, O_CLOEXEC) != 0) {
    return ErrnoStatus("pipe", errno);
  }
  child_ = ::fork();
  if (child_ < 0) return ErrnoStatus("fork", errno);
  if (child_ == 0) {
    ::close(errpipe[0]);
    ExecChild(c_, out[1], err[1], errpipe[1]);
  }
  ::close(out[1]);
  ::close(err[1]);
  ::close(errpipe[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
  // The error pipe closes on a successful exec (O_CLOEXEC) or carries the reason.
  std::string reason;
  char buf[512];
  ssize_t n;
  while ((n = ::read(errpipe[0], buf, sizeof buf)) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    reason.append(buf, static_cast<size_t>(n));
  }
  ::close(errpipe[0]);
  if (!reason.empty()) {
    start_error_ = reason;
    int ws = 0;
    ::waitpid(child_, &ws, 0);
    wstatus_ = ws;
  }
  return Status::OK();
}

bool Monitor::ReadStream(int& fd, StreamLog& log) {
  char buf[65536];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n > 0) {
    log.Add(std::string_view(buf, static_cast<size_t>(n)));
    return true;
  }
  if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
    ::close(fd);
    fd = -1;
  }
  return false;
}

void Monitor::KillTree(int sig) {
  // A run in an image is asked to stop through podman alone, which passes the
  // signal to the container (its init hands it to the program): conmon, in
  // the tree too, must live to record the program's exit status.
  if (!c_.container.empty() && sig == SIGTERM && !wstatus_) {
    (void)os::SendSignal(child_, sig);  // best effort: it may have ended already
    return;
  }
  // Best effort: the processes may be gone already; the backend checks the cgroup again.
  if (cgroup_) (void)cgroup_->KillAll(sig);
  // Best effort: the process may have ended already.
  for (pid_t p : os::Descendants(::getpid())) (void)os::SendSignal(p, sig);
}

void Monitor::OnSignal() {
  signalfd_siginfo si;
  while (::read(sig_fd_, &si, sizeof si) == sizeof si) {
    // SIGUSR1: Slurm's warning ahead of a job's time limit (--signal=B:USR1@...),
    // passed on once: the monitor's own warning (Warn) may have come first.
    if (si.ssi_signo == SIGUSR1 && stop_signal_ == SIGUSR1) continue;
    if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT || si.ssi_signo == SIGUSR1) {
      if (stop_signal_ == 0 && !wstatus_) stop_signal_ = static_cast<int>(si.ssi_signo);
      KillTree(SIGTERM);
    } else if (si.ssi_signo == SIGUSR2) {
      killed_ = true;
      KillTree(SIGKILL);
    }
  }
  // Reap everything: the main child and orphans re-parented to us.
  int ws = 0;
  pid_t p;
  while ((p = ::waitpid(-1, &ws, WNOHANG)) > 0) {
    if (p == child_) wstatus_ = ws;
  }
}

// LaunchConfig::warn_after_ms: the job's time limit is near, as if Slurm's
// SIGUSR1 had come; nothing when a stop was asked for already.
void Monitor::Warn() {
  if (warn_at_ms_ <= 0 || MonoMs() < warn_at_ms_) return;
  warn_at_ms_ = 0;
  if (stop_signal_ != 0) return;
  stop_signal_ = SIGUSR1;
  KillTree(SIGTERM);
}

void Monitor::Loop() {
  StreamLog out_log("stdout", *log_), err_log("stderr", *log_);
  int64_t cleanup_deadline = -1;
  while (true) {
    // While the log holds back output it cannot write, the pipes are not
    // read: the run blocks in write() rather than losing output.
    bool reading = log_->Accepting();
    int out = reading ? out_fd_ : -1, err = reading ? err_fd_ : -1;
    pollfd fds[3] = {{out, POLLIN, 0}, {err, POLLIN, 0}, {sig_fd_, POLLIN, 0}};
    int rc = ::poll(fds, 3, log_->holding() ? kLogRetryMs : 200);
    if (rc > 0) {
      if (out >= 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) ReadStream(out_fd_, out_log);
      if (err >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) ReadStream(err_fd_, err_log);
      if (fds[2].revents & POLLIN) OnSignal();
    }
    if (log_->holding()) log_->Flush();
    if (!wstatus_) {
      Warn();
      continue;
    }
    // The main process has ended: what is left of its tree is ended too,
    // politely first, then by force after the grace period.
    bool tree_left = !os::Descendants(::getpid()).empty();
    if (cleanup_deadline < 0) {
      cleanup_deadline = MonoMs() + c_.kill_grace_ms;
      // podman's conmon removes the container once it has ended: not asked to stop.
      if (tree_left && c_.container.empty()) KillTree(SIGTERM);
    } else if (tree_left && MonoMs() > cleanup_deadline) {
      KillTree(SIGKILL);
    }
    OnSignal();  // reap
    if (!tree_left && out_fd_ < 0 && err_fd_ < 0) break;
    // A leaked pipe end; not while output waits unread in the pipes.
    if (!tree_left && reading && MonoMs() > cleanup_deadline + 1000) break;
  }
  out_log.Flush();
  err_log.Flush();
  last_stderr_line_ = err_log.last_line();
  FlushLogAtEnd(c_.log_stall_ms);
}

// What the log still holds gets `wait_ms` (as long as the run could have been
// held back) to reach the file; then it is given up, with a gap marker.
void Monitor::FlushLogAtEnd(int64_t wait_ms) {
  int64_t deadline = MonoMs() + wait_ms;
  while (!log_->Flush() && MonoMs() < deadline) {
    ::poll(nullptr, 0, kLogRetryMs);
  }
  log_->Abandon();
  if (log_->lost_bytes() > 0) {
    std::fprintf(stderr, "monitor: %llu bytes of the run's output lost: %s\n",
                 static_cast<unsigned long long>(log_->lost_bytes()), log_->lost_reason().c_str());
  }
}

// Why podman did not start the program, from its exit status and the last
// line of its output: podman's own error (125-127, "Error: ..."), or its
// init's (catatonit, exit 1: "failed to exec pid1: No such file or
// directory"). "" when the program ran.
std::string ContainerStartFailure(std::optional<int> code, const std::string& line) {
  if (!code) return "";
  if (*code >= 125 && *code <= 127 && line.starts_with("Error: ")) return line.substr(7);
  constexpr std::string_view kInit = "failed to exec pid1: ";
  if (size_t at = line.find(kInit);
      *code == 1 && line.find("(catatonit:") != std::string::npos && at != std::string::npos) {
    return "no such command, or it cannot be executed (" + line.substr(at + kInit.size()) + ")";
  }
  return "";
}

// A run in an image: podman's exit status is the program's (128+N for a
// signal); 125-127 with podman's "Error: ..." mean it never started. The
// container is removed whatever happened (podman --rm does it unless podman
// was killed).
void Monitor::FinishContainer(ExitRecord& e) {
  if (e.exit_code) {
    PodmanExit pe = DecodePodmanExit(*e.exit_code);
    e.exit_code = pe.code;
    e.signal = pe.signal;
    if (std::string why = ContainerStartFailure(e.exit_code, last_stderr_line_);
        !why.empty() && start_error_.empty()) {
      start_error_ = "the image could not start the command: " + why;
      e.start_error = start_error_;
    }
  }
  if (c_.container.cleanup_argv.empty()) return;
  auto rm = os::RunCommandWithEnv(c_.container.cleanup_argv, c_.container.env, 60000);
  if (!rm.ok() || rm->exit_code != 0) {
    std::fprintf(stderr, "monitor: cannot remove the container: %s\n",
                 rm.ok() ? rm->err.c_str() : rm.status().ToString().c_str());
  }
}

void Monitor::Finish() {
  ExitRecord e;
  e.finished_at_ms = NowMs();
  e.start_error = start_error_;
  if (wstatus_) {
    os::ExitStatus es = os::DecodeWaitStatus(*wstatus_);
    if (es.exited) e.exit_code = es.code;
    if (es.signal) e.signal = es.signal;
  }
  if (!c_.container.empty()) FinishContainer(e);
  if (cgroup_) {
    // A container's own cgroup, below the run's, is gone by now, and v1 does
    // not count its OOM kills in the run's: a SIGKILL that was not Lathe's and
    // a peak at the limit are the evidence left.
    e.oom_killed = cgroup_->OomKilled() || (!c_.container.empty() && !killed_ &&
                                            e.signal == SIGKILL && cgroup_->MemoryLimitReached());
    // Best effort: the processes may be gone already; the backend checks the cgroup again.
    (void)cgroup_->Destroy();
  }
  if (!start_error_.empty()) {
    log_->Append(FormatLogRecord(NowNs(), "stderr", false, "lathe: " + start_error_));
    FlushLogAtEnd(0);  // the daemon waits for the handshake that follows
  }
  e.log_lost_bytes = log_->lost_bytes();
  e.log_lost_reason = log_->lost_reason();
  e.log_trimmed_bytes = log_->trimmed_bytes();
  e.stop_signal = stop_signal_;
  Status st = WriteExit(ExitToJson(e).dump() + "\n");
  if (!st.ok()) std::fprintf(stderr, "monitor: %s\n", st.ToString().c_str());
}

// The exit record must land even when the run has filled the disk with its
// log: its blocks were reserved at start (exit_fd_), so writing it needs no
// new space. Without a reservation, an ordinary atomic write.
Status Monitor::WriteExit(const std::string& text) {
  if (exit_fd_ < 0) return os::WriteFileAtomic(c_.exit_path, text, 0644);
  std::string pending = c_.exit_path + ".pending";
  os::Fd fd(exit_fd_);
  exit_fd_ = -1;
  RETURN_IF_ERROR(os::PwriteFull(fd.get(), text.data(), text.size(), 0, pending));
  RETURN_IF_ERROR(os::Truncate(fd.get(), text.size(), pending));
  RETURN_IF_ERROR(os::Fsync(fd.get(), pending));
  RETURN_IF_ERROR(fd.Close(pending));
  RETURN_IF_ERROR(os::Rename(pending, c_.exit_path));
  std::string dir = c_.exit_path.substr(0, c_.exit_path.rfind('/'));
  return os::FsyncDir(dir.empty() ? "." : dir);
}

int Monitor::Run(int handshake_fd) {
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGUSR1, SIGUSR2}) sigaddset(&set, s);
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
  sig_fd_ = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  Status st = Start();
  if (!st.ok()) {
    WriteAllFd(handshake_fd, "err " + st.message() + "\n");
    if (handshake_fd < 0) RecordStartFailure(c_, st.message());
    return 1;
  }
  if (!start_error_.empty()) {
    Finish();
    WriteAllFd(handshake_fd, "err " + start_error_ + "\n");
    if (handshake_fd < 0) std::fprintf(stderr, "monitor: %s\n", start_error_.c_str());
    return handshake_fd < 0 ? 1 : 0;
  }
  MonitorRecord r;
  Json rec = {{"monitor_pid", ::getpid()},
              {"monitor_start", os::ProcessStartTime(::getpid()).value_or(0)},
              {"child_pid", child_},
              {"child_start", os::ProcessStartTime(child_).value_or(0)},
              {"started_at_ms", NowMs()}};
  // Not fsynced: it only matters while this process lives, and a power loss
  // ends the process too.
  (void)os::WriteFileAtomic(c_.monitor_path, rec.dump() + "\n", 0644, os::Durability::kNoSync);
  if (handshake_fd >= 0) {
    WriteAllFd(handshake_fd, "ok " + std::to_string(child_) + "\n");
    ::close(handshake_fd);
  }
  if (c_.warn_after_ms > 0) warn_at_ms_ = MonoMs() + c_.warn_after_ms;
  StartRecordingCheckpoints();
  Loop();
  StopRecordingCheckpoints();
  Finish();
  return handshake_fd >= 0 ? 0 : DetachedExitCode();
}

// Without a handshake (a Slurm job), the monitor's own exit status is the
// run's, so that Slurm's record of the job (sacct) says how the run ended.
int Monitor::DetachedExitCode() const {
  if (!wstatus_) return 1;
  os::ExitStatus es = os::DecodeWaitStatus(*wstatus_);
  return es.exited ? es.code : 128 + es.signal;
}

// A monitor that is not root runs the run as itself: it cannot give the run
// what needs root, and without a handshake (started by Slurm as the user) it
// must be the user the launch config names.
Status CheckStartedAs(const LaunchConfig& c, int handshake_fd) {
  if (os::IsRoot()) return Status::OK();
  RETURN_IF_ERROR(CheckUnprivilegedLaunch(c));
  if (handshake_fd < 0 && c.uid != os::RealUid()) {
    return Status::FailedPrecondition("the launch config is for uid " + std::to_string(c.uid) +
                                      " and the monitor runs as uid " +
                                      std::to_string(os::RealUid()));
  }
  return Status::OK();
}

}  // namespace

int ParseHandshakeFd(const char* arg) {
  if (arg == nullptr || std::strcmp(arg, "-") == 0) return -1;
  return std::atoi(arg);
}

int MonitorMain(const std::string& launch_path, int handshake_fd, const DirWatchStart& watch) {
  ::signal(SIGHUP, SIG_IGN);
  ::signal(SIGPIPE, SIG_IGN);
  auto text = os::ReadFile(launch_path);
  Result<LaunchConfig> cfg = text.ok() ? [&]() -> Result<LaunchConfig> {
    auto j = ParseJson(*text);
    if (!j.ok()) return j.status();
    return LaunchFromJson(*j);
  }()
      : Result<LaunchConfig>(text.status());
  if (!cfg.ok()) {
    WriteAllFd(handshake_fd, "err " + cfg.status().message() + "\n");
    if (handshake_fd < 0) std::fprintf(stderr, "monitor: %s\n", cfg.status().message().c_str());
    return 1;
  }
  if (Status st = CheckStartedAs(*cfg, handshake_fd); !st.ok()) {
    WriteAllFd(handshake_fd, "err " + st.message() + "\n");
    if (handshake_fd < 0) RecordStartFailure(*cfg, st.message());
    return 1;
  }
  if (!cfg->inherit_env.empty()) {
    std::vector<std::string> own;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) own.emplace_back(*e);
    cfg->env = InheritEnvironment(std::move(cfg->env), cfg->inherit_env, own);
  }
  Monitor m(std::move(cfg).value(), watch);
  return m.Run(handshake_fd);
}

}  // namespace lathe::exec
