// SnapshotOptions::read_as and WatcherOptions::access_as: a root process
// reading a user's tree with the user's identity gets the user's EACCES.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lathe/os/users.h"
#include "lathe/snap/store.h"
#include "lathe/snap/test_util/snap_files.h"
#include "lathe/snap/watcher.h"

namespace lathe::snap {
namespace {

class SnapshotIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    auto nobody = os::LookupUserByName("nobody");
    if (!nobody.ok()) GTEST_SKIP() << "no user nobody";
    as_ = os::AccessAsUser(os::IdentityOf(nobody->uid, nobody->gid));
    ::chmod(tmp_.path().c_str(), 0755);
    StoreOptions o;
    o.reserve_bytes = 0;
    auto s = Store::Create(tmp_ / "store", o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
    ::chmod((tmp_ / "store").c_str(), 0700);
  }
  testing::TempDir tmp_;
  os::AccessAs as_;
  std::unique_ptr<Store> store_;
};

TEST_F(SnapshotIdentityTest, AUsersReadCannotTakeRootsFiles) {
  std::string src = tmp_ / "src";
  testing::WriteFile(src + "/open.bin", "anyone may read this", 0644);
  testing::WriteFile(src + "/secret.bin", "root only", 0600);
  SnapshotOptions o;
  o.read_as = as_;
  auto refused = store_->Snapshot(src, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().IsPermissionDenied()) << refused.status().ToString();
  // Root's own read takes both; the store was written as root all along.
  auto taken = store_->Snapshot(src, SnapshotOptions{});
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_EQ(taken->manifest.stats.files, 2u);
  // A directory the user may not enter at all.
  std::string closed = tmp_ / "closed";
  testing::WriteFile(closed + "/x.bin", "x", 0644);
  ::chmod(closed.c_str(), 0700);
  auto walk = store_->Snapshot(closed, o);
  ASSERT_FALSE(walk.ok());
  EXPECT_TRUE(walk.status().IsPermissionDenied()) << walk.status().ToString();
}

TEST_F(SnapshotIdentityTest, AUsersWatchOfRootsDirectoryIsRefused) {
  std::string closed = tmp_ / "closed";
  testing::WriteFile(closed + "/x.bin", "x", 0644);
  ::chmod(closed.c_str(), 0700);
  WatcherOptions o;
  o.access_as = as_;
  auto w = Watcher::Start(closed + "/", o, [](const WatchBatch&) {});
  EXPECT_FALSE(w.ok());
  auto root_watch = Watcher::Start(closed, WatcherOptions{}, [](const WatchBatch&) {});
  EXPECT_TRUE(root_watch.ok()) << root_watch.status().ToString();
}

}  // namespace
}  // namespace lathe::snap
