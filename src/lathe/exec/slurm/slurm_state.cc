#include "lathe/exec/slurm/slurm_state.h"

#include <csignal>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>

namespace lathe::exec {
namespace {

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string_view::npos ? at : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

bool IsJobId(std::string_view id) {
  if (id.empty()) return false;
  for (char c : id) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// A number at the start of `s` ("3", "15"); 0 when there is none.
int Number(std::string_view s) {
  int n = 0;
  for (char c : s) {
    if (c < '0' || c > '9' || n > 100000) break;
    n = n * 10 + (c - '0');
  }
  return n;
}

}  // namespace

SlurmJobClass ClassifySlurmState(std::string_view state) {
  const std::string_view word = state.substr(0, state.find(' '));
  for (std::string_view s :
       {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"}) {
    if (word == s) return SlurmJobClass::kQueued;
  }
  for (std::string_view s :
       {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "RESIZING", "STAGE_OUT"}) {
    if (word == s) return SlurmJobClass::kRunning;
  }
  for (std::string_view s :
       {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY",
        "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED"}) {
    if (word == s) return SlurmJobClass::kEnded;
  }
  return SlurmJobClass::kUnknown;
}

std::map<std::string, SlurmQueueEntry> ParseSqueue(std::string_view out) {
  std::map<std::string, SlurmQueueEntry> jobs;
  for (std::string_view line : Split(out, '\n')) {
    std::vector<std::string_view> f = Split(Trim(line), '|');
    if (f.size() < 2 || !IsJobId(Trim(f[0])) || Trim(f[1]).empty()) continue;
    SlurmQueueEntry& e = jobs[std::string(Trim(f[0]))];
    e.state = std::string(Trim(f[1]));
    e.reason = f.size() > 2 ? std::string(Trim(f[2])) : "";
  }
  return jobs;
}

std::string SlurmNote(const SlurmQueueEntry& e) {
  if (e.reason.empty() || e.reason == "None") return e.state;
  return fmt::format("{} ({})", e.state, e.reason);
}

std::map<std::string, SlurmJobEnd> ParseSacct(std::string_view out) {
  std::map<std::string, SlurmJobEnd> jobs;
  for (std::string_view line : Split(out, '\n')) {
    std::vector<std::string_view> f = Split(Trim(line), '|');
    if (f.size() < 3 || !IsJobId(f[0])) continue;  // "123.batch", "123.0": a step
    SlurmJobEnd e;
    e.state = std::string(f[1].substr(0, f[1].find(' ')));
    if (e.state.empty()) continue;
    const size_t colon = f[2].find(':');
    e.exit_code = Number(f[2].substr(0, colon));
    if (colon != std::string_view::npos) e.signal = Number(f[2].substr(colon + 1));
    jobs[std::string(f[0])] = e;
  }
  return jobs;
}

std::optional<ExitRecord> SlurmExitRecord(const SlurmJobEnd& end, bool run_started,
                                          std::string_view detail, int64_t now_ms) {
  if (ClassifySlurmState(end.state) != SlurmJobClass::kEnded) return std::nullopt;
  ExitRecord e;
  e.finished_at_ms = now_ms;
  const std::string_view s = end.state;
  // Cancelled while queued (a stop, an administrator) ends it like a signal.
  if (!run_started && s != "CANCELLED") {
    e.start_error = fmt::format("the Slurm job ended {} before the run started", end.state);
    if (!detail.empty()) e.start_error += fmt::format(": {}", detail);
    return e;
  }
  if (s == "OUT_OF_MEMORY") {
    e.oom_killed = true;
    e.signal = SIGKILL;
  } else if (end.signal > 0) {
    e.signal = end.signal;
  } else if (s == "COMPLETED") {
    e.exit_code = end.exit_code;
  } else if (s == "FAILED") {
    e.exit_code = end.exit_code != 0 ? end.exit_code : 1;
  } else if (s == "NODE_FAIL") {
    e.signal = SIGKILL;
  } else {  // CANCELLED, TIMEOUT, PREEMPTED, DEADLINE, BOOT_FAIL, SPECIAL_EXIT, REVOKED
    e.signal = SIGTERM;
  }
  return e;
}

}  // namespace lathe::exec
