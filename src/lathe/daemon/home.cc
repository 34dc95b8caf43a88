#include "lathe/daemon/home.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "lathe/os/fd.h"
#include "lathe/os/files.h"
#include "lathe/os/identity.h"
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
    auto u = os::LookupUser(os::RealUid());
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
  p.key = home + "/secret.key";
  return p;
}

namespace {
// chmod, where the file exists.
Status ModeIfPresent(const std::string& path, mode_t mode) {
  Status s = os::Chmod(path, mode);
  return s.IsNotFound() ? Status::OK() : s;
}

Status Dir(const std::string& path, mode_t mode) {
  RETURN_IF_ERROR(os::MakeDirs(path, mode));
  return os::Chmod(path, mode);
}
}  // namespace

// Older homes gave each run directory to its user, who could then swap its
// entries for symlinks that root's monitor and daemon would follow: every
// run directory is root's again (its log stays the user's file).
Status SecureRunDirs(const HomePaths& paths) {
  const mode_t mode = paths.system ? 0711 : 0700;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(paths.runs, ec)) {
    std::string dir = entry.path().string();
    auto st = os::LstatFile(dir);
    if (!st.ok() || !S_ISDIR(st->mode)) continue;
    if (st->uid != os::EffectiveUid()) {
      RETURN_IF_ERROR(os::ChownNoFollow(dir, os::EffectiveUid(), os::EffectiveGid()));
    }
    if ((st->mode & 07777) != mode) RETURN_IF_ERROR(os::Chmod(dir, mode));
  }
  return Status::OK();
}

Status SecureHome(const HomePaths& paths) {
  RETURN_IF_ERROR(Dir(paths.home, paths.system ? 0755 : 0700));
  RETURN_IF_ERROR(Dir(paths.runs, paths.system ? 0711 : 0700));
  RETURN_IF_ERROR(Dir(paths.store, 0700));
  {
    // Created empty with its mode before SQLite opens it; never through a symlink.
    ASSIGN_OR_RETURN(os::Fd db, os::Fd::Open(paths.db, O_RDWR | O_CREAT | O_NOFOLLOW, 0600));
    RETURN_IF_ERROR(os::ChmodOpenFile(db.get(), 0600, paths.db));
  }
  for (const char* side : {"-wal", "-shm", "-journal"}) {
    RETURN_IF_ERROR(ModeIfPresent(paths.db + side, 0600));
  }
  for (const std::string& f : {paths.token, paths.key, paths.lock, paths.log})
    RETURN_IF_ERROR(ModeIfPresent(f, 0600));
  return SecureRunDirs(paths);
}

HomePaths DaemonHome(const std::string& home_flag) {
  bool root = os::IsRoot();
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
  if (!os::IsRoot()) out.push_back({PathsFor(UserHome(), false), "user daemon"});
  out.push_back({PathsFor(kSystemHome, true), "system daemon"});
  return out;
}

std::string ReadableStoreDir() {
  for (const auto& c : ClientCandidates()) {
    std::string config = c.paths.store + "/config.json";
    if (os::AccessError(config, R_OK) == 0) return c.paths.store;
  }
  return "";
}

std::string UnreadableStoreDir() {
  for (const auto& c : ClientCandidates()) {
    std::string config = c.paths.store + "/config.json";
    if (os::AccessError(config, R_OK) == EACCES) return c.paths.store;
  }
  return "";
}

}  // namespace lathe::daemon
