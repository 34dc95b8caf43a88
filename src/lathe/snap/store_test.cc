#include "lathe/snap/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "lathe/os/files.h"
#include "lathe/snap/checkpoints.h"
#include "lathe/snap/manifest_files.h"
#include "lathe/snap/test_util/snap_files.h"

namespace lathe::snap {
namespace {

namespace fs = std::filesystem;
using testing::RandomBytes;
using testing::ReadAll;
using testing::TempDir;
using testing::TreeOf;
using testing::WriteFile;

// Options without designated initializers (which warn about the fields left out).
SnapshotOptions WithTags(std::map<std::string, std::string> tags) {
  SnapshotOptions o;
  o.tags = std::move(tags);
  return o;
}
SnapshotOptions WithParent(std::string parent) {
  SnapshotOptions o;
  o.parent = std::move(parent);
  return o;
}
SnapshotOptions WithReserve(uint64_t bytes) {
  SnapshotOptions o;
  o.reserve_bytes = bytes;
  return o;
}
RestoreOptions Forced() {
  RestoreOptions o;
  o.force = true;
  return o;
}
PrunePolicy KeepLast(size_t n) {
  PrunePolicy p;
  p.keep_last = n;
  return p;
}
StoreOptions NoReserve() {
  StoreOptions o;
  o.reserve_bytes = 0;
  return o;
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions o = NoReserve();
    o.pack_target_bytes = 1 << 20;  // several packs even for small trees
    auto s = Store::Create(tmp_ / "store", o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
    src_ = tmp_ / "src";
  }

  void MakeTree() {
    WriteFile(src_ + "/model.pt", testing::MakeZip({{"archive/data/0", RandomBytes(3 << 20, 1)}}));
    WriteFile(src_ + "/notes.txt", std::string(200000, 'a'), 0600);  // compressible
    WriteFile(src_ + "/empty", "");
    WriteFile(src_ + "/sub/deeper/w.npy", testing::MakeNpy(100000, 2), 0755);
    ::symlink("sub/deeper/w.npy", (src_ + "/link").c_str());
  }

  SnapshotResult Snap(SnapshotOptions o = {}) {
    auto r = store_->Snapshot(src_, o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(*r) : SnapshotResult{};
  }

  // A pack file and the offset of the first byte of its first chunk's data.
  std::string SomePack() {
    auto names = ListPackNames(store_->layout());
    return names.ok() && !names->empty() ? store_->layout().pack(names->front()) : "";
  }

  TempDir tmp_;
  std::unique_ptr<Store> store_;
  std::string src_;
};

TEST_F(StoreTest, RoundTripIsByteIdentical) {
  MakeTree();
  auto snap = Snap(WithTags({{"run", "r1"}}));
  EXPECT_EQ(snap.manifest.stats.files, 4u);
  EXPECT_TRUE(snap.manifest.complete());
  auto r = store_->Restore(snap.id, tmp_ / "out", {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->files, 4u);
  EXPECT_EQ(TreeOf(src_), TreeOf(tmp_ / "out"));
  struct stat a, b;
  ::stat((src_ + "/model.pt").c_str(), &a);
  ::stat((tmp_ / "out/model.pt").c_str(), &b);
  EXPECT_EQ(a.st_mtim.tv_sec, b.st_mtim.tv_sec);
  EXPECT_EQ(a.st_mtim.tv_nsec, b.st_mtim.tv_nsec);
}

TEST_F(StoreTest, ListShowResolve) {
  MakeTree();
  auto snap = Snap(WithTags({{"run", "r1"}, {"step", "5"}}));
  auto list = store_->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, snap.id);
  EXPECT_EQ((*list)[0].tags.at("step"), "5");
  EXPECT_EQ(*store_->Resolve(snap.id.substr(0, 8)), snap.id);
  EXPECT_EQ(*store_->Resolve("latest"), snap.id);
  EXPECT_TRUE(store_->Resolve("0000000000").status().IsNotFound());
  EXPECT_TRUE(store_->Resolve("zz").status().IsInvalidArgument());
  auto m = store_->Load(snap.id);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(ManifestToJson(*m), ManifestToJson(snap.manifest));
}

TEST_F(StoreTest, UnchangedFilesAreNotReread) {
  MakeTree();
  auto first = Snap();
  auto second = Snap();
  EXPECT_EQ(second.manifest.parent, first.id);
  EXPECT_EQ(second.manifest.stats.files_read, 0u);
  EXPECT_EQ(second.manifest.stats.new_chunks, 0u);
  WriteFile(src_ + "/notes.txt", std::string(200000, 'b'));
  auto third = Snap();
  EXPECT_EQ(third.manifest.stats.files_read, 1u);
  auto none = Snap(WithParent(""));
  EXPECT_EQ(none.manifest.stats.files_read, 4u);
  EXPECT_EQ(none.manifest.stats.new_chunks, 0u);  // all deduplicated
}

TEST_F(StoreTest, InsertionStoresOnlyNearbyChunks) {
  std::string data = RandomBytes(8 << 20, 11);
  WriteFile(src_ + "/blob", data);
  Snap();
  data.insert(1000, "inserted");
  WriteFile(src_ + "/blob", data);
  auto s = Snap();
  EXPECT_GT(s.manifest.stats.new_bytes, 0u);
  EXPECT_LE(s.manifest.stats.new_bytes, 2u * 256 * 1024);  // at most two max-size chunks
}

TEST_F(StoreTest, TensorBoundariesDedupUnchangedTensorsExactly) {
  // Two 1 MiB tensors; the first changes (same size), the second does not.
  std::string a = testing::MakeSafetensors({{"a", 1 << 18}, {"b", 1 << 18}}, 20);
  WriteFile(src_ + "/model.safetensors", a);
  Snap();
  std::string b = testing::MakeSafetensors({{"a", 1 << 18}, {"b", 1 << 18}}, 30);
  b.replace(b.size() - (1 << 20), 1 << 20, a.substr(a.size() - (1 << 20)));  // keep tensor b
  WriteFile(src_ + "/model.safetensors", b);
  auto s = Snap();
  size_t header = b.size() - (2u << 20);
  EXPECT_LE(s.manifest.stats.new_bytes, (1u << 20) + header);
  EXPECT_TRUE(s.manifest.complete());
}

TEST_F(StoreTest, TruncatedCheckpointIsIncompleteAndNotChosen) {
  WriteFile(src_ + "/ckpt_100.pt", testing::MakeZip({{"archive/data/0", RandomBytes(100000, 1)}}));
  std::string z = testing::MakeZip({{"archive/data/0", RandomBytes(100000, 2)}});
  WriteFile(src_ + "/ckpt_200.pt", z.substr(0, z.size() / 2));  // a writer killed mid torch.save
  auto s = Snap();
  EXPECT_FALSE(s.manifest.complete());
  const FileEntry* e = s.manifest.Find("ckpt_200.pt");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->check, Verdict::kIncomplete);
  auto resume = ChooseResume(s.manifest);
  ASSERT_TRUE(resume.has_value());
  EXPECT_EQ(resume->path, "ckpt_100.pt");
  auto list = store_->List();
  EXPECT_FALSE((*list)[0].complete);
  EXPECT_NE((*list)[0].reason.find("ckpt_200.pt"), std::string::npos);
}

TEST_F(StoreTest, FlippedByteFailsRestoreAndFsckNamingFileAndChunk) {
  WriteFile(src_ + "/weights.bin", RandomBytes(300000, 5));
  auto snap = Snap();
  std::string pack = SomePack();
  ASSERT_FALSE(pack.empty());
  {
    std::fstream f(pack, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(16 + 48 + 100);
    char c;
    f.get(c);
    f.seekp(16 + 48 + 100);
    f.put(static_cast<char>(c ^ 0x40));
  }
  std::string first_chunk = ToHex(snap.manifest.Find("weights.bin")->chunks[0].id);
  auto r = store_->Restore(snap.id, tmp_ / "out", {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("weights.bin"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(first_chunk), std::string::npos) << r.status().message();
  EXPECT_FALSE(fs::exists(tmp_ / "out"));
  for (const auto& e : fs::directory_iterator(tmp_.path())) {
    EXPECT_EQ(e.path().filename().string().find(".out.lathe-restore"),
              std::string::npos);  // temp removed
  }
  auto report = store_->Fsck();
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->ok());
  bool named = false;
  for (const auto& p : report->problems) named |= p.file == "weights.bin" && p.chunk == first_chunk;
  EXPECT_TRUE(named);
}

TEST_F(StoreTest, RestoreRefusesNonEmptyTargetUnlessForced) {
  MakeTree();
  auto snap = Snap();
  WriteFile(tmp_ / "out/old.txt", "old");
  auto r = store_->Restore(snap.id, tmp_ / "out", {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().msg_id(), "snap.target_not_empty");
  EXPECT_EQ(ReadAll(tmp_ / "out/old.txt"), "old");
  r = store_->Restore(snap.id, tmp_ / "out", Forced());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(TreeOf(src_), TreeOf(tmp_ / "out"));
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(tmp_.path()))
    entries += e.path().filename() != "store";
  EXPECT_EQ(entries, 2u);  // src and out: nothing left aside
  fs::create_directories(tmp_ / "empty");
  EXPECT_TRUE(store_->Restore(snap.id, tmp_ / "empty", {}).ok());
}

TEST_F(StoreTest, RestoreThroughASymlinkedTargetKeepsTheLink) {
  MakeTree();
  auto snap = Snap();
  fs::create_directories(tmp_ / "disk2/ckpt");
  fs::create_symlink(tmp_ / "disk2/ckpt", tmp_ / "ckpt");
  ASSERT_TRUE(store_->Restore(snap.id, tmp_ / "ckpt", {}).ok());
  EXPECT_TRUE(fs::is_symlink(tmp_ / "ckpt"));
  EXPECT_EQ(TreeOf(src_), TreeOf(tmp_ / "disk2/ckpt"));
}

TEST_F(StoreTest, RestoreRefusesEscapingPaths) {
  WriteFile(src_ + "/a.txt", "a");
  auto snap = Snap();
  Manifest evil = snap.manifest;
  FileEntry e = evil.files[0];
  e.path = "../escaped.txt";
  evil.files.insert(evil.files.begin(), e);
  auto id = WriteManifest(store_->layout(), evil, nullptr);
  ASSERT_TRUE(id.ok());
  auto r = store_->Restore(*id, tmp_ / "out/x", {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().msg_id(), "snap.path_escape");
  EXPECT_FALSE(fs::exists(tmp_ / "out/escaped.txt"));

  ::symlink("/etc", (src_ + "/etc-link").c_str());
  auto with_link = Snap();
  r = store_->Restore(with_link.id, tmp_ / "out2", {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().msg_id(), "snap.path_escape");
}

TEST_F(StoreTest, ReserveSkipsTheSnapshotAndKeepsTheStoreConsistent) {
  MakeTree();
  auto good = Snap();
  WriteFile(src_ + "/big.bin", RandomBytes(4 << 20, 9));
  auto r = store_->Snapshot(src_, WithReserve(uint64_t{1} << 62));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(r.status().msg_id(), "snap.reserve");
  auto skipped = store_->Skipped();
  ASSERT_TRUE(skipped.ok());
  ASSERT_EQ(skipped->size(), 1u);
  EXPECT_EQ((*skipped)[0].msg_id, "snap.reserve");
  EXPECT_TRUE(os::ListDir(store_->layout().pack_tmp())->empty());
  EXPECT_EQ(store_->List()->size(), 1u);
  auto report = store_->Fsck();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok());
  EXPECT_TRUE(store_->Restore(good.id, tmp_ / "out", {}).ok());
}

TEST_F(StoreTest, PruneAndGcKeepEveryLiveChunk) {
  MakeTree();
  Snap();
  WriteFile(src_ + "/notes.txt", RandomBytes(3 << 20, 77));
  auto second = Snap();
  WriteFile(src_ + "/notes.txt", RandomBytes(3 << 20, 78));
  auto third = Snap();
  auto pruned = store_->Prune(KeepLast(1));
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_EQ(pruned->removed.size(), 2u);
  auto gc = store_->Gc();
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  EXPECT_GT(gc->bytes_freed, 0u);
  auto report = store_->Fsck();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok());
  EXPECT_EQ(report->unreferenced_packs, 0u);
  ASSERT_TRUE(store_->Restore(third.id, tmp_ / "out", {}).ok());
  EXPECT_EQ(TreeOf(src_), TreeOf(tmp_ / "out"));
  EXPECT_TRUE(store_->Resolve(second.id).status().IsNotFound());
}

TEST_F(StoreTest, PruneOfOneRunLeavesOtherRunsAlone) {
  MakeTree();
  std::vector<SnapshotId> r1, r2;
  for (int i = 0; i < 3; ++i) {
    WriteFile(src_ + "/notes.txt", RandomBytes(1 << 10, 200 + i));
    r1.push_back(Snap(WithTags({{"run", "r1"}})).id);
    r2.push_back(Snap(WithTags({{"run", "r2"}})).id);
  }
  PrunePolicy p = KeepLast(1);
  p.run = "r1";
  auto pruned = store_->Prune(p);
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_EQ(pruned->removed.size(), 2u);
  EXPECT_TRUE(store_->Resolve(r1[0]).status().IsNotFound());
  EXPECT_TRUE(store_->Resolve(r1[2]).ok());
  for (const auto& id : r2) EXPECT_TRUE(store_->Resolve(id).ok()) << id;
}

TEST_F(StoreTest, PinnedSnapshotSurvivesPruneForgetAndGc) {
  MakeTree();
  std::vector<SnapshotId> ids;
  for (int i = 0; i < 3; ++i) {
    WriteFile(src_ + "/notes.txt", RandomBytes(1 << 20, 400 + i));
    ids.push_back(Snap(WithTags({{"run", "r1"}})).id);
  }
  ASSERT_TRUE(store_->Pin(ids[0], "model digits/1").ok());
  ASSERT_TRUE(store_->Pin(ids[0], "model digits/1").ok());  // twice is one pin
  ASSERT_TRUE(store_->Pin(ids[0], "model other/2").ok());
  auto pins = store_->Pins(ids[0]);
  ASSERT_TRUE(pins.ok());
  EXPECT_EQ(*pins, (std::vector<std::string>{"model digits/1", "model other/2"}));
  // Prune keeps it (and says why), removes the unpinned older one.
  auto pruned = store_->Prune(KeepLast(1));
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_EQ(pruned->removed, (std::vector<SnapshotId>{ids[1]}));
  EXPECT_EQ(pruned->pinned, (std::vector<SnapshotId>{ids[0]}));
  // Forget refuses, naming the holders.
  Status refused = store_->Forget(ids[0]);
  EXPECT_EQ(refused.code(), Code::kFailedPrecondition) << refused.ToString();
  EXPECT_EQ(refused.msg_id(), "snap.pinned");
  EXPECT_NE(refused.ToString().find("model digits/1"), std::string::npos) << refused.ToString();
  // Gc keeps its chunks: it still restores whole, and fsck finds nothing amiss.
  ASSERT_TRUE(store_->Gc().ok());
  ASSERT_TRUE(store_->Restore(ids[0], tmp_ / "out", {}).ok());
  auto report = store_->Fsck();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->ok());
  // Pins are files, not index rows: a rebuilt index keeps them.
  ASSERT_TRUE(store_->RebuildIndex().ok());
  EXPECT_EQ(store_->Forget(ids[0]).msg_id(), "snap.pinned");
  // Once every holder let go, it goes like any other.
  ASSERT_TRUE(store_->Unpin(ids[0], "model digits/1").ok());
  EXPECT_EQ(store_->Forget(ids[0]).msg_id(), "snap.pinned");
  ASSERT_TRUE(store_->Unpin(ids[0], "model other/2").ok());
  EXPECT_TRUE(store_->Pins(ids[0])->empty());
  EXPECT_TRUE(store_->Forget(ids[0]).ok());
  // A snapshot that is not there cannot be pinned.
  EXPECT_TRUE(store_->Pin(ids[0], "model digits/1").IsNotFound());
  EXPECT_TRUE(store_->Pin(ids[2], "").code() == Code::kInvalidArgument);
}

TEST_F(StoreTest, ForgetRemovesOneSnapshotEvenTheNewestCompleteOne) {
  MakeTree();
  auto first = Snap(WithTags({{"run", "r1"}}));
  WriteFile(src_ + "/notes.txt", RandomBytes(1 << 10, 300));
  auto second = Snap(WithTags({{"run", "r1"}}));
  ASSERT_TRUE(store_->Forget(second.id).ok());  // a prune would keep it: the run's newest
  EXPECT_TRUE(store_->Resolve(second.id).status().IsNotFound());
  auto list = store_->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->front().id, first.id);
  Status again = store_->Forget(second.id);
  EXPECT_TRUE(again.IsNotFound()) << again.ToString();
  EXPECT_EQ(again.msg_id(), "snap.not_found");
  // Nothing is lost or damaged; gc frees what only the forgotten one held.
  auto gc = store_->Gc();
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  auto report = store_->Fsck();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok());
  EXPECT_TRUE(report->lost_snapshots.empty());
  ASSERT_TRUE(store_->Restore(first.id, tmp_ / "out", {}).ok());
}

// A snapshot that deduplicates against chunks no manifest references any
// more must not lose them to a gc running at the same time.
TEST_F(StoreTest, GcNeverSweepsChunksOfASnapshotInProgress) {
  for (int i = 0; i < 4; ++i)
    WriteFile(src_ + "/f" + std::to_string(i), RandomBytes(2 << 20, 100 + i));
  auto orphaned = Snap();
  ASSERT_TRUE(RemoveManifest(store_->layout(), orphaned.id).ok());
  ASSERT_TRUE(store_->RebuildIndex().ok());  // chunks stay indexed, but nothing references them

  std::promise<void> started, gc_launched;
  std::atomic<bool> first{true};
  auto launched = gc_launched.get_future();
  SnapshotOptions o;
  o.progress = [&](const Progress&) {
    if (!first.exchange(false)) return;
    started.set_value();
    launched.wait();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let gc reach the lock
  };
  auto snap = std::async(std::launch::async, [&] { return store_->Snapshot(src_, o); });
  started.get_future().wait();
  auto gc = std::async(std::launch::async, [&] { return store_->Gc(); });
  gc_launched.set_value();
  auto s = snap.get();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->manifest.stats.new_chunks, 0u);  // it deduplicated against the orphaned chunks
  ASSERT_TRUE(gc.get().ok());
  auto report = store_->Fsck();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok());
  ASSERT_TRUE(store_->Restore(s->id, tmp_ / "out", {}).ok());
  EXPECT_EQ(TreeOf(src_), TreeOf(tmp_ / "out"));
}

TEST_F(StoreTest, IndexIsRebuiltFromTheStoreAlone) {
  MakeTree();
  auto snap = Snap();
  store_.reset();
  fs::remove(tmp_ / "store/index.db");
  fs::remove(tmp_ / "store/index.db-wal");
  fs::remove(tmp_ / "store/index.db-shm");
  auto s = Store::Open(tmp_ / "store", NoReserve());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto list = (*s)->List();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, snap.id);
  ASSERT_TRUE((*s)->Restore(snap.id, tmp_ / "out", {}).ok());
  EXPECT_EQ(TreeOf(src_), TreeOf(tmp_ / "out"));
}

TEST_F(StoreTest, LeftoversOfAKilledSnapshotAreHarmless) {
  MakeTree();
  auto snap = Snap();
  WriteFile(store_->layout().pack_tmp() + "/p123.pack.tmp", RandomBytes(1000, 1));
  auto report = store_->Fsck();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok());
  EXPECT_EQ(report->temp_packs, 1u);
  auto gc = store_->Gc();
  ASSERT_TRUE(gc.ok());
  EXPECT_EQ(gc->temp_files_removed, 1u);
  EXPECT_EQ(gc->bytes_freed, 1000u);  // what removing it freed counts
  EXPECT_TRUE(store_->Restore(snap.id, tmp_ / "out", {}).ok());
}

// A snapshot whose manifest was deleted by hand: its chunks look like
// garbage, but they are the only copy of it. fsck says so, and gc deletes
// nothing until the manifest is back or rebuild-index forgets it.
TEST_F(StoreTest, LostManifestIsReportedAndGcDeletesNothing) {
  WriteFile(src_ + "/a.bin", RandomBytes(2 << 20, 31));
  auto first = Snap();
  WriteFile(src_ + "/a.bin", RandomBytes(2 << 20, 32));
  auto second = Snap();
  std::string manifest = store_->layout().manifest(first.id);
  std::string saved = ReadAll(manifest);
  fs::remove(manifest);
  auto packs_before = ListPackNames(store_->layout());
  store_.reset();
  auto reopened = Store::Open(tmp_ / "store", NoReserve());
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  store_ = std::move(*reopened);

  auto report = store_->Fsck();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->ok());
  ASSERT_EQ(report->lost_snapshots.size(), 1u);
  EXPECT_EQ(report->lost_snapshots[0], first.id);
  bool named = false;
  for (const auto& p : report->problems)
    named |= p.snapshot == first.id && p.what.find("manifest missing") == 0;
  EXPECT_TRUE(named);
  EXPECT_GT(report->unreferenced_packs, 0u);  // what gc would have deleted

  auto gc = store_->Gc();
  ASSERT_FALSE(gc.ok());
  EXPECT_EQ(gc.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(gc.status().msg_id(), "snap.gc_lost");
  EXPECT_EQ(*ListPackNames(store_->layout()), *packs_before);
  auto list = store_->List();
  ASSERT_EQ(list->size(), 1u);  // a lost snapshot is not listed: it cannot be shown or restored
  EXPECT_EQ((*list)[0].id, second.id);

  WriteFile(manifest, saved);  // put back from a backup: whole again
  report = store_->Fsck();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok());
  ASSERT_TRUE(store_->Restore(first.id, tmp_ / "out", {}).ok());

  fs::remove(manifest);  // lost for good: rebuild-index forgets it, then gc frees it
  ASSERT_TRUE(store_->RebuildIndex().ok());
  report = store_->Fsck();
  EXPECT_TRUE(report->ok());
  gc = store_->Gc();
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  EXPECT_GT(gc->bytes_freed, 1u << 20);
}

TEST_F(StoreTest, PrunedSnapshotsAreNotLost) {
  for (int i = 0; i < 3; ++i) {
    WriteFile(src_ + "/a.bin", RandomBytes(1 << 16, 40 + i));
    Snap();
  }
  ASSERT_TRUE(store_->Prune(KeepLast(2)).ok());
  auto report = store_->Fsck();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok());
  EXPECT_TRUE(report->lost_snapshots.empty());

  // A prune killed after its first step: the manifest is renamed to its
  // marker, the index still lists the snapshot. The next open finishes it.
  auto list = store_->List();
  ASSERT_EQ(list->size(), 2u);
  SnapshotId victim = list->back().id;
  ASSERT_TRUE(MarkPruned(store_->layout(), victim).ok());
  store_.reset();
  auto reopened = Store::Open(tmp_ / "store", NoReserve());
  ASSERT_TRUE(reopened.ok());
  store_ = std::move(*reopened);
  EXPECT_FALSE(fs::exists(store_->layout().pruned(victim)));
  report = store_->Fsck();
  EXPECT_TRUE(report->ok());
  EXPECT_TRUE(report->lost_snapshots.empty());
  EXPECT_EQ(store_->List()->size(), 1u);
  EXPECT_TRUE(store_->Gc().ok());
}

// The index is a cache: garbage in it costs a rebuild, not the store.
TEST_F(StoreTest, GarbageIndexIsMovedAsideAndRebuilt) {
  MakeTree();
  auto snap = Snap();
  store_.reset();
  std::string index = tmp_ / "store/index.db";
  {
    std::fstream f(index, std::ios::in | std::ios::out | std::ios::binary);
    std::string junk = RandomBytes(4096, 3);
    f.write(junk.data(),
            static_cast<std::streamsize>(junk.size()));  // the header is gone: "not a database"
  }
  auto s = Store::Open(tmp_ / "store", NoReserve());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto repair = (*s)->index_repair();
  ASSERT_TRUE(repair.has_value());
  EXPECT_EQ(repair->moved_to.rfind(index + ".corrupt-", 0), 0u) << repair->moved_to;
  EXPECT_TRUE(fs::exists(repair->moved_to));  // kept for inspection
  EXPECT_NE(repair->detail.find("not a database"), std::string::npos) << repair->detail;
  auto list = (*s)->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, snap.id);
  ASSERT_TRUE((*s)->Restore(snap.id, tmp_ / "out", {}).ok());
  EXPECT_EQ(TreeOf(src_), TreeOf(tmp_ / "out"));
  auto report = (*s)->Fsck();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->ok());
  ASSERT_TRUE(report->index_repair.has_value());
  EXPECT_TRUE((*s)->RebuildIndex().ok());
}

// Damage deep in the file, where opening does not look, is found by fsck's
// quick_check and repaired the same way.
TEST_F(StoreTest, FsckFindsADamagedIndexPageAndRebuildsTheIndex) {
  MakeTree();
  auto snap = Snap();
  store_.reset();  // checkpoints the WAL into index.db
  std::string index = tmp_ / "store/index.db";
  int64_t page = 0, page_size = 0;
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(index.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, "SELECT rootpage FROM sqlite_master WHERE name='chunks'", -1, &st,
                       nullptr);
    if (sqlite3_step(st) == SQLITE_ROW) page = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_prepare_v2(db, "PRAGMA page_size", -1, &st, nullptr);
    if (sqlite3_step(st) == SQLITE_ROW) page_size = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
  }
  ASSERT_GT(page, 1);
  ASSERT_GT(page_size, 0);
  {
    std::fstream f(index, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp((page - 1) * page_size);
    std::string junk = RandomBytes(static_cast<size_t>(page_size), 4);
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  auto s = Store::Open(tmp_ / "store", NoReserve());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_FALSE((*s)->index_repair().has_value());  // the chunks table is not read at open
  auto report = (*s)->Fsck();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->ok());
  ASSERT_TRUE(report->index_repair.has_value());
  ASSERT_TRUE((*s)->Restore(snap.id, tmp_ / "out", {}).ok());
  EXPECT_EQ(TreeOf(src_), TreeOf(tmp_ / "out"));
}

// The pack header has no checksum, but each field has one allowed value.
TEST_F(StoreTest, DamagedPackHeaderIsReportedAndItsChunksStillRestore) {
  WriteFile(src_ + "/weights.bin", RandomBytes(300000, 6));
  auto snap = Snap();
  std::string pack = SomePack();
  ASSERT_FALSE(pack.empty());
  std::string name = fs::path(pack).stem().string();
  for (int offset : {2, 8, 14}) {  // magic, version, reserved
    SCOPED_TRACE(offset);
    auto flip = [&] {
      std::fstream f(pack, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(offset);
      char c;
      f.get(c);
      f.seekp(offset);
      f.put(static_cast<char>(c ^ 0x01));
    };
    flip();
    auto report = store_->Fsck();
    ASSERT_TRUE(report.ok());
    EXPECT_FALSE(report->ok());
    bool named = false;
    for (const auto& p : report->problems)
      named |= p.pack == name && p.what.find("header damaged") != std::string::npos;
    EXPECT_TRUE(named);
    fs::remove_all(tmp_ / "out");
    auto r = store_->Restore(snap.id, tmp_ / "out", {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->damaged_pack_headers.size(), 1u);
    EXPECT_NE(r->damaged_pack_headers[0].find(name), std::string::npos);
    EXPECT_EQ(TreeOf(src_), TreeOf(tmp_ / "out"));
    flip();
    EXPECT_TRUE(store_->Fsck()->ok());
  }
}

TEST_F(StoreTest, OpenFailsWithoutAStore) {
  auto s = Store::Open(tmp_ / "nothing");
  EXPECT_TRUE(s.status().IsNotFound());
  EXPECT_EQ(s.status().msg_id(), "snap.no_store");
}

}  // namespace
}  // namespace lathe::snap
