// What HttpServer's connections (sessions, http_session.h) share with the
// threads that answer them: Core, the state of one server that its sessions
// and its outstanding Responders hold; SessionBase, what those threads may
// ask of a session; and the Responder handed to the handler (NewResponder).
//
// Private to the net module (http_server.cc, http_session.cc). Free of
// Boost: a session's strand is reached only through SessionBase.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lathe/net/conn_limits.h"
#include "lathe/net/http.h"
#include "lathe/net/http_server.h"
#include "lathe/os/fd.h"

// The server's internals, in a namespace of their own so that their short
// names (Core, Client) stay out of lathe::net.
namespace lathe::net::detail {

using Clock = std::chrono::steady_clock;
using Admission = ConnectionLimits::Admission;

// The server's own answers (limits, timeouts, refusals) share the shape of
// the KServe v2 error, {"error": "..."}, so clients of `lathe serve` and of the
// daemon parse one format whoever produced the error.
inline constexpr std::string_view kJson = "application/json";
std::string_view ErrorBody(int status);
HttpResponse ErrorResponse(int status, std::string_view body);

// Who a connection comes from: what its requests say of it and what it is
// counted under.
struct Client {
  std::optional<PeerCred> peer;          // a unix-socket client's SO_PEERCRED
  bool loopback = false;                 // a TCP client on this host's loopback
  std::optional<unsigned> loopback_uid;  // ... and the uid owning its socket
  ConnClient count;
};

// Lets ResponseStream::Write know it must not block: blocking an I/O thread
// could wait for work that only this thread would run. Set by each I/O
// thread before it runs its loop.
inline thread_local bool t_io_thread = false;

// Shared by a ResponseStream (writer side) and its session (socket side).
struct StreamState {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t written = 0;  // highest chunk ticket handed to the socket; guarded by mu
  std::atomic<bool> gone{false};

  void MarkGone() {
    {
      std::lock_guard<std::mutex> l(mu);
      gone = true;
    }
    cv.notify_all();
  }
  void MarkWritten(uint64_t ticket) {
    {
      std::lock_guard<std::mutex> l(mu);
      if (ticket > written) written = ticket;
    }
    cv.notify_all();
  }
};

// What foreign threads (Responder, ResponseStream, Stop) may ask of a session.
// Every method only posts onto the session's strand, except CloseNow, which
// Stop calls once no I/O thread runs, and RespondHere, for the thread that is
// running the session's strand (where RunningHere is true).
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual bool RunningHere() const = 0;
  // The session's strand, as a loop others may run I/O on (Responder::loop).
  virtual IoLoop* Loop() = 0;
  virtual void RespondHere(uint64_t seq, HttpResponse response) = 0;
  virtual void PostResponse(uint64_t seq, HttpResponse response) = 0;
  virtual void PostStreamStart(uint64_t seq, std::shared_ptr<StreamState> st, int status,
                               std::string content_type, Headers headers) = 0;
  virtual void PostChunk(std::shared_ptr<StreamState> st, std::string data, uint64_t ticket,
                         bool last) = 0;
  virtual void PostTunnel(uint64_t seq, HttpResponse head, os::Fd upstream, std::string leftover,
                          TunnelOptions options) = 0;
  virtual void PostDrain() = 0;
  virtual void PostClose() = 0;
  virtual void CloseNow() = 0;
};

// State shared between the server, its sessions and outstanding responders.
// Thread-safe.
class Core {
 public:
  Core(ServerOptions options, Handler handler);

  const ServerOptions options;
  const Handler handler;
  std::atomic<bool> draining{false};

  // Runs fn(session) with the lock held, unless the server stopped or the
  // session is gone. fn must only post (never run session code inline).
  template <typename Fn>
  bool WithSession(const std::weak_ptr<SessionBase>& weak, Fn&& fn) {
    std::lock_guard<std::mutex> l(mu_);
    if (stopped_) return false;
    std::shared_ptr<SessionBase> s = weak.lock();
    if (!s) return false;
    fn(*s);
    return true;
  }

  // Requires mu_ (call inside WithSession). Stop marks tracked streams gone.
  void TrackStreamLocked(const std::shared_ptr<StreamState>& st);

  // Decides how a new connection is treated: served, refused with a 503
  // (over a pool's limit, or over its client's), or closed at once (too many
  // refusals in flight).
  Admission Admit(const ConnClient& c) { return limits_.Admit(c); }

  // Logs refusals, a line at most every refusal_log_interval_ms
  // (conn_limits.h) with how many there were: a client hammering the server
  // cannot fill its log, and the operator still learns who is refused.
  void NoteRefusal(const ConnClient& c, Admission why);

  void Register(std::shared_ptr<SessionBase> s);
  // Called by the session when it closes; may drop the last strong reference.
  void Unregister(SessionBase* s, bool served, const ConnClient& client);
  std::vector<std::shared_ptr<SessionBase>> Sessions() const;
  bool WaitNoSessions(Clock::time_point deadline);

  void MarkDrainingAndEndStreams();
  // After this no foreign thread posts anything; every open stream is gone.
  void MarkStopped();

  size_t served() const { return limits_.served(); }

  // A slot for one more tunnel, unless max_tunnels are open.
  bool AcquireTunnel();
  void ReleaseTunnel();

 private:
  mutable std::mutex mu_;
  std::condition_variable empty_cv_;
  bool stopped_ = false;                                                     // guarded by mu_
  std::unordered_map<SessionBase*, std::shared_ptr<SessionBase>> sessions_;  // guarded by mu_
  std::vector<std::weak_ptr<StreamState>> streams_;                          // guarded by mu_
  size_t streams_cap_ = 16;                                                  // guarded by mu_
  size_t tunnels_ = 0;                                                       // guarded by mu_
  ConnectionLimits limits_;  // thread-safe on its own
};

// The Responder for request `seq` of `session`: a thin handle that posts its
// answer onto the session (or, on the session's own thread, answers at once).
std::unique_ptr<Responder> NewResponder(std::shared_ptr<Core> core,
                                        std::weak_ptr<SessionBase> session, uint64_t seq);

}  // namespace lathe::net::detail
