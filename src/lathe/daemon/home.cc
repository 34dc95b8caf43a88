#include "lathe/daemon/home.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "lathe/os/users.h"

namespace lathe::daemon {
namespace {
constexpr const char* kSystemHome = "/var/lib/lathe";
constexpr const char* kSystemSocket = "/run/lathe/lathe.sock";

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string UserHome() {
  std::string xdg = Env("XDG_STATE_HOME");
  if (!xdg.empty()) return xdg + "/lathe";
  std::string home = Env("HOME");
  if (home.empty()) {
    auto u = os::LookupUser(::getuid());
    home = u.ok() ? u->home : "/tmp";
  }
  return home + "/.local/state/lathe";
}
}  // namespace

HomePaths PathsFor(const std::string& home, bool system) {
  HomePaths p;
  p.home = home;
  p.system = system;
  p.socket = system && home == kSystemHome ? kSystemSocket : home + "/lathe.sock";
  p.db = home + "/lathe.db";
  p.token = home + "/token";
  p.lock = home + "/daemon.lock";
  p.endpoint = home + "/endpoint.json";
  p.runs = home + "/runs";
  p.store = home + "/store";
  p.log = home + "/daemon.log";
  return p;
}

HomePaths DaemonHome(const std::string& home_flag) {
  bool root = ::geteuid() == 0;
  if (!home_flag.empty()) return PathsFor(home_flag, root);
  std::string env = Env("LATHE_HOME");
  if (!env.empty()) return PathsFor(env, root);
  if (root) return PathsFor(kSystemHome, true);
  return PathsFor(UserHome(), false);
}

std::vector<Candidate> ClientCandidates() {
  std::vector<Candidate> out;
  std::string env = Env("LATHE_HOME");
  if (!env.empty()) {
    out.push_back({PathsFor(env, false), "LATHE_HOME"});
    return out;  // an explicit home is never second-guessed
  }
  if (::geteuid() != 0) out.push_back({PathsFor(UserHome(), false), "user daemon"});
  out.push_back({PathsFor(kSystemHome, true), "system daemon"});
  return out;
}

std::string ReadableStoreDir() {
  for (const auto& c : ClientCandidates()) {
    std::string config = c.paths.store + "/config.json";
    if (::access(config.c_str(), R_OK) == 0) return c.paths.store;
  }
  return "";
}

std::string UnreadableStoreDir() {
  for (const auto& c : ClientCandidates()) {
    std::string config = c.paths.store + "/config.json";
    if (::access(config.c_str(), R_OK) != 0 && errno == EACCES) return c.paths.store;
  }
  return "";
}

}  // namespace lathe::daemon
