// Where a daemon keeps its state and where clients find it.
//
// User mode: $LATHE_HOME, else $XDG_STATE_HOME/lathe (~/.local/state/lathe).
// System mode (daemon started as root without LATHE_HOME): state in
// /var/lib/lathe, socket /run/lathe/lathe.sock reachable by every local user.
// Clients look for LATHE_HOME, then the user's own daemon, then the system
// socket.
#pragma once

#include <string>

#include "lathe/common/status.h"

namespace lathe::daemon {

struct HomePaths {
  std::string home;      // state directory
  std::string socket;    // unix socket
  std::string db;        // SQLite database
  std::string token;     // bearer token for TCP (0600)
  std::string lock;      // one daemon per home
  std::string endpoint;  // endpoint.json: where the daemon listens
  std::string runs;      // per-run directories
  std::string store;     // the checkpoint snapshot store
  std::string log;       // daemon log when started by `lathe up`
  std::string key;       // secret.key: users' secrets are sealed with it (0600)
  bool system = false;   // system mode
};

HomePaths PathsFor(const std::string& home, bool system);

// Creates the home's directories and gives everything in it the mode it
// must have, whatever the process umask (runs' monitors inherit that, so it
// is not relied on) and whatever an older Lathe left:
//   home 0755 in system mode (users reach the socket and their run
//   directories), else 0700; runs/ 0711 (system) / 0700; store/ 0700;
//   lathe.db and SQLite's -wal, -shm and -journal 0600 (the database is
//   created empty with that mode before SQLite opens it; SQLite gives its
//   side files the database's mode); token, secret.key, daemon.lock,
//   daemon.log 0600;
//   endpoint.json stays 0644 (where the daemon listens, for every client).
Status SecureHome(const HomePaths& paths);

// The home a daemon started now would use.
HomePaths DaemonHome(const std::string& home_flag);

// Candidate homes for a client, in lookup order: LATHE_HOME; the user's own
// (XDG) home; the system home. Each with `why` for `lathe status`.
struct Candidate {
  HomePaths paths;
  std::string why;  // "LATHE_HOME", "user daemon", "system daemon"
};
std::vector<Candidate> ClientCandidates();

// The snapshot store of the first candidate home that has one this user can
// read ("" when none): what `lathe snap` and the doctor use without --store.
std::string ReadableStoreDir();
// The store of the first candidate home that has one this user may not read
// (permission denied), else "".
std::string UnreadableStoreDir();

}  // namespace lathe::daemon
