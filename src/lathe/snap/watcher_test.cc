#include "lathe/snap/watcher.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "lathe/os/test_util/fake_clock.h"
#include "lathe/snap/test_util/snap_files.h"

namespace lathe::snap {
namespace {

using testing::TempDir;
using testing::WriteFile;
using namespace std::chrono_literals;

constexpr int64_t kQuietMs = 500;

// Collects batches; the fake clock decides when a burst is quiet.
class WatcherTest : public ::testing::Test {
 protected:
  void StartWatcher(WatcherOptions o = {}) {
    o.quiet_ms = kQuietMs;
    o.clock = &clock_;
    auto w = Watcher::Start(dir_.path(), o, [this](const WatchBatch& b) {
      std::lock_guard<std::mutex> l(mu_);
      batches_.push_back(b);
      cv_.notify_all();
    });
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    w_ = std::move(*w);
  }

  // Advances the fake clock until a batch arrives (up to 60 s of real time).
  WatchBatch NextBatch(int64_t step_ms = kQuietMs) {
    for (int i = 0; i < 600; ++i) {
      {
        std::unique_lock<std::mutex> l(mu_);
        if (cv_.wait_for(l, 100ms, [&] { return taken_ < batches_.size(); }))
          return batches_[taken_++];
      }
      clock_.Advance(step_ms);
    }
    ADD_FAILURE() << "no batch arrived";
    return {};
  }

  size_t BatchCount() {
    std::lock_guard<std::mutex> l(mu_);
    return batches_.size();
  }

  static bool Has(const WatchBatch& b, const std::string& p) {
    return std::find(b.paths.begin(), b.paths.end(), p) != b.paths.end();
  }

  TempDir dir_;
  os::FakeClock clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<WatchBatch> batches_;
  size_t taken_ = 0;
  std::unique_ptr<Watcher> w_;
};

TEST_F(WatcherTest, ReportsClosedAndRenamedFiles) {
  StartWatcher();
  EXPECT_EQ(w_->mode(), WatchMode::kInotify);
  WriteFile(dir_ / "a.pt", "weights");
  auto b = NextBatch();
  EXPECT_EQ(b.paths, std::vector<std::string>{"a.pt"});
  EXPECT_EQ(b.mode, WatchMode::kInotify);

  WriteFile(dir_ / "m.pt.tmp", "new weights");  // torch.save to a temp file, then os.replace
  std::filesystem::rename(dir_ / "m.pt.tmp", dir_ / "m.pt");
  b = NextBatch();
  EXPECT_TRUE(Has(b, "m.pt"));
}

TEST_F(WatcherTest, WatchesNewSubdirectoriesRecursively) {
  StartWatcher();
  WriteFile(dir_ / "run/epoch_1/deep/x.bin", "x");  // three new levels at once
  auto b = NextBatch();
  EXPECT_TRUE(Has(b, "run/epoch_1/deep/x.bin"));
  WriteFile(dir_ / "run/epoch_1/deep/y.bin", "y");
  b = NextBatch();
  EXPECT_EQ(b.paths, std::vector<std::string>{"run/epoch_1/deep/y.bin"});
}

TEST_F(WatcherTest, DirectoryRenamedIntoPlaceKeepsBeingWatched) {
  StartWatcher();
  WriteFile(dir_ / "tmp-checkpoint-5/model.safetensors", "m");
  NextBatch();
  std::filesystem::rename(dir_ / "tmp-checkpoint-5", dir_ / "checkpoint-5");
  auto b = NextBatch();
  EXPECT_TRUE(Has(b, "checkpoint-5"));
  WriteFile(dir_ / "checkpoint-5/extra.json", "{}");
  b = NextBatch();
  EXPECT_EQ(b.paths, std::vector<std::string>{"checkpoint-5/extra.json"});
}

TEST_F(WatcherTest, BurstIsOneBatch) {
  StartWatcher();
  for (int i = 0; i < 5; ++i) WriteFile(dir_ / ("shard_" + std::to_string(i) + ".pt"), "s");
  auto b = NextBatch();
  EXPECT_EQ(b.paths.size(), 5u);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(BatchCount(), 1u);
}

TEST_F(WatcherTest, PollingFallbackSeesChanges) {
  WatcherOptions o;
  o.force_polling = true;
  o.poll_interval_ms = 1000;
  WriteFile(dir_ / "old.pt", "old");  // already there: not a change
  StartWatcher(o);
  EXPECT_EQ(w_->mode(), WatchMode::kPolling);
  EXPECT_FALSE(w_->fallback_reason().empty());
  WriteFile(dir_ / "sub/new.pt", "new");
  auto b = NextBatch(1000);
  EXPECT_EQ(b.paths, std::vector<std::string>{"sub/new.pt"});
  EXPECT_EQ(b.mode, WatchMode::kPolling);
}

TEST_F(WatcherTest, WatchLimitFallsBackToPolling) {
  WriteFile(dir_ / "a/x", "x");
  WriteFile(dir_ / "b/y", "y");
  WatcherOptions o;
  o.max_watches = 2;  // the root and one sub-directory
  o.poll_interval_ms = 1000;
  StartWatcher(o);
  EXPECT_EQ(w_->mode(), WatchMode::kPolling);
  EXPECT_NE(w_->fallback_reason().find("limit"), std::string::npos);
  WriteFile(dir_ / "b/z", "z");
  auto b = NextBatch(1000);
  EXPECT_TRUE(Has(b, "b/z"));
}

// A file renamed into place is complete: its burst ends after the shorter
// rename quiet period; a file closed after writing waits the full one.
TEST_F(WatcherTest, RenamedInFileSettlesSooner) {
  WatcherOptions o;
  o.rename_quiet_ms = 100;
  StartWatcher(o);  // quiet_ms = kQuietMs (500)
  TempDir outside;  // the temp file of an atomic save, written where nothing watches
  WriteFile(outside / "ckpt.pt.tmp", "ckpt");
  int64_t start = clock_.MonotonicMs();
  std::filesystem::rename(outside / "ckpt.pt.tmp", dir_ / "ckpt.pt");
  auto b = NextBatch(/*step_ms=*/100);
  EXPECT_EQ(b.paths, std::vector<std::string>{"ckpt.pt"});
  EXPECT_LT(clock_.MonotonicMs() - start, kQuietMs);  // before the full quiet period
}

// The usual atomic save writes the temp file next to the target: its close
// is part of the burst, but the temp file is renamed away, so the burst is
// still "renamed in" and lists only the final name.
TEST_F(WatcherTest, TempFileInTheSameDirectoryThenRenamedSettlesSooner) {
  WatcherOptions o;
  o.rename_quiet_ms = 100;
  StartWatcher(o);
  int64_t start = clock_.MonotonicMs();
  WriteFile(dir_ / "ckpt.pt.tmp", "ckpt");
  std::filesystem::rename(dir_ / "ckpt.pt.tmp", dir_ / "ckpt.pt");
  auto b = NextBatch(/*step_ms=*/100);
  EXPECT_EQ(b.paths, std::vector<std::string>{"ckpt.pt"});
  EXPECT_LT(clock_.MonotonicMs() - start, kQuietMs);
}

TEST_F(WatcherTest, ClosedFileWaitsTheFullQuietPeriod) {
  WatcherOptions o;
  o.rename_quiet_ms = 100;
  StartWatcher(o);
  int64_t start = clock_.MonotonicMs();
  WriteFile(dir_ / "ckpt.pt", "written in place");
  auto b = NextBatch(/*step_ms=*/100);
  EXPECT_EQ(b.paths, std::vector<std::string>{"ckpt.pt"});
  EXPECT_GE(clock_.MonotonicMs() - start, kQuietMs);
}

TEST_F(WatcherTest, StopWithFlushDeliversTheUnsettledBurst) {
  StartWatcher();
  WriteFile(dir_ / "last.pt", "written just before the job ended");
  // No clock advance: the burst has not been quiet, yet it is delivered.
  w_->Stop(/*flush=*/true);
  ASSERT_EQ(BatchCount(), 1u);
  EXPECT_TRUE(Has(batches_[0], "last.pt"));
}

TEST_F(WatcherTest, StopWithFlushWhenPolling) {
  WatcherOptions o;
  o.force_polling = true;
  o.poll_interval_ms = 1000;
  StartWatcher(o);
  WriteFile(dir_ / "late.pt", "late");
  w_->Stop(/*flush=*/true);
  ASSERT_EQ(BatchCount(), 1u);
  EXPECT_TRUE(Has(batches_[0], "late.pt"));
}

TEST_F(WatcherTest, NothingAfterStop) {
  StartWatcher();
  w_->Stop();
  WriteFile(dir_ / "late.pt", "late");
  clock_.Advance(10 * kQuietMs);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(BatchCount(), 0u);
  w_->Stop();  // idempotent
}

}  // namespace
}  // namespace lathe::snap
