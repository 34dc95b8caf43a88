// The snapshot store: a content-addressed, deduplicating store of directory
// snapshots, used by `lathe snap` directly (--store DIR) and by the daemon
// (one store in <home>/store).
//
//   auto store = Store::Create("/data/store");          // or Open() for an existing one
//   auto snap = (*store)->Snapshot("/runs/r1/ckpt", {.tags = {{"run", "r1"}}});
//   (*store)->Restore(snap->id, "/runs/r1/ckpt", {.force = true});
//
// Files are cut into content-defined chunks (chunker.h) named by SHA-256 and
// kept in pack files (pack.h); a snapshot is a manifest (manifest.h) whose id
// is the hash of its content. A snapshot exists exactly when its manifest is
// durably in snapshots/: packs are fsynced (in the background, while the
// next one fills) and renamed into place first, so a crash at any point
// leaves either the old state or the new snapshot, plus at most some
// unreferenced packs that gc removes.
//
// Concurrency. A Store is thread-safe, and several processes may use one
// store directory at once. Snapshot, Restore, Prune and Fsck take a shared
// lock on <store>/lock, Gc and RebuildIndex an exclusive one (flock: a
// killed process never leaves it held). So gc never runs while a snapshot is
// writing or deduplicating against existing chunks: it waits for them, and
// they wait for it.
//
// Repair. index.db is a cache. When it turns out damaged — at open, in any
// operation, or in Fsck's quick_check — the store takes the exclusive lock,
// moves the file aside (index.db.corrupt-<ms>, kept for inspection),
// rebuilds it from packs/ and snapshots/, and runs the operation once more;
// index_repair() then says so. A snapshot the index lists whose manifest is
// gone is lost, not removed (lost.h): Fsck reports it and Gc refuses to run.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/os/clock.h"
#include "lathe/os/file_lock.h"
#include "lathe/os/users.h"
#include "lathe/snap/layout.h"
#include "lathe/snap/manifest.h"

namespace lathe::snap {

class Index;
struct StoreContext;

struct StoreOptions {
  // Free space that snapshots must leave on the store's filesystem. Unset:
  // the store config's value, else DefaultReserveBytes (1 GiB, at most 10%).
  std::optional<uint64_t> reserve_bytes;
  // Threads for restore and fsck; 0 = the number of CPUs (at least 2, at most 8).
  unsigned threads = 0;
  // Used for snapshot times. Null = os::RealClock(). Not owned.
  os::Clock* clock = nullptr;
  // Create only: chunker parameters of a new store (fixed for its lifetime).
  ChunkerParams chunker;
  // Create only: a pack is closed when it reaches this size.
  uint64_t pack_target_bytes = 16ull << 20;
};

// Progress of a long operation. Called on the operation's thread (snapshot)
// or a reporting thread (restore), never concurrently for one operation.
struct Progress {
  uint64_t done_bytes = 0;
  uint64_t total_bytes = 0;
};
using ProgressFn = std::function<void(const Progress&)>;

struct SnapshotOptions {
  std::map<std::string, std::string> tags;  // e.g. {"run": "r1", "step": "500"}
  // "auto": the newest snapshot of the same source directory (and the same
  // "run" tag when given); "": none; otherwise a snapshot id or prefix. Files
  // whose size, mtime and inode match the parent's entry are not re-read.
  std::string parent = "auto";
  std::optional<uint64_t> reserve_bytes;  // overrides the store's reserve
  ProgressFn progress;                    // after each file and each ~8 MiB
  // Runs every access to the source tree (resolving it, listing, lstat,
  // readlink, opening files) — e.g. os::AccessAsUser, so a root daemon reads
  // a user's directory with the user's permissions and the kernel refuses
  // what they could not read. The store itself is written as the process.
  // Empty: as the process.
  os::AccessAs read_as;
};

struct SnapshotResult {
  SnapshotId id;
  Manifest manifest;
  int64_t capture_ms = 0;  // walking, reading, chunking, hashing, queuing new chunks
  int64_t commit_ms = 0;   // waiting for the packs to be durable, then the manifest and index
};

// A snapshot that was not taken because it would have crossed the reserve
// (or the disk filled up). Kept in skipped/ and shown by `snap ls`.
struct SkipRecord {
  int64_t time_ms = 0;
  std::string source;
  std::map<std::string, std::string> tags;
  std::string reason;  // English
  std::string msg_id;  // catalog id of the reason, with its arguments
  MsgArgs args;
};

struct RestoreOptions {
  // A non-empty target is refused unless set; then the old contents are
  // swapped aside and removed only after the new ones are in place.
  bool force = false;
  ProgressFn progress;
  // Runs the part that touches the target (every directory, file and rename
  // there) — e.g. os::RunAsUser, so a root daemon writes with the user's
  // permissions. The store is read before: every pack the snapshot needs is
  // opened first. Empty: run it directly.
  os::AccessAs write_as;
};

struct RestoreResult {
  uint64_t files = 0;
  uint64_t bytes = 0;
  // Packs read whose 16-byte header is damaged (what is wrong, English).
  // Their chunks verified one by one, so the restore is intact; fsck
  // reports the packs.
  std::vector<std::string> damaged_pack_headers;
};

struct PrunePolicy {
  size_t keep_last = 0;       // keep the newest N snapshots of each source/run
  int64_t keep_every_ms = 0;  // also keep the newest snapshot of each such period (0: off)
  bool dry_run = false;
  std::string run;  // only snapshots tagged run=<this> ("" = all)
};

struct PruneResult {
  std::vector<SnapshotId> kept;  // the pinned ones too
  std::vector<SnapshotId> removed;
  std::vector<SnapshotId> pinned;  // kept only because they are pinned (pins.h)
};

struct GcResult {
  uint64_t packs_deleted = 0;
  uint64_t packs_rewritten = 0;
  uint64_t temp_files_removed = 0;
  uint64_t bytes_freed = 0;  // deleted and rewritten packs, and the temporary files removed
  uint64_t live_chunks = 0;
};

// One damaged thing found by fsck. Empty fields do not apply.
struct FsckProblem {
  std::string snapshot;
  std::string file;   // path inside the snapshot
  std::string chunk;  // chunk id (hex)
  std::string pack;
  std::string what;  // English description
};

// A damaged index.db that was moved aside and rebuilt.
struct IndexRepair {
  std::string moved_to;  // where the damaged file is now
  std::string detail;    // what was wrong with it (English)
};

struct FsckReport {
  uint64_t packs = 0;
  uint64_t chunks = 0;
  uint64_t snapshots = 0;
  uint64_t unreferenced_packs = 0;          // hold no live chunk: gc reclaims them
  uint64_t temp_packs = 0;                  // left by a snapshot in progress or killed
  std::vector<SnapshotId> lost_snapshots;   // each also a problem; gc refuses to run while any
  std::optional<IndexRepair> index_repair;  // the index was damaged and rebuilt first
  std::vector<FsckProblem> problems;
  bool ok() const { return problems.empty(); }
};

class Store {
 public:
  // Opens the store in `dir`, creating it (and `dir`) when there is none.
  static Result<std::unique_ptr<Store>> Create(const std::string& dir, StoreOptions opts = {});
  // Opens an existing store; NotFound (snap.no_store) when `dir` holds none,
  // PermissionDenied (snap.store_unreadable) when this user cannot look.
  static Result<std::unique_ptr<Store>> Open(const std::string& dir, StoreOptions opts = {});
  ~Store();

  // Captures `dir`. A snapshot that would cross the free-space reserve is
  // skipped: nothing is committed, a SkipRecord is written, and the result
  // is ResourceExhausted (snap.reserve or snap.disk_full).
  Result<SnapshotResult> Snapshot(const std::string& dir, const SnapshotOptions& opts);

  // Snapshots, newest first (from the index).
  Result<std::vector<SnapshotInfo>> List();
  // Skip records, newest first.
  Result<std::vector<SkipRecord>> Skipped();
  // A full id, a unique prefix of at least 4 hex digits, or "latest".
  // NotFound (snap.not_found) / InvalidArgument (snap.ambiguous).
  Result<SnapshotId> Resolve(std::string_view ref);
  // Reads and verifies a manifest.
  Result<Manifest> Load(const SnapshotId& id);

  // Restores into `target` (see RestoreOptions). Every chunk is verified;
  // a damaged one fails the restore naming the file and the chunk, and the
  // target is left untouched.
  Result<RestoreResult> Restore(const SnapshotId& id, const std::string& target,
                                const RestoreOptions& opts);

  // Removes the manifests the policy does not keep. Never removes the newest
  // complete snapshot of a source/run, nor a pinned one. Chunks are freed by Gc.
  Result<PruneResult> Prune(const PrunePolicy& policy);
  // Removes one snapshot, even the newest complete one of its run (the
  // daemon does this when asked to). Its chunks are freed by Gc.
  // FailedPrecondition (snap.pinned, naming the holders) while it is pinned.
  Status Forget(const SnapshotId& id);

  // Pins `id` for `holder` (e.g. "model digits/3"; see pins.h): it stays
  // until every holder unpins it. NotFound (snap.not_found) when the
  // snapshot is not (or no longer) in the store. Pinning twice is OK.
  Status Pin(const SnapshotId& id, const std::string& holder);
  // Removes `holder`'s pin; one that is not there is OK.
  Status Unpin(const SnapshotId& id, const std::string& holder);
  // The holders of `id`'s pins, sorted (empty: not pinned).
  Result<std::vector<std::string>> Pins(const SnapshotId& id);
  // Mark and sweep: deletes packs without live chunks, rewrites packs that
  // are mostly dead, removes temporary files of killed snapshots.
  // FailedPrecondition, deleting nothing, while a manifest is damaged
  // (snap.gc_damaged) or lost (snap.gc_lost).
  Result<GcResult> Gc();
  // Checks the index (quick_check; a damaged one is rebuilt first), reads
  // every pack and manifest and verifies every chunk.
  Result<FsckReport> Fsck();
  // Rebuilds index.db from packs/ and snapshots/. It forgets lost snapshots.
  Status RebuildIndex();

  // The last repair of a damaged index this Store made, if any.
  std::optional<IndexRepair> index_repair() const;

  const StoreLayout& layout() const { return layout_; }
  const StoreConfig& config() const { return config_; }
  uint64_t reserve_bytes() const { return reserve_bytes_; }

 private:
  Store() = default;
  static Result<std::unique_ptr<Store>> OpenExisting(const std::string& root, StoreOptions opts);
  Result<SnapshotResult> SnapshotOnce(const std::string& dir, const SnapshotOptions& opts);
  Status Reconcile();  // the caller holds the lock, shared or exclusive
  StoreContext Ctx() const;
  // Takes the lock and reconciles, first reopening an index that another
  // process replaced.
  Result<os::FileLock> LockAndReconcile(os::FileLock::Mode mode);
  // Runs `op` (which takes its own lock); when it fails on a damaged index,
  // repairs the index and runs it once more.
  template <typename F>
  auto Repairing(F&& op) -> decltype(op());
  // Takes the exclusive lock; moves the index aside and rebuilds it unless
  // another process already did. The caller holds no lock.
  Status RepairIndex(const Status& why);

  // Constant after construction.
  StoreLayout layout_;
  StoreConfig config_;
  StoreOptions opts_;
  uint64_t reserve_bytes_ = 0;
  os::Clock* clock_ = nullptr;
  std::unique_ptr<Index> index_;  // thread-safe itself

  mutable std::mutex repair_mu_;
  std::optional<IndexRepair> repair_;  // guarded by repair_mu_
};

}  // namespace lathe::snap
