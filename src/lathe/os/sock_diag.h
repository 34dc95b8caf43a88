// The kernel's socket table, asked through netlink (sock_diag, as `ss`
// does), for os/listening.cc and os/stream_socket.cc: one request out, the
// caller reads its answers from the returned socket.
#pragma once

#include <linux/inet_diag.h>

#include <cstdint>

#include "lathe/common/status.h"
#include "lathe/os/fd.h"

namespace lathe::os {

// Opens a NETLINK_SOCK_DIAG socket (in the calling thread's network
// namespace) and sends `req` for TCP sockets with netlink `flags`
// (NLM_F_REQUEST, with NLM_F_DUMP for a listing). Unavailable when sock_diag
// cannot be used.
Result<Fd> SendTcpDiag(inet_diag_req_v2 req, uint16_t flags);

}  // namespace lathe::os
