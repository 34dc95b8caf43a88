#include "lathe/deploy/gateway_control.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include "lathe/net/http_client.h"
#include "lathe/os/files.h"
#include "lathe/os/identity.h"
#include "lathe/os/process.h"
#include "lathe/os/users.h"

namespace lathe::deploy {
namespace {

// The process's command line names our directory: not some other program
// that got the pid after the front ended.
bool IsOurGateway(pid_t pid, const std::string& dir) {
  auto cmdline = os::ReadFileUpTo("/proc/" + std::to_string(pid) + "/cmdline", 1 << 16);
  if (!cmdline.ok()) return false;
  std::string c = *cmdline;
  for (char& ch : c) ch = ch == '\0' ? ' ' : ch;
  return c.find("__gateway") != std::string::npos && c.find(" " + dir + " ") != std::string::npos;
}

}  // namespace

// The front drops to its own user: that user must be able to enter its
// directory (every parent included) to read routes.json. A home made with
// mktemp -d (0700) under a root daemon is one it cannot: said now, naming
// the path, instead of the front failing on each read.
Status GatewayControl::CheckReachable() const {
  if (!c_.uid || !os::IsRoot()) return Status::OK();
  int err = 0;
  // Best effort: the body only looks: what it finds is in the variables it sets.
  (void)os::AsUser(os::IdentityOf(*c_.uid, c_.gid), [&]() -> Status {
    err = os::AccessError(c_.dir, X_OK);
    return Status::OK();
  });
  if (err == 0) return Status::OK();
  auto user = os::LookupUser(*c_.uid);
  return Status::Msg(Code::kFailedPrecondition, "deploy.gateway_cannot_reach",
                     {{"user", user.ok() ? user->name : std::to_string(*c_.uid)},
                      {"path", c_.dir},
                      {"detail", std::strerror(err)}});
}

bool GatewayControl::ReadState() {
  auto text = os::ReadFileUpTo(c_.dir + "/gateway.json", 1 << 16);
  if (!text.ok()) return false;
  auto j = ParseJson(*text);
  if (!j.ok() || !j->is_object()) return false;
  pid_ = static_cast<pid_t>(j->value("pid", 0));
  if (j->value("port", 0) > 0) port_ = j->value("port", 0);
  return pid_ > 0 && os::ProcessAlive(pid_) && IsOurGateway(pid_, c_.dir);
}

bool GatewayControl::Running() { return ReadState(); }

Status GatewayControl::Stop(int timeout_ms, bool* stopped) {
  *stopped = false;
  if (!ReadState()) return Status::OK();
  const pid_t pid = pid_;
  RETURN_IF_ERROR(os::SendSignal(pid, SIGTERM));
  for (int waited = 0; os::ProcessAlive(pid) && IsOurGateway(pid, c_.dir); waited += 50) {
    if (waited >= timeout_ms) {
      // Best effort: the process may have ended already.
      (void)os::SendSignal(pid, SIGKILL);
      break;
    }
    (void)os::TryReap(pid);  // a front this process started
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  *stopped = true;
  return Status::OK();
}

Status GatewayControl::Ensure() {
  if (ReadState()) return Status::OK();
  RETURN_IF_ERROR(os::MakeDirs(c_.dir, 0755));
  RETURN_IF_ERROR(CheckReachable());
  (void)os::RemoveFileIfPresent(c_.dir + "/gateway.json");  // the next front writes its own
  // A front started again keeps the port the last one had when the
  // configuration lets it choose (port 0): clients keep their URL.
  std::string listen = c_.listen;
  if (listen.size() > 2 && listen.compare(listen.size() - 2, 2, ":0") == 0 && port_ > 0 &&
      !retry_any_port_) {
    listen = listen.substr(0, listen.size() - 1) + std::to_string(port_);
  }
  retry_any_port_ = false;
  std::vector<std::string> argv = {c_.self_exe, "__gateway", "--dir", c_.dir, "--listen", listen};
  if (c_.uid)
    argv.insert(argv.end(), {"--user", std::to_string(*c_.uid) + ":" + std::to_string(c_.gid)});
  if (!c_.tls_cert.empty() && !c_.tls_key.empty()) {
    argv.insert(argv.end(), {"--tls-cert", c_.tls_cert, "--tls-key", c_.tls_key});
  }
  ASSIGN_OR_RETURN(pid_t pid, os::SpawnDetached(argv, c_.dir + "/gateway.log", 0600));
  for (int i = 0; i < 200; ++i) {  // its gateway.json: it listens
    if (ReadState() && pid_ == pid) return Status::OK();
    if (os::TryReap(pid)) break;  // it ended: the log says why
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  retry_any_port_ = listen != c_.listen;  // the old port may be taken: any next time
  auto log = os::ReadFileUpTo(c_.dir + "/gateway.log", 1 << 20);
  // Its last line says why, whole: a cut at a byte count read "…3 is in use".
  std::string tail = log.ok() ? *log : "";
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) tail.pop_back();
  if (size_t nl = tail.rfind('\n'); nl != std::string::npos) tail.erase(0, nl + 1);
  if (tail.size() > 600) tail = tail.substr(0, 600) + "…";
  return Status::Msg(Code::kUnavailable, "deploy.gateway_failed",
                     {{"log", c_.dir + "/gateway.log"}, {"detail", tail}});
}

Result<std::string> GatewayControl::Get(const std::string& path) {
  net::ClientOptions o;
  o.unix_socket = c_.dir + "/admin.sock";
  o.connect_timeout_ms = 1000;
  o.timeout_ms = 3000;
  net::HttpClient client(o);
  ASSIGN_OR_RETURN(net::HttpResponse r, client.Request("GET", path));
  if (r.status != 200) {
    return Status::Unavailable("gateway " + path + ": HTTP " + std::to_string(r.status));
  }
  return r.body;
}

Result<Json> GatewayControl::FrontStatus() {
  ASSIGN_OR_RETURN(std::string body, Get("/status"));
  return ParseJson(body);
}

Result<std::string> GatewayControl::Metrics() { return Get("/metrics"); }

Status GatewayControl::Reload() {
  net::ClientOptions o;
  o.unix_socket = c_.dir + "/admin.sock";
  o.connect_timeout_ms = 1000;
  o.timeout_ms = 3000;
  net::HttpClient client(o);
  ASSIGN_OR_RETURN(net::HttpResponse r, client.Request("POST", "/reload"));
  if (r.status != 200)
    return Status::Unavailable("gateway /reload: HTTP " + std::to_string(r.status));
  return Status::OK();
}

Status GatewayControl::WriteRoutes(Json routes) {
  routes.erase("generation");
  std::string body = routes.dump();
  if (body == routes_written_ && os::Exists(c_.dir + "/routes.json")) return Status::OK();
  routes["generation"] = ++generation_;
  RETURN_IF_ERROR(os::MakeDirs(c_.dir, 0755));
  const std::string path = c_.dir + "/routes.json";
  // Written under another name and given to root:<the front's group> (0640:
  // the front reads it, no other user does; it holds the keys' hashes)
  // before it is renamed into place, so the front never sees it unreadable.
  const std::string next = path + ".next";
  RETURN_IF_ERROR(os::WriteFileAtomic(next, routes.dump(2), 0640, os::Durability::kNoSync));
  if (c_.uid && os::IsRoot()) RETURN_IF_ERROR(os::Chown(next, 0, c_.gid));
  RETURN_IF_ERROR(os::Rename(next, path));
  routes_written_ = std::move(body);
  return Status::OK();
}

}  // namespace lathe::deploy
