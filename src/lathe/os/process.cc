#include "lathe/os/process.h"

#include <dirent.h>
#include <sys/wait.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>

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

}  // namespace lathe::os
