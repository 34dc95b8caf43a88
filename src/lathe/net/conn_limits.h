// ConnectionLimits: the connection accounting of the HTTP server
// (http_server.h, ServerOptions): which new connection is served, which is
// refused over a limit, and when a refusal is worth a log line.
//
// The pool of max_connections is shared so that no one client can lock the
// others out (docs/api.md and docs/gateway.md, "Limits"):
//   - each client holds at most its own limit (ConnClient::limit: per uid on a
//     unix socket and on loopback, per address otherwise);
//   - TCP clients together hold at most max_tcp_connections, so that the rest
//     is kept for the unix socket;
//   - the last newcomer_connections slots of either pool go only to a client
//     holding no connection yet;
//   - a reserved client (root and the server's own user on the unix socket)
//     has no limit of its own and may use reserved_connections beyond.
// Over a limit the connection is refused (the server answers its request
// 503), or dropped at once while max_refusing refusals are still in flight.
//
// Pure bookkeeping, no I/O and no clock of its own (the caller passes the
// time). Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace lathe::net {

// Who a connection comes from, as it is counted.
struct ConnClient {
  // "uid 1000" (unix socket), "loopback uid 1001" (TCP from this host),
  // "10.0.0.5", "2001:db8:1:2::/64", "loopback" (a loopback client whose uid
  // could not be told); also what the log names.
  std::string key;
  size_t limit = 0;       // connections this client may hold; 0: no limit
  bool tcp = false;       // counts against max_tcp_connections
  bool per_user = false;  // keyed by a uid: a refusal says "from this user"
  bool reserved = false;  // no limit of its own; may use reserved_connections
};

struct ConnLimitOptions {
  size_t max_connections = 1024;    // served connections in all
  size_t max_tcp_connections = 0;   // of them TCP (TLS included); 0: max_connections
  size_t newcomer_connections = 0;  // of each pool, kept for clients holding none
  size_t reserved_connections = 0;  // beyond max_connections, for reserved clients
  size_t max_refusing = 64;         // refusals in flight (awaiting their 503); beyond: drop
  int64_t refusal_log_interval_ms = 10'000;  // at most one log line per interval
};

class ConnectionLimits {
 public:
  enum class Admission {
    kServe,
    kReject,        // every slot the client may use is taken: 503
    kRejectClient,  // the client holds its own limit: 503 naming the client
    kDrop,          // over a limit while max_refusing refusals are in flight: closed at once
  };

  explicit ConnectionLimits(ConnLimitOptions o) : o_(o) {}

  // Counts a new connection of `c` as served or refusing (kDrop counts as
  // neither). Every kServe, kReject and kRejectClient gets one Release.
  Admission Admit(const ConnClient& c);
  // The connection admitted as `served` (kServe) or refusing has closed.
  void Release(const ConnClient& c, bool served);

  // What a log line about refusals says: how many since the last line, and
  // the latest of them.
  struct RefusalReport {
    size_t refused = 0;
    std::string key;
    Admission why = Admission::kReject;
    size_t limit = 0;  // kRejectClient: the client's limit
  };
  // Counts a refusal (an Admit that did not serve) at `now_ms` (monotonic):
  // a report when a line is due — the first refusal, then at most one per
  // refusal_log_interval_ms, counting those left out in between.
  std::optional<RefusalReport> NoteRefusal(const ConnClient& c, Admission why, int64_t now_ms);

  size_t served() const;
  size_t held_by(const std::string& key) const;  // for tests

 private:
  bool Fits(const ConnClient& c, size_t mine) const;  // mu_ held
  Admission Refuse(Admission why);                    // mu_ held

  const ConnLimitOptions o_;
  mutable std::mutex mu_;
  size_t served_ = 0;                                   // guarded by mu_
  size_t served_tcp_ = 0;                               // guarded by mu_
  size_t refusing_ = 0;                                 // guarded by mu_
  std::unordered_map<std::string, size_t> per_client_;  // served, by key; guarded by mu_
  size_t refused_unlogged_ = 0;                         // guarded by mu_
  std::optional<int64_t> last_log_ms_;                  // guarded by mu_
};

}  // namespace lathe::net
