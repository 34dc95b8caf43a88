// A short memory of the run origins' admission decisions (api/run_proxy.cc):
// for one credential (the request's Authorization and Cookie headers, exactly)
// on one run origin (run id, port name), the upstream it was let through to
// (where the port is served, whose listener it must be, the headers added). A request that repeats
// them within `ttl_ms` skips the token or session lookup, the run's read and its endpoints — what a
// small proxied request spent most of its time on (docs/benchmarks.md, "Reverse proxy for run
// ports").
//
// What it does not weaken: only admissions are kept (a refusal is decided
// afresh, with the failed-login limit); an entry lives `ttl_ms` (1 s by
// default), so a revoked token, an ended session, a stopped run or a port
// that moved stops being served within that time (a share taken back at once:
// the cache is cleared when sharing changes); the Origin check and the
// upstream's owner check (SO_PEERCRED, /proc/net/tcp) still run on every
// request. Requests over the unix socket are never cached (their credential
// is the peer's, not a header).
//
// Thread-safe.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "lathe/net/proxy.h"
#include "lathe/os/clock.h"

namespace lathe::api {

struct RunOriginAdmission {
  net::Upstream upstream;  // as HandleRunOrigin built it for the admitted request
  std::string notebook;    // the run's id when the upstream is a notebook's Jupyter
};

class RunOriginCache {
 public:
  // `clock` is not owned and outlives the cache.
  explicit RunOriginCache(os::Clock& clock, int64_t ttl_ms = 1000, size_t max_entries = 4096)
      : clock_(clock), ttl_ms_(ttl_ms), max_entries_(max_entries) {}

  // The entry for `key`, when one is younger than ttl_ms.
  std::optional<RunOriginAdmission> Find(const std::string& key);
  // Forgets every admission (what may reach a run changed: a share taken
  // back, a project member removed).
  void Clear();
  // Remembers an admission. At max_entries, every entry is dropped first.
  void Put(const std::string& key, RunOriginAdmission admission);

  // The key of a request's credential on a run origin; "" for one that is
  // not cached (no header credential).
  static std::string Key(std::string_view run_id, std::string_view port_name,
                         std::string_view authorization, std::string_view cookie);

 private:
  struct Entry {
    RunOriginAdmission admission;
    int64_t expires_ms = 0;  // monotonic
  };
  os::Clock& clock_;
  const int64_t ttl_ms_;
  const size_t max_entries_;
  std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;  // guarded by mu_
};

}  // namespace lathe::api
