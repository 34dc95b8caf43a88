#include "lathe/os/command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace lathe::os {
namespace {

// exec() failures are reported through this exit status of the child.
constexpr int kExecFailed = 127;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// What exec takes: a null-terminated array of C strings, built before fork
// (the child may not allocate), pointing into `items`.
class CStrings {
 public:
  explicit CStrings(std::vector<std::string> items) : items_(std::move(items)) {
    for (auto& s : items_) ptrs_.push_back(s.data());
    ptrs_.push_back(nullptr);
  }
  char* const* data() { return ptrs_.data(); }

 private:
  std::vector<std::string> items_;
  std::vector<char*> ptrs_;
};

// An environment as exec takes it: NAME=VALUE each.
CStrings Envp(const std::map<std::string, std::string>& env) {
  std::vector<std::string> entries;
  entries.reserve(env.size());
  for (const auto& [k, v] : env) entries.push_back(k + "=" + v);
  return CStrings(std::move(entries));
}

// In the child: new process group, stdin from /dev/null, stdout/stderr to the
// pipes, `envp` as the environment when given. Only async-signal-safe calls
// here: other threads may hold malloc's lock.
[[noreturn]] void ExecChild(char* const* args, char* const* envp, int out_fd, int err_fd) {
  ::setpgid(0, 0);
  int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd >= 0) ::dup2(null_fd, 0);
  ::dup2(out_fd, 1);
  ::dup2(err_fd, 2);
  if (envp != nullptr) {
    ::execvpe(args[0], args, envp);
  } else {
    ::execvp(args[0], args);
  }
  ::_exit(kExecFailed);
}

void Drain(int fd, std::string& into, bool& open) {
  char buf[8192];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n > 0) {
    if (into.size() < kMaxCommandOutputBytes) into.append(buf, static_cast<size_t>(n));
  } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
    open = false;
  }
}

// Reads both pipes until they close or the deadline passes; false on timeout.
bool Collect(int out_fd, int err_fd, int64_t deadline, CommandOutput& o) {
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    int64_t left = deadline - NowMs();
    if (left <= 0) return false;
    pollfd fds[2] = {{out_open ? out_fd : -1, POLLIN, 0}, {err_open ? err_fd : -1, POLLIN, 0}};
    int r = ::poll(fds, 2, static_cast<int>(left));
    if (r < 0 && errno != EINTR) return false;
    if (fds[0].revents) Drain(out_fd, o.out, out_open);
    if (fds[1].revents) Drain(err_fd, o.err, err_open);
  }
  return true;
}

enum class Reaped { kExited, kTimedOut, kLost };

// Waits for the child until the deadline. kLost: waitpid failed (ECHILD:
// something else in this process reaped it), so its exit status is unknown
// and must not be taken for a success.
Reaped Reap(pid_t pid, int64_t deadline, int& wstatus, int& err) {
  while (true) {
    pid_t r = ::waitpid(pid, &wstatus, WNOHANG);
    if (r == pid) return Reaped::kExited;
    if (r < 0 && errno != EINTR) {
      err = errno;
      return Reaped::kLost;
    }
    if (NowMs() >= deadline) return Reaped::kTimedOut;
    ::usleep(2000);
  }
}

void KillGroup(pid_t pid) {
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  int ws = 0;
  while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
}

// Waits for the child (`collected`: its output ended before the deadline)
// and gives `o` its exit status; kills the group past the deadline.
Result<CommandOutput> Finish(const std::string& cmd, pid_t pid, bool collected, int64_t deadline,
                             int64_t timeout_ms, CommandOutput o) {
  int wstatus = 0, err = 0;
  const Reaped reaped = collected ? Reap(pid, deadline, wstatus, err) : Reaped::kTimedOut;
  if (reaped == Reaped::kTimedOut) {
    KillGroup(pid);
    return Status::DeadlineExceeded(cmd + " did not finish within " + std::to_string(timeout_ms) +
                                    " ms");
  }
  if (reaped == Reaped::kLost) {
    return Status::Internal(cmd + ": its exit status was lost (waitpid: " + std::strerror(err) +
                            ")");
  }
  if (WIFEXITED(wstatus)) {
    o.exit_code = WEXITSTATUS(wstatus);
    if (o.exit_code == kExecFailed && o.out.empty() && o.err.empty()) {
      return Status::NotFound("cannot execute " + cmd);
    }
  } else if (WIFSIGNALED(wstatus)) {
    o.exit_code = 128 + WTERMSIG(wstatus);
  }
  return o;
}

// RunCommand's body; `envp` null: this process's environment.
Result<CommandOutput> RunWithDeadline(const std::vector<std::string>& argv, char* const* envp,
                                      int64_t timeout_ms) {
  if (argv.empty()) return Status::InvalidArgument("empty command");
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return ErrnoStatus("pipe", errno);
  }
  CStrings args(argv);
  int64_t deadline = NowMs() + timeout_ms;
  pid_t pid = ::fork();
  if (pid == 0) ExecChild(args.data(), envp, out_pipe[1], err_pipe[1]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (pid < 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return ErrnoStatus("fork", errno);
  }
  ::setpgid(pid, pid);  // also here, so KillGroup works even before the child ran
  CommandOutput o;
  bool done = Collect(out_pipe[0], err_pipe[0], deadline, o);
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  return Finish(argv[0], pid, done, deadline, timeout_ms, std::move(o));
}

}  // namespace

Result<CommandOutput> RunCommand(const std::vector<std::string>& argv, int64_t timeout_ms) {
  return RunWithDeadline(argv, nullptr, timeout_ms);
}

Result<CommandOutput> RunCommandWithEnv(const std::vector<std::string>& argv,
                                        const std::map<std::string, std::string>& env,
                                        int64_t timeout_ms) {
  CStrings envp = Envp(env);
  return RunWithDeadline(argv, envp.data(), timeout_ms);
}

namespace {

void WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // the reader has gone: the output is lost, the command goes on
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

Result<CommandOutput> RunCommandStreaming(const std::vector<std::string>& argv, int out_fd,
                                          size_t tail_bytes) {
  if (argv.empty()) return Status::InvalidArgument("empty command");
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  CStrings args(argv);
  pid_t pid = ::fork();
  if (pid == 0) {
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::dup2(out_fd, 1);
    ::dup2(err_pipe[1], 2);
    ::execvp(args.data()[0], args.data());
    ::_exit(kExecFailed);
  }
  ::close(err_pipe[1]);
  if (pid < 0) {
    ::close(err_pipe[0]);
    return ErrnoStatus("fork", errno);
  }
  CommandOutput o;
  char buf[8192];
  while (true) {
    ssize_t n = ::read(err_pipe[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] == '\r') buf[i] = '\n';
    }
    WriteAll(out_fd, buf, static_cast<size_t>(n));
    o.err.append(buf, static_cast<size_t>(n));
    if (o.err.size() > 2 * tail_bytes) o.err.erase(0, o.err.size() - tail_bytes);
  }
  ::close(err_pipe[0]);
  if (o.err.size() > tail_bytes) o.err.erase(0, o.err.size() - tail_bytes);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0) {
    if (errno != EINTR) return ErrnoStatus("waitpid", errno);
  }
  if (WIFEXITED(wstatus)) {
    o.exit_code = WEXITSTATUS(wstatus);
    if (o.exit_code == kExecFailed && o.err.empty()) {
      return Status::NotFound("cannot execute " + argv[0]);
    }
  } else if (WIFSIGNALED(wstatus)) {
    o.exit_code = 128 + WTERMSIG(wstatus);
  }
  return o;
}

namespace {

// Splits what arrives into lines for `on_line` and keeps the tail.
class LineSplitter {
 public:
  LineSplitter(size_t tail_bytes, const std::function<void(std::string_view)>& on_line)
      : tail_bytes_(tail_bytes), on_line_(on_line) {}
  void Feed(const char* p, size_t n) {
    tail_.append(p, n);
    if (tail_.size() > 2 * tail_bytes_ + 8192) tail_.erase(0, tail_.size() - tail_bytes_);
    for (size_t i = 0; i < n; ++i) {
      if (p[i] == '\n' || p[i] == '\r') {
        if (!(p[i] == '\n' && last_cr_ && line_.empty())) on_line_(line_);
        line_.clear();
        last_cr_ = p[i] == '\r';
      } else {
        line_.push_back(p[i]);
        last_cr_ = false;
      }
    }
  }
  std::string Finish() {
    if (!line_.empty()) on_line_(line_);
    if (tail_.size() > tail_bytes_) tail_.erase(0, tail_.size() - tail_bytes_);
    return std::move(tail_);
  }

 private:
  const size_t tail_bytes_;
  const std::function<void(std::string_view)>& on_line_;
  std::string line_, tail_;
  bool last_cr_ = false;
};

}  // namespace

Result<CommandOutput> RunCommandLines(const std::vector<std::string>& argv,
                                      const std::map<std::string, std::string>& env, int stdin_fd,
                                      int64_t timeout_ms, size_t tail_bytes,
                                      const std::function<void(std::string_view)>& on_line) {
  if (argv.empty()) return Status::InvalidArgument("empty command");
  CStrings envp = Envp(env);
  CStrings args(argv);
  int out_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  const int64_t deadline = NowMs() + timeout_ms;
  pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls: other threads may hold malloc's lock.
    ::setpgid(0, 0);
    int in = stdin_fd >= 0 ? stdin_fd : ::open("/dev/null", O_RDONLY);
    if (in >= 0) ::dup2(in, 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(out_pipe[1], 2);
    ::execvpe(args.data()[0], args.data(), envp.data());
    ::_exit(kExecFailed);
  }
  ::close(out_pipe[1]);
  if (pid < 0) {
    ::close(out_pipe[0]);
    return ErrnoStatus("fork", errno);
  }
  ::setpgid(pid, pid);
  LineSplitter lines(tail_bytes, on_line);
  bool open = true, timed_out = false;
  char buf[8192];
  while (open) {
    const int64_t left = deadline - NowMs();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd fd = {out_pipe[0], POLLIN, 0};
    int r = ::poll(&fd, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    ssize_t n = ::read(out_pipe[0], buf, sizeof buf);
    if (n > 0) {
      lines.Feed(buf, static_cast<size_t>(n));
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      open = false;
    }
  }
  ::close(out_pipe[0]);
  CommandOutput o;
  o.out = lines.Finish();
  return Finish(argv[0], pid, !timed_out, deadline, timeout_ms, std::move(o));
}

}  // namespace lathe::os
