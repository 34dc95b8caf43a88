// Limits failed authentication per client address: after `max_failures`
// failures within `window_ms`, every request from that address is refused
// (429, Retry-After) until the oldest of them leaves the window — also one
// with a valid token, or a guesser would learn from the answer which guess
// was right.
//
// Thread-safe. Memory is bounded: at most `max_addresses` addresses are
// tracked; when full, addresses whose failures have all left the window are
// forgotten first, then the one that failed least recently.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

namespace lathe::api {

class AuthLimiter {
 public:
  struct Options {
    int max_failures = 10;  // within one window
    int64_t window_ms = 60'000;
    size_t max_addresses = 10'000;
  };
  AuthLimiter() : AuthLimiter(Options()) {}
  explicit AuthLimiter(Options o) : opts_(o) {}

  // 0 when `address` may try now; else how many ms until it may.
  int64_t RetryAfterMs(const std::string& address, int64_t now_ms);
  // Counts a failure of `address` at `now_ms` (monotonic). True when this
  // failure is the one that reached the limit (the caller logs it once).
  bool RecordFailure(const std::string& address, int64_t now_ms);

  size_t tracked() const;  // addresses held, for tests

 private:
  void Expire(std::deque<int64_t>& failures, int64_t now_ms) const;
  void MakeRoom(int64_t now_ms);  // mu_ held

  const Options opts_;
  mutable std::mutex mu_;
  // Failure times (monotonic ms), oldest first, at most max_failures.
  std::unordered_map<std::string, std::deque<int64_t>> failures_;  // guarded by mu_
};

// The address part of "127.0.0.1:53412" or "::1:53412" (the port is dropped:
// every connection has another one).
std::string AddressOf(const std::string& remote);

}  // namespace lathe::api
