#include "lathe/os/listening.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "lathe/os/fd.h"
#include "lathe/os/files.h"
#include "lathe/os/netns.h"
#include "lathe/os/process.h"
#include "lathe/os/sock_diag.h"

namespace lathe::os {
namespace {

constexpr std::string_view kTcpListen = "0A";         // TCP_LISTEN in /proc/net/tcp's st column
constexpr unsigned long kUnixAcceptCon = 0x00010000;  // __SO_ACCEPTCON in /proc/net/unix's flags
constexpr unsigned long kUnixStream = 1;              // SOCK_STREAM in its type column

bool ParseHex(std::string_view s, uint32_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
  return ec == std::errc() && p == s.data() + s.size();
}

// "0100007F:1F90" (v4) or 32 hex digits and a port (v6): the address is
// written as 32-bit words in the kernel's (host) byte order.
bool ParseProcAddress(std::string_view s, bool v6, std::string& host, int& port) {
  size_t colon = s.find(':');
  const size_t digits = v6 ? 32 : 8;
  uint32_t p = 0;
  if (colon != digits || !ParseHex(s.substr(colon + 1), p) || p > 65535) return false;
  unsigned char bytes[16];
  for (size_t w = 0; w < digits / 8; ++w) {
    uint32_t word = 0;
    if (!ParseHex(s.substr(w * 8, 8), word)) return false;
    std::memcpy(bytes + 4 * w, &word, 4);
  }
  char text[INET6_ADDRSTRLEN];
  if (!::inet_ntop(v6 ? AF_INET6 : AF_INET, bytes, text, sizeof(text))) return false;
  host = text;
  port = static_cast<int>(p);
  return true;
}

// The listening TCP sockets of one family in the calling thread's network
// namespace, asked of the kernel with sock_diag (as `ss -l` does): the kernel
// returns the listeners alone, where /proc/net/tcp lists every socket (tens
// of thousands in TIME_WAIT on a busy host).
Status DiagListeners(int family, std::vector<Listener>& out) {
  inet_diag_req_v2 req{};
  req.sdiag_family = static_cast<uint8_t>(family);
  req.idiag_states = 1u << TCP_LISTEN;
  ASSIGN_OR_RETURN(Fd nl, SendTcpDiag(req, NLM_F_REQUEST | NLM_F_DUMP));
  alignas(nlmsghdr) char buf[32768];
  while (true) {
    ssize_t got = ::recv(nl.get(), buf, sizeof(buf), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return Status::Unavailable("sock_diag: no answer");
    size_t left = static_cast<size_t>(got);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
      if (h->nlmsg_type == NLMSG_DONE) return Status::OK();
      if (h->nlmsg_type == NLMSG_ERROR) {
        int err = -reinterpret_cast<nlmsgerr*>(NLMSG_DATA(h))->error;
        return Status::Unavailable(fmt::format("sock_diag: {}", std::strerror(err)));
      }
      if (h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg))) continue;
      const auto* m = reinterpret_cast<const inet_diag_msg*>(NLMSG_DATA(h));
      char text[INET6_ADDRSTRLEN];
      if (!::inet_ntop(m->idiag_family, m->id.idiag_src, text, sizeof(text))) continue;
      Listener l;
      l.host = text;
      l.port = ntohs(m->id.idiag_sport);
      l.uid = m->idiag_uid;
      l.inode = m->idiag_inode;
      out.push_back(std::move(l));
    }
  }
}

// The TCP listeners of `pid`'s namespace from /proc (when sock_diag cannot be used).
Result<std::vector<Listener>> ProcTcpListeners(pid_t pid) {
  const std::string net = fmt::format("/proc/{}/net/", pid);
  ASSIGN_OR_RETURN(std::string v4, ReadFile(net + "tcp"));
  std::vector<Listener> out = ParseTcpListeners(v4, false);
  if (auto v6 = ReadFile(net + "tcp6"); v6.ok()) {  // absent without IPv6
    for (auto& l : ParseTcpListeners(*v6, true)) out.push_back(std::move(l));
  }
  return out;
}

// sock_diag for both families, from a thread in `pid`'s network namespace
// when it is not the caller's own.
Result<std::vector<Listener>> DiagTcpListeners(pid_t pid) {
  struct stat mine {
  }, theirs{};
  const std::string ns = fmt::format("/proc/{}/ns/net", pid);
  if (::stat("/proc/thread-self/ns/net", &mine) != 0 || ::stat(ns.c_str(), &theirs) != 0) {
    return Status::Unavailable(fmt::format("{}: {}", ns, std::strerror(errno)));
  }
  std::vector<Listener> out;
  Status st;
  auto dump = [&] {
    st = DiagListeners(AF_INET, out);
    if (st.ok()) st = DiagListeners(AF_INET6, out);
  };
  if (mine.st_ino == theirs.st_ino && mine.st_dev == theirs.st_dev) {
    dump();
  } else {
    auto start = ProcessStartTime(pid);
    if (!start) return Status::NotFound(fmt::format("process {} is gone", pid));
    ASSIGN_OR_RETURN(Fd fd, OpenNetworkNamespace(pid, *start));
    RETURN_IF_ERROR(RunInNetworkNamespace(fd.get(), dump));
  }
  if (!st.ok()) return st;
  return out;
}

}  // namespace

std::string Listener::Address() const {
  if (kind == Kind::kUnix) return path;
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

std::vector<Listener> ParseTcpListeners(std::string_view text, bool v6) {
  std::vector<Listener> out;
  std::istringstream in{std::string(text)};
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string sl, local, remote, st, queues, timer, retr, timeout;
    Listener l;
    if (!(row >> sl >> local >> remote >> st >> queues >> timer >> retr >> l.uid >> timeout >>
          l.inode)) {
      continue;
    }
    if (st != kTcpListen || !ParseProcAddress(local, v6, l.host, l.port)) continue;
    out.push_back(std::move(l));
  }
  return out;
}

std::vector<Listener> ParseUnixListeners(std::string_view text) {
  std::vector<Listener> out;
  std::istringstream in{std::string(text)};
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string num, refs, proto, flags, type, st;
    Listener l;
    l.kind = Listener::Kind::kUnix;
    if (!(row >> num >> refs >> proto >> flags >> type >> st >> l.inode)) continue;
    row >> l.path;  // absent for an unnamed socket
    unsigned long f = std::strtoul(flags.c_str(), nullptr, 16);
    unsigned long t = std::strtoul(type.c_str(), nullptr, 16);
    if ((f & kUnixAcceptCon) == 0 || t != kUnixStream) continue;
    out.push_back(std::move(l));
  }
  return out;
}

Result<std::vector<Listener>> NamespaceListeners(pid_t pid) {
  auto tcp = DiagTcpListeners(pid);
  if (!tcp.ok()) tcp = ProcTcpListeners(pid);
  if (!tcp.ok()) return tcp.status();
  std::vector<Listener> out = std::move(*tcp);
  if (auto unix_table = ReadFile(fmt::format("/proc/{}/net/unix", pid)); unix_table.ok()) {
    for (auto& l : ParseUnixListeners(*unix_table)) out.push_back(std::move(l));
  }
  return out;
}

std::set<uint64_t> SocketInodes(const std::vector<pid_t>& pids) {
  std::set<uint64_t> inodes;
  constexpr std::string_view kPrefix = "socket:[";
  for (pid_t pid : pids) {
    const std::string dir = fmt::format("/proc/{}/fd", pid);
    DIR* d = ::opendir(dir.c_str());
    if (!d) continue;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      char target[64];
      ssize_t n = ::readlinkat(::dirfd(d), e->d_name, target, sizeof(target) - 1);
      if (n <= 0) continue;
      std::string_view t(target, static_cast<size_t>(n));
      if (!t.starts_with(kPrefix) || !t.ends_with(']')) continue;
      t = t.substr(kPrefix.size(), t.size() - kPrefix.size() - 1);
      uint64_t inode = 0;
      auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), inode);
      if (ec == std::errc() && p == t.data() + t.size()) inodes.insert(inode);
    }
    ::closedir(d);
  }
  return inodes;
}

std::vector<Listener> ListenersOf(const std::vector<pid_t>& pids) {
  const std::set<uint64_t> inodes = SocketInodes(pids);
  if (inodes.empty()) return {};
  for (pid_t pid : pids) {
    auto all = NamespaceListeners(pid);
    if (!all.ok()) continue;  // gone: the next one's namespace is the same
    std::vector<Listener> out;
    for (auto& l : *all) {
      if (inodes.count(l.inode)) out.push_back(std::move(l));
    }
    return out;
  }
  return {};
}

}  // namespace lathe::os
