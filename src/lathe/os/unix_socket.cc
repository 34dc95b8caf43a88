#include "lathe/os/unix_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

#include "lathe/os/fd.h"
#include "lathe/os/files.h"

namespace lathe::os {

bool UnixSocketIsLive(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return true;
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return true;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return true;
  return errno != ECONNREFUSED && errno != ENOENT;
}

Status RemoveStaleUnixSocket(const std::string& path) {
  auto st = LstatFile(path);
  if (!st.ok()) return st.status().IsNotFound() ? Status::OK() : st.status().WithContext("stat");
  if (!S_ISSOCK(st->mode)) return Status::AlreadyExists(path + " exists and is not a socket");
  if (UnixSocketIsLive(path)) return Status::AlreadyExists("a server already listens on " + path);
  return RemoveFile(path);
}

}  // namespace lathe::os
