// Pulls for queued runs (docs/environments.md, "Runs that pull their
// image"): a run whose image is a registry reference the user does not have
// yet is queued at once and its image is pulled while it waits, so that the
// pull never counts against its GPU time. One pull per user and reference,
// on its own thread; the daemon collects what ended at its next pass.
//
// Thread-safe.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/daemon/images.h"

namespace lathe::daemon {

// A reference that names its registry ("127.0.0.1:5000/bb:1",
// "registry.example.com/team/torch:2"): one the daemon may pull on its own.
// A bare name ("pytorch") is the user's to import, pull or build first.
bool IsRegistryRef(const std::string& image);

class ImagePuller {
 public:
  struct Pulled {
    uid_t uid = 0;
    std::string ref;
    Result<std::string> id = std::string();  // the image's id, or why the pull failed
  };

  // `ended` is called on the pull's thread when one ends (the daemon kicks
  // its loop).
  ImagePuller(Images& images, std::function<void()> ended);
  ~ImagePuller();  // waits for the pulls in flight

  // Starts the pull of `ref` as `uid`'s unless it is in flight already,
  // with `credentials` ("user:password") when given. A loopback registry may
  // speak plain HTTP, as for docker.
  void Want(uid_t uid, const std::string& ref, const std::optional<std::string>& credentials);
  bool InFlight(uid_t uid, const std::string& ref);
  // The pulls that ended since the last call.
  std::vector<Pulled> TakeEnded();

 private:
  Images& images_;
  const std::function<void()> ended_;
  std::mutex mu_;
  std::map<std::pair<uid_t, std::string>, std::thread> running_;  // guarded by mu_
  std::vector<Pulled> done_;                                      // guarded by mu_
  std::vector<std::thread> finished_;  // guarded by mu_; joined at the next Want or at the end
};

}  // namespace lathe::daemon
