#include "lathe/daemon/disk_shares.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "lathe/os/disk_space.h"

namespace lathe::daemon {

DiskShares::DiskShares(std::string runs_dir, OwnersFn owners, os::Clock& clock)
    : runs_dir_(std::move(runs_dir)), owners_(std::move(owners)), clock_(clock) {}

DiskShares::~DiskShares() { Stop(); }

void DiskShares::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { Loop(); });
}

void DiskShares::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DiskShares::Kick() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    kicked_ = true;
  }
  cv_.notify_all();
}

DiskShare DiskShares::Get() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_;
}

void DiskShares::CountNow() {
  auto owners = owners_();
  if (!owners.ok()) {
    spdlog::warn("disk shares: the runs could not be listed: {}", owners.status().ToString());
    return;
  }
  DiskShare next;
  for (const auto& [id, uid] : *owners) {
    auto bytes = os::TreeDiskBytes(runs_dir_ + "/" + id);
    if (bytes.ok()) next.bytes[uid] += *bytes;  // a run without a directory takes nothing
  }
  next.at_ms = clock_.NowMs();
  std::lock_guard<std::mutex> lock(mu_);
  last_ = std::move(next);
}

void DiskShares::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    kicked_ = false;
    lock.unlock();
    CountNow();
    lock.lock();
    // The gap first (a burst of ended runs is one walk), then the period or a kick.
    cv_.wait_for(lock, std::chrono::milliseconds(kDiskSharesMinGapMs),
                 [this] { return stopping_; });
    cv_.wait_for(lock, std::chrono::milliseconds(kDiskSharesEveryMs - kDiskSharesMinGapMs),
                 [this] { return stopping_ || kicked_; });
  }
}

}  // namespace lathe::daemon
