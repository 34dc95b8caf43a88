// What a set of processes listens on: their listening TCP sockets (IPv4 and
// IPv6) and unix stream sockets, read from the kernel's tables of their
// network namespace (/proc/<pid>/net/tcp, tcp6, unix) and matched by socket
// inode against their open descriptors (/proc/<pid>/fd). Used to explain why
// a run's port does not answer (docs/ports.md, "Cannot connect").
//
// Reading another user's /proc/<pid>/fd needs that user's uid or root, as
// the daemon has in both of its modes for the runs it started.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"

namespace lathe::os {

// One listening socket.
struct Listener {
  enum class Kind { kTcp, kUnix };
  Kind kind = Kind::kTcp;
  std::string host;  // kTcp: "127.0.0.1", "0.0.0.0", "::", "::1"
  int port = 0;      // kTcp
  std::string path;  // kUnix: the socket's path ("" for an unnamed one)
  uid_t uid = 0;     // kTcp: the socket's owner (the table's uid column)
  uint64_t inode = 0;

  // "127.0.0.1:6006", "[::]:6006" or the unix path.
  std::string Address() const;
  friend bool operator==(const Listener&, const Listener&) = default;
};

// The rows of /proc/net/tcp (v6 = false) or tcp6 (v6 = true) text in the
// LISTEN state. Lines that do not parse are skipped.
std::vector<Listener> ParseTcpListeners(std::string_view text, bool v6);
// The listening (SO_ACCEPTCON) stream sockets of /proc/net/unix text.
std::vector<Listener> ParseUnixListeners(std::string_view text);

// Every listener of the network namespace that `pid` is in (its TCP tables
// and its unix table), whoever holds them.
Result<std::vector<Listener>> NamespaceListeners(pid_t pid);

// The socket inodes that `pids` hold open ("socket:[N]" in /proc/<pid>/fd).
// A pid that is gone or unreadable adds nothing.
std::set<uint64_t> SocketInodes(const std::vector<pid_t>& pids);

// The listeners held by `pids`, read from the namespace of the first of them
// that is still there (a run's processes share one). Empty when none is.
std::vector<Listener> ListenersOf(const std::vector<pid_t>& pids);

}  // namespace lathe::os
