#include "lathe/gateway/relay.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "lathe/os/fd.h"
#include "lathe/os/unix_socket.h"

namespace lathe::gateway {

// One direction of a connection: bytes read from one side, not yet written to
// the other. Read only when empty, so each direction holds one buffer at most.
struct Direction {
  std::vector<char> buf;
  size_t off = 0, len = 0;
  bool eof = false;   // the reading side ended
  bool shut = false;  // ... and the writing side was shut down after the last byte
};

struct Relay::Conn {
  os::Fd client, upstream;
  bool connecting = false;  // the TCP connect is in progress
  Direction up, down;       // client -> upstream, upstream -> client
  bool dead = false;
};

namespace {

constexpr int kBacklog = 128;

// Reads into `d` when it is empty; writes what it holds; shuts `to` down once
// `from` ended and everything went out. False when the connection broke.
bool Pump(int from, int to, Direction& d) {
  if (d.len == 0 && !d.eof) {
    ssize_t n = ::recv(from, d.buf.data(), d.buf.size(), 0);
    if (n > 0) {
      d.off = 0;
      d.len = static_cast<size_t>(n);
    } else if (n == 0) {
      d.eof = true;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return false;
    }
  }
  while (d.len > 0) {
    ssize_t n = ::send(to, d.buf.data() + d.off, d.len, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      return false;
    }
    d.off += static_cast<size_t>(n);
    d.len -= static_cast<size_t>(n);
  }
  if (d.eof && d.len == 0 && !d.shut) {
    // Best effort: the peer may have closed already.
    (void)::shutdown(to, SHUT_WR);
    d.shut = true;
  }
  return true;
}

// A non-blocking connect to 127.0.0.1:port: the socket, and whether the
// connect is still in progress. Invalid when it was refused at once.
os::Fd ConnectLoopback(int port, bool* in_progress) {
  os::Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return fd;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int r;
  do {
    r = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  } while (r != 0 && errno == EINTR);
  *in_progress = r != 0 && errno == EINPROGRESS;
  if (r != 0 && !*in_progress) return os::Fd();
  return fd;
}

}  // namespace

Result<std::unique_ptr<Relay>> Relay::Listen(const RelayOptions& options) {
  if (options.port < 1 || options.port > 65535) {
    return Status::InvalidArgument("relay: port " + std::to_string(options.port) +
                                   " is not 1-65535");
  }
  sockaddr_un addr{};
  if (options.socket_path.empty() || options.socket_path.size() >= sizeof addr.sun_path) {
    return Status::InvalidArgument("relay: socket path too long or empty: " + options.socket_path);
  }
  RETURN_IF_ERROR(os::RemoveStaleUnixSocket(options.socket_path));
  os::Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus("socket", errno);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, options.socket_path.data(), options.socket_path.size());
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return ErrnoStatus("bind " + options.socket_path, errno);
  }
  // Owner and group (the front's, through the directory's setgid bit) may
  // connect; the directory keeps everybody else out in any case.
  if (::chmod(options.socket_path.c_str(), 0660) != 0 || ::listen(fd.get(), kBacklog) != 0) {
    int e = errno;
    ::unlink(options.socket_path.c_str());
    return ErrnoStatus("listen " + options.socket_path, e);
  }
  std::unique_ptr<Relay> r(new Relay());
  r->opts_ = options;
  r->listen_fd_ = fd.release();
  return r;
}

Relay::~Relay() {
  conns_.clear();
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    ::unlink(opts_.socket_path.c_str());
  }
}

size_t Relay::connections() const { return conns_.size(); }

void Relay::AcceptAll() {
  while (true) {
    os::Fd client(::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!client.valid()) return;  // EAGAIN, or an error of that one connection
    ++accepted_;
    if (conns_.size() >= opts_.max_connections) {
      ++refused_;
      continue;
    }
    auto c = std::make_unique<Conn>();
    c->upstream = ConnectLoopback(opts_.port, &c->connecting);
    if (!c->upstream.valid()) {  // the program does not listen (yet)
      ++refused_;
      continue;
    }
    c->client = std::move(client);
    c->up.buf.resize(opts_.buffer_bytes);
    c->down.buf.resize(opts_.buffer_bytes);
    conns_.push_back(std::move(c));
  }
}

bool Relay::Step(int wake_fd, int timeout_ms) {
  // 1. What each descriptor waits for. A side with nothing to wait for is
  // left out (it may have hung up, and poll would report that forever).
  std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}, {wake_fd, POLLIN, 0}};
  for (const auto& c : conns_) {
    short client = 0, upstream = 0;
    if (c->connecting) {
      upstream = POLLOUT;
    } else {
      if (c->up.len == 0 && !c->up.eof) client |= POLLIN;
      if (c->down.len > 0) client |= POLLOUT;
      if (c->down.len == 0 && !c->down.eof) upstream |= POLLIN;
      if (c->up.len > 0) upstream |= POLLOUT;
    }
    fds.push_back({client ? c->client.get() : -1, client, 0});
    fds.push_back({upstream ? c->upstream.get() : -1, upstream, 0});
  }
  int n = ::poll(fds.data(), fds.size(), timeout_ms);
  if (n <= 0) return false;
  // 2. Move bytes on the connections that saw something.
  for (size_t i = 0; i < conns_.size(); ++i) {
    Conn& c = *conns_[i];
    const short cr = fds[2 + 2 * i].revents, ur = fds[3 + 2 * i].revents;
    if (cr == 0 && ur == 0) continue;
    if (c.connecting) {
      int err = 0;
      socklen_t len = sizeof err;
      if (::getsockopt(c.upstream.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
        c.dead = true;
        ++refused_;
        continue;
      }
      c.connecting = false;
    }
    c.dead = !Pump(c.client.get(), c.upstream.get(), c.up) ||
             !Pump(c.upstream.get(), c.client.get(), c.down) || (c.up.shut && c.down.shut);
  }
  std::erase_if(conns_, [](const std::unique_ptr<Conn>& c) { return c->dead; });
  // 3. New connections (after the pass above: fds[] is indexed by conns_).
  if (fds[0].revents & POLLIN) AcceptAll();
  return wake_fd >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

namespace {

// SIGTERM, SIGINT and SIGCHLD blocked in this thread, read from the fd.
Result<os::Fd> BlockedSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGTERM, SIGINT, SIGCHLD}) sigaddset(&set, s);
  if (::pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) return ErrnoStatus("sigmask", errno);
  os::Fd sig(::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!sig.valid()) return ErrnoStatus("signalfd", errno);
  return sig;
}

// The signals waiting on `fd` (BlockedSignals'), each once.
std::vector<signalfd_siginfo> ReadSignals(int fd) {
  std::vector<signalfd_siginfo> out;
  signalfd_siginfo si;
  while (::read(fd, &si, sizeof si) == sizeof si) out.push_back(si);
  return out;
}

}  // namespace

Status RunRelayBeside(const RelayOptions& options) {
  ASSIGN_OR_RETURN(os::Fd sig, BlockedSignals());
  ASSIGN_OR_RETURN(auto relay, Relay::Listen(options));
  while (true) {
    if (!relay->Step(sig.get(), -1)) continue;
    for (const auto& si : ReadSignals(sig.get())) {
      if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) return Status::OK();
    }
  }
}

Result<os::ExitStatus> RunRelayed(const RelayOptions& options,
                                  const std::vector<std::string>& argv) {
  if (argv.empty()) return Status::InvalidArgument("relay: no command");
  ASSIGN_OR_RETURN(os::Fd sig, BlockedSignals());
  ASSIGN_OR_RETURN(auto relay, Relay::Listen(options));
  os::SetEnvVar("PORT", std::to_string(options.port));
  os::SetEnvVar("LATHE_PORT", std::to_string(options.port));
  ASSIGN_OR_RETURN(pid_t child, os::SpawnChild(argv));
  const pid_t parent = ::getppid();
  while (true) {
    if (!relay->Step(sig.get(), -1)) continue;
    for (const auto& si : ReadSignals(sig.get())) {
      const bool from_parent = static_cast<pid_t>(si.ssi_pid) == parent;
      if ((si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) && !from_parent) {
        // Best effort: the process may have ended already.
        (void)os::SendSignal(child, static_cast<int>(si.ssi_signo));
      }
    }
    if (auto done = os::TryReap(child)) return *done;
  }
}

}  // namespace lathe::gateway
