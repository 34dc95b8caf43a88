#include "lathe/daemon/image_puller.h"

namespace lathe::daemon {

bool IsRegistryRef(const std::string& image) { return !RegistryHost(image).empty(); }

namespace {

bool Loopback(const std::string& ref) {
  const std::string host = RegistryHost(ref);
  return host == "localhost" || host.starts_with("localhost:") || host.starts_with("127.") ||
         host.starts_with("[::1]");
}

}  // namespace

ImagePuller::ImagePuller(Images& images, std::function<void()> ended)
    : images_(images), ended_(std::move(ended)) {}

ImagePuller::~ImagePuller() {
  std::vector<std::thread> all;
  {
    std::lock_guard lock(mu_);
    for (auto& [key, t] : running_) all.push_back(std::move(t));
    running_.clear();
    for (auto& t : finished_) all.push_back(std::move(t));
    finished_.clear();
  }
  for (auto& t : all) {
    if (t.joinable()) t.join();
  }
}

void ImagePuller::Want(uid_t uid, const std::string& ref,
                       const std::optional<std::string>& credentials) {
  std::vector<std::thread> reap;
  {
    std::lock_guard lock(mu_);
    reap.swap(finished_);
    const auto key = std::make_pair(uid, ref);
    if (!running_.count(key)) {
      running_[key] = std::thread([this, uid, ref, key, credentials] {
        auto v = images_.Pull(uid, ref, "", credentials, Loopback(ref));
        {
          std::lock_guard lock(mu_);
          Pulled p{uid, ref, v.ok() ? Result<std::string>(v->id) : v.status()};
          done_.push_back(std::move(p));
          auto it = running_.find(key);
          if (it != running_.end()) {
            finished_.push_back(std::move(it->second));
            running_.erase(it);
          }
        }
        if (ended_) ended_();
      });
    }
  }
  for (auto& t : reap) t.join();
}

bool ImagePuller::InFlight(uid_t uid, const std::string& ref) {
  std::lock_guard lock(mu_);
  return running_.count({uid, ref}) > 0;
}

std::vector<ImagePuller::Pulled> ImagePuller::TakeEnded() {
  std::lock_guard lock(mu_);
  std::vector<Pulled> out;
  out.swap(done_);
  return out;
}

}  // namespace lathe::daemon
