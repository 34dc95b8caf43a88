// The idempotency keys of submissions being handled right now. A second
// request with a key still in flight (a client that gave up waiting and
// retried while the first request is still being served) is answered 409
// instead of racing the first; once the first has answered, the key's stored
// run answers the retry (state::RunStore::FindByKey).
//
// Thread-safe.
#pragma once

#include <sys/types.h>

#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace lathe::daemon {

class InFlightKeys {
 public:
  // Holds (uid, key) until destroyed. Movable, not copyable.
  class Lease {
   public:
    Lease(Lease&& o) noexcept : owner_(std::exchange(o.owner_, nullptr)), key_(std::move(o.key_)) {}
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    ~Lease();

   private:
    friend class InFlightKeys;
    Lease(InFlightKeys* owner, std::pair<uid_t, std::string> key)
        : owner_(owner), key_(std::move(key)) {}
    InFlightKeys* owner_;
    std::pair<uid_t, std::string> key_;
  };

  // A lease on `key` for `uid`, or nullopt while another request holds it.
  // Other uids' keys of the same name are independent. The InFlightKeys must
  // outlive its leases.
  std::optional<Lease> TryAcquire(uid_t uid, const std::string& key);

 private:
  void Release(const std::pair<uid_t, std::string>& key);

  std::mutex mu_;
  std::set<std::pair<uid_t, std::string>> held_;  // guarded by mu_
};

}  // namespace lathe::daemon
