#include "lathe/os/sock_diag.h"

#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace lathe::os {

Result<Fd> SendTcpDiag(inet_diag_req_v2 req, uint16_t flags) {
  Fd nl(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!nl.valid()) return Status::Unavailable(fmt::format("sock_diag: {}", std::strerror(errno)));
  struct {
    nlmsghdr nlh;
    inet_diag_req_v2 req;
  } msg{};
  msg.nlh.nlmsg_len = sizeof(msg);
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = flags;
  msg.req = req;
  msg.req.sdiag_protocol = IPPROTO_TCP;
  if (::send(nl.get(), &msg, sizeof(msg), 0) != static_cast<ssize_t>(sizeof(msg))) {
    return Status::Unavailable(fmt::format("sock_diag: {}", std::strerror(errno)));
  }
  return nl;
}

}  // namespace lathe::os
