// lathe __gateway (internal): the deployments' front (gateway/front.h,
// docs/gateway.md), a process of its own that the daemon starts detached
// and configures through files only:
//   lathe __gateway --dir DIR --listen HOST:PORT [--user UID:GID]
//                   [--probe-interval DURATION] [--tls-cert FILE --tls-key FILE]
//                   [--io-threads N]
// In order: binds HOST:PORT (port 0: any free one) and DIR/admin.sock and
// reads the TLS files while it may still be root; writes DIR/gateway.json;
// becomes UID:GID for good when root and --user is given; serves until
// SIGTERM or SIGINT (or until DIR is removed), then lets requests in flight finish (up to 10 s) and
// exits 0. Parsed by hand, before CLI11 (main.cc), as the other internal
// commands are.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "cmd/commands.h"
#include "lathe/common/i18n.h"
#include "lathe/common/log.h"
#include "lathe/common/units.h"
#include "lathe/gateway/front.h"
#include "lathe/os/clock.h"
#include "lathe/os/files.h"
#include "lathe/os/identity.h"
#include "lathe/os/process.h"
#include "lathe/os/users.h"

namespace lathe::cmd {
namespace {

constexpr long kMaxIoThreads = 64;

struct GatewayFlags {
  std::string dir, listen, user, probe_interval = "1s", tls_cert, tls_key, io_threads;
};

Status BadFlag(const std::string& flag, const std::string& value) {
  return Status::Msg(Code::kInvalidArgument, "gateway.bad_flag",
                     {{"flag", flag}, {"value", value}});
}

Result<std::pair<std::string, int>> ParseListen(const std::string& v) {
  const size_t colon = v.rfind(':');
  if (colon == std::string::npos) return BadFlag("--listen", v);
  std::string host = v.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string port = v.substr(colon + 1);
  char* end = nullptr;
  long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 0 || p > 65535) return BadFlag("--listen", v);
  return std::make_pair(host, static_cast<int>(p));
}

Result<std::pair<uid_t, gid_t>> ParseUser(const std::string& v) {
  const size_t colon = v.find(':');
  if (colon == std::string::npos) return BadFlag("--user", v);
  auto num = [](const std::string& s, unsigned long* out) {
    char* end = nullptr;
    *out = std::strtoul(s.c_str(), &end, 10);
    return !s.empty() && *end == '\0' && s[0] != '-' && *out < 0xFFFFFFFFul;
  };
  unsigned long u = 0, g = 0;
  if (!num(v.substr(0, colon), &u) || !num(v.substr(colon + 1), &g)) return BadFlag("--user", v);
  return std::make_pair(static_cast<uid_t>(u), static_cast<gid_t>(g));
}

// True when `dir` no longer exists or is another directory than `was`.
bool DirectoryGone(const std::string& dir, const os::FileStamp& was) {
  auto now = os::StatFile(dir);
  if (!now.ok()) return now.status().IsNotFound();
  return now->inode != was.inode || now->device != was.device;
}

Status RunGateway(const GatewayFlags& f) {
  if (f.dir.empty()) return BadFlag("--dir", "");
  if (f.listen.empty()) return BadFlag("--listen", "");
  if (f.tls_cert.empty() != f.tls_key.empty()) {
    return Status::Msg(Code::kInvalidArgument, "gateway.tls_incomplete");
  }
  gateway::FrontOptions o;
  o.dir = f.dir;
  ASSIGN_OR_RETURN(auto listen, ParseListen(f.listen));
  o.host = listen.first;
  o.port = listen.second;
  auto interval = ParseDuration(f.probe_interval);
  if (!interval.ok() || interval->count() < 10)
    return BadFlag("--probe-interval", f.probe_interval);
  o.probe_interval_ms = static_cast<int>(std::min<int64_t>(interval->count(), 3'600'000));
  o.probe_timeout_ms = std::clamp(2 * o.probe_interval_ms, 1000, 10000);
  if (!f.tls_cert.empty()) o.tls = net::TlsFiles{f.tls_cert, f.tls_key};
  if (!f.io_threads.empty()) {
    char* end = nullptr;
    const long n = std::strtol(f.io_threads.c_str(), &end, 10);
    if (*end != '\0' || n < 1 || n > kMaxIoThreads) return BadFlag("--io-threads", f.io_threads);
    o.io_threads = static_cast<int>(n);
  }
  std::optional<std::pair<uid_t, gid_t>> user;
  if (!f.user.empty()) {
    ASSIGN_OR_RETURN(user, ParseUser(f.user));
  }

  // Signals: SIGTERM/SIGINT are waited for below (blocked before any thread
  // starts, so every thread inherits the mask); SIGPIPE never kills the front.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  // 1. The listeners, while still privileged; 2. gateway.json; 3. the drop.
  ASSIGN_OR_RETURN(auto front, gateway::Front::Create(o));
  RETURN_IF_ERROR(gateway::WriteGatewayJson(f.dir, front->port(), front->admin_socket(),
                                            os::RealClock().NowMs()));
  if (user && os::IsRoot()) {
    if (Status s = os::DropPrivileges(user->first, user->second); !s.ok()) {
      return Status::Msg(Code::kFailedPrecondition, "gateway.drop_failed",
                         {{"user", f.user}, {"error", s.message()}});
    }
  } else if (user && (os::EffectiveUid() != user->first || os::EffectiveGid() != user->second)) {
    spdlog::warn("gateway: not root: --user {} ignored, serving as uid {}", f.user,
                 os::EffectiveUid());
  }
  RETURN_IF_ERROR(front->Start());
  spdlog::info("gateway: serving on {}:{} (pid {}, uid {})", o.host, front->port(), os::SelfPid(),
               os::EffectiveUid());
  // The front lives in DIR; once DIR is gone or another directory took its
  // place (the daemon's home removed, a new daemon's front started there),
  // nothing of it can be configured or stopped through its files: it exits.
  const auto dir_at_start = os::StatFile(f.dir);
  for (;;) {
    const timespec second{1, 0};
    int sig = sigtimedwait(&set, nullptr, &second);
    if (sig == SIGINT || sig == SIGTERM) break;
    if (sig < 0 && dir_at_start.ok() && DirectoryGone(f.dir, *dir_at_start)) {
      spdlog::error("gateway: its directory {} is gone; stopping", f.dir);
      break;
    }
  }
  spdlog::info("gateway: stopping");
  front->Stop();
  return Status::OK();
}

}  // namespace

int GatewayMain(int argc, char** argv) {
  InitLogging("info");
  GatewayFlags f;
  for (int i = 2; i < argc; ++i) {  // argv[1] is "__gateway"
    const std::string a = argv[i];
    std::string* out = nullptr;
    if (a == "--dir") out = &f.dir;
    if (a == "--listen") out = &f.listen;
    if (a == "--user") out = &f.user;
    if (a == "--probe-interval") out = &f.probe_interval;
    if (a == "--tls-cert") out = &f.tls_cert;
    if (a == "--tls-key") out = &f.tls_key;
    if (a == "--io-threads") out = &f.io_threads;
    if (out == nullptr || i + 1 >= argc) {
      std::fprintf(stderr, "lathe __gateway: %s\n",
                   Localize(BadFlag(a, i + 1 < argc ? argv[i + 1] : ""), DetectLang()).c_str());
      return 2;
    }
    *out = argv[++i];
  }
  Status s = RunGateway(f);
  if (s.ok()) return 0;
  std::fprintf(stderr, "lathe __gateway: %s\n", Localize(s, DetectLang()).c_str());
  return s.IsInvalidArgument() ? 2 : 1;
}

}  // namespace lathe::cmd
