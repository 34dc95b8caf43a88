// Client stream sockets for a proxy: connecting to a unix socket or a
// loopback TCP port, and telling which user's process accepted the
// connection (docs/security.md, "Run origins").
//
// A root proxy that connects where a user said must not reach something
// that user does not own: a symlink swapped in for the user's socket may
// point at the daemon's own socket, and another user may have bound the
// loopback port first. So the proxy connects, then asks the kernel whose
// listener took the connection, and hangs up unless it is the expected user.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/os/fd.h"

namespace lathe::os {

// Connects a SOCK_STREAM unix socket to `path` (symlinks are followed, as
// connect(2) does: check the peer afterwards). Unavailable when nothing
// listens there or it does not answer within `timeout_ms`.
Result<Fd> ConnectUnix(const std::string& path, int timeout_ms);

// Connects to 127.0.0.1:`port`. Unavailable when refused or out of time.
Result<Fd> ConnectLoopback(int port, int timeout_ms);

// The uid of the process at the other end of a connected unix socket
// (SO_PEERCRED: the listener's credentials when it called listen(2)).
Result<uid_t> UnixPeerUid(int fd);

// The uid owning the socket at the other end of a connected loopback TCP
// socket (127.0.0.0/8 or ::1, IPv4-mapped included). For a client: the owner
// of the listener that accepted it (the accepted socket inherits it). For a
// server's accepted socket: the user whose process connected — for an
// `ssh -L` tunnel, the user's sshd. Asked of the kernel through sock_diag,
// with the TCP table of the calling thread's network namespace
// (/proc/thread-self/net/tcp, tcp6) as the fallback.
// A socket connected inside a run's own namespace (netns.h) is looked up from
// a thread in that namespace. NotFound when no row matches (the peer already
// closed, or the table is another namespace's).
Result<uid_t> LoopbackPeerUid(int fd);

// Parses /proc/net/tcp text: the uid of the row whose local address is
// `local` and remote address `remote`, both as the file writes them
// ("0100007F:22B8"). Exposed for tests.
Result<uid_t> UidOfTcpRow(std::string_view proc_net_tcp, std::string_view local,
                          std::string_view remote);

// `n` distinct free loopback TCP ports, as the kernel picks them for a bind
// to 127.0.0.1:0 (all bound at once, then closed): where a run on the host
// network is told to listen. Nothing holds them afterwards: a process that
// binds one first is found out by the owner check above.
Result<std::vector<int>> PickFreeLoopbackPorts(size_t n);

// Sets send and receive timeouts (SO_SNDTIMEO/SO_RCVTIMEO) on a blocking socket.
Status SetSocketTimeouts(int fd, int timeout_ms);

// Waits until `fd` is readable (or has hung up). False on timeout.
bool WaitReadable(int fd, int timeout_ms);

// Sends all of `data` on a stream socket whether it is in blocking mode or
// not (a socket an event loop used is left non-blocking), waiting up to
// `timeout_ms` whenever no byte could be sent. Never raises SIGPIPE.
Status SendAllWithin(int fd, std::string_view data, int timeout_ms);

}  // namespace lathe::os
