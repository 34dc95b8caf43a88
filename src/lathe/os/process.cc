#include "lathe/os/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>

#include "lathe/os/fd.h"
#include "lathe/os/files.h"

namespace lathe::os {
namespace {

// Fields after the command name in /proc/<pid>/stat. The name is in
// parentheses and may itself contain spaces and ')', so split at the last ')'.
std::optional<std::vector<std::string>> StatFields(pid_t pid) {
  auto text = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (!text.ok()) return std::nullopt;
  size_t close = text->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::vector<std::string> fields;
  size_t i = close + 2;
  while (i < text->size()) {
    size_t sp = text->find(' ', i);
    if (sp == std::string::npos) sp = text->size();
    fields.push_back(text->substr(i, sp - i));
    i = sp + 1;
  }
  if (fields.size() < 20) return std::nullopt;
  return fields;
}

// In SpawnDetached's child, before exec; only async-signal-safe calls (another
// thread of the parent may hold malloc's lock). Everything from descriptor 3
// up becomes close-on-exec, so the program inherits only 0, 1 and 2.
void MarkCloseOnExecFrom3() {
  if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
  rlimit lim{};  // kernels before 5.11: one fcntl per possible descriptor
  int max_fd = ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < (1 << 20)
                   ? static_cast<int>(lim.rlim_cur)
                   : (1 << 20);
  for (int fd = 3; fd < max_fd; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
}

// `in`, `out` and `report` are close-on-exec descriptors of the parent.
// `report` gets exec's errno when it fails (it closes on a successful exec).
[[noreturn]] void DetachedChild(char* const* argv, int in, int out, int report) {
  ::setsid();
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Above 2 first, so that dup2 cannot overwrite one with the other when the
  // caller had 0, 1 or 2 closed and open() handed them out.
  int in_hi = ::fcntl(in, F_DUPFD_CLOEXEC, 3);
  int out_hi = ::fcntl(out, F_DUPFD_CLOEXEC, 3);
  int err = 0;
  if (in_hi < 0 || out_hi < 0 || ::dup2(in_hi, 0) < 0 || ::dup2(out_hi, 1) < 0 ||
      ::dup2(out_hi, 2) < 0) {
    err = errno;
  } else {
    MarkCloseOnExecFrom3();
    ::execve(argv[0], argv, environ);
    err = errno;
  }
  // Best effort: after fork, nothing is left to tell a failed report to.
  (void)WriteFullErrno(report, &err, sizeof err);
  ::_exit(127);
}

}  // namespace

// fields[0] is field 3 (state), so field N is fields[N - 3].
std::optional<uint64_t> ProcessStartTime(pid_t pid) {
  auto f = StatFields(pid);
  if (!f) return std::nullopt;
  return std::strtoull((*f)[19].c_str(), nullptr, 10);
}

bool ProcessAlive(pid_t pid, std::optional<uint64_t> start_time) {
  if (pid <= 0) return false;
  auto f = StatFields(pid);
  if (!f) return false;
  if ((*f)[0] == "Z" || (*f)[0] == "X") return false;
  if (start_time && std::strtoull((*f)[19].c_str(), nullptr, 10) != *start_time) return false;
  return true;
}

std::optional<pid_t> ParentPid(pid_t pid) {
  auto f = StatFields(pid);
  if (!f) return std::nullopt;
  return static_cast<pid_t>(std::atoi((*f)[1].c_str()));
}

std::vector<pid_t> Descendants(pid_t root) {
  std::multimap<pid_t, pid_t> children;  // parent -> child
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return {};
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    if (auto pp = ParentPid(static_cast<pid_t>(pid))) children.emplace(*pp, pid);
  }
  ::closedir(d);
  std::vector<pid_t> out;
  std::vector<pid_t> stack = {root};
  while (!stack.empty()) {
    pid_t p = stack.back();
    stack.pop_back();
    auto [lo, hi] = children.equal_range(p);
    for (auto it = lo; it != hi; ++it) {
      out.push_back(it->second);
      stack.push_back(it->second);
    }
  }
  return out;
}

pid_t SelfPid() { return ::getpid(); }

Result<std::string> CurrentDir() {
  char buf[PATH_MAX];
  if (::getcwd(buf, sizeof buf) == nullptr) return ErrnoStatus("getcwd", errno);
  return std::string(buf);
}

unsigned CurrentUmask() {
  mode_t mask = ::umask(022);
  ::umask(mask);
  return static_cast<unsigned>(mask);
}

Result<ResourceLimit> GetResourceLimit(LimitedResource resource) {
  rlimit r{};
  if (::getrlimit(resource == LimitedResource::kOpenFiles ? RLIMIT_NOFILE : RLIMIT_NPROC, &r) !=
      0) {
    return ErrnoStatus("getrlimit", errno);
  }
  auto conv = [](rlim_t v) { return v == RLIM_INFINITY ? kNoLimit : static_cast<uint64_t>(v); };
  return ResourceLimit{conv(r.rlim_cur), conv(r.rlim_max)};
}

uint64_t RaiseOpenFileLimit(uint64_t want) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  if (lim.rlim_cur >= want) return lim.rlim_cur;
  rlimit more{want, std::max<rlim_t>(want, lim.rlim_max)};
  if (::setrlimit(RLIMIT_NOFILE, &more) == 0) return want;
  more = {std::min<rlim_t>(want, lim.rlim_max), lim.rlim_max};  // unprivileged: up to the hard one
  if (::setrlimit(RLIMIT_NOFILE, &more) == 0) return more.rlim_cur;
  return lim.rlim_cur;
}

Status SendSignal(pid_t pid, int signal) {
  if (pid <= 0) return Status::InvalidArgument("bad pid");
  if (::kill(pid, signal) != 0 && errno != ESRCH) {
    return ErrnoStatus("kill " + std::to_string(pid), errno);
  }
  return Status::OK();
}

ExitStatus DecodeWaitStatus(int wstatus) {
  ExitStatus s;
  if (WIFEXITED(wstatus)) {
    s.exited = true;
    s.code = WEXITSTATUS(wstatus);
  } else if (WIFSIGNALED(wstatus)) {
    s.signal = WTERMSIG(wstatus);
    s.core = WCOREDUMP(wstatus);
  }
  return s;
}

std::optional<ExitStatus> TryReap(pid_t pid) {
  int ws = 0;
  pid_t r;
  do {
    r = ::waitpid(pid, &ws, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r != pid) return std::nullopt;
  return DecodeWaitStatus(ws);
}

namespace {

// Forks; the child runs child(argv as char**, the report pipe's write end),
// which execs or writes its errno to the pipe and exits. The parent learns
// which from the pipe (end of file: exec succeeded and closed it) and reaps
// a child that could not exec. One copy of the protocol for both spawns.
template <typename Child>
Result<pid_t> ForkReported(const std::vector<std::string>& argv, Child child) {
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  Fd report_r(report[0]), report_w(report[1]);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus("fork", errno);
  if (pid == 0) child(args.data(), report_w.get());
  // Best effort: the parent reads the report pipe to its end either way.
  (void)report_w.Close("pipe");
  int err = 0;
  auto got = ReadUpTo(report_r.get(), &err, sizeof err, "pipe");
  if (got.ok() && *got == 0) return pid;
  int ws = 0;
  while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  if (!got.ok()) return got.status();
  return ErrnoStatus("execute " + argv[0], *got == sizeof err ? err : EIO);
}

[[noreturn]] void InheritingChild(char** args, int report_fd) {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int s : {SIGPIPE, SIGTERM, SIGINT, SIGCHLD}) ::signal(s, SIG_DFL);
  ::execvp(args[0], args);
  int err = errno;
  // Best effort: after fork, nothing is left to tell a failed report to.
  (void)WriteFullErrno(report_fd, &err, sizeof err);
  ::_exit(127);
}

}  // namespace

Result<pid_t> SpawnDetached(const std::vector<std::string>& argv, const std::string& output_path,
                            unsigned output_mode) {
  if (argv.empty()) return Status::InvalidArgument("SpawnDetached: empty argv");
  ASSIGN_OR_RETURN(Fd out, Fd::Open(output_path, O_WRONLY | O_CREAT | O_APPEND, output_mode));
  ASSIGN_OR_RETURN(Fd in, Fd::Open("/dev/null", O_RDONLY));
  const int in_fd = in.get(), out_fd = out.get();
  return ForkReported(argv, [in_fd, out_fd](char** args, int report_fd) {
    DetachedChild(args, in_fd, out_fd, report_fd);
  });
}

Result<pid_t> SpawnChild(const std::vector<std::string>& argv) {
  if (argv.empty()) return Status::InvalidArgument("SpawnChild: empty argv");
  return ForkReported(argv, InheritingChild);
}

std::string SignalName(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  if (abbrev != nullptr) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(signal);
}

std::string SelfExe(const std::string& fallback) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : fallback;
}

Status ExecReplace(const std::vector<std::string>& argv) {
  if (argv.empty()) return Status::InvalidArgument("exec: no program");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  return ErrnoStatus("exec " + argv[0], errno);
}

void SetEnvVar(const std::string& name, const std::string& value) {
  ::setenv(name.c_str(), value.c_str(), 1);
}

void UnsetEnvVar(const std::string& name) { ::unsetenv(name.c_str()); }

}  // namespace lathe::os
