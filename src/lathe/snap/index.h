// The store's index (SQLite, <store>/index.db): where each chunk lies and a
// summary of each snapshot, so that dedup lookups and `snap ls` need not read
// every pack and manifest. It is a cache: everything in it can be rebuilt
// from packs/ and snapshots/ (Store::RebuildIndex), and Store::Open
// reconciles it with the directory listings, so a crash between committing a
// manifest and updating the index loses nothing.
//
// Thread-safe: one connection guarded by a mutex. Other processes may use
// the same file (SQLite WAL, busy timeout).
//
// A damaged file (garbage written into it, a torn disk block) shows as a
// status for which state::IsCorruption holds, from Open, from Check or from
// any query. Store then moves the file aside (MoveAside, Reopen) and
// rebuilds it; see Store::index_repair().
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/snap/manifest.h"
#include "lathe/snap/pack.h"
#include "lathe/state/db.h"

namespace lathe::snap {

struct ChunkLocation {
  std::string pack;  // pack name (without .pack)
  PackEntry entry;
};

class Index {
 public:
  static Result<std::unique_ptr<Index>> Open(const std::string& path);
  ~Index();
  // Renames the file at `path` (and its WAL) to <path>.corrupt-<now_ms> and
  // removes its shared-memory file, so that a new index can take its place;
  // returns the new name. No connection of this process may be open on it.
  static Result<std::string> MoveAside(const std::string& path, int64_t now_ms);

  // PRAGMA quick_check of the file: reads every page.
  Status Check();
  // True when the file at the path is no longer the one open here (another
  // process moved a damaged index aside and made a new one).
  bool Replaced() const;
  // Closes the file and opens the one at the path; with `move_aside`, the
  // closed file is first moved aside (MoveAside) and its new name returned.
  // When the open fails, every call fails until a Reopen succeeds.
  Result<std::string> Reopen(bool move_aside, int64_t now_ms);

  Result<std::optional<ChunkLocation>> FindChunk(const Digest& id);
  Result<bool> HasChunk(const Digest& id);

  Result<std::set<std::string>> PackNames();
  Status AddPacks(const std::vector<PackFile>& packs);  // one transaction
  Status RemovePack(const std::string& name);

  Result<std::set<SnapshotId>> SnapshotIds();
  Status AddSnapshot(const SnapshotInfo& info);
  Status RemoveSnapshot(const SnapshotId& id);
  // Newest first.
  Result<std::vector<SnapshotInfo>> Snapshots();

  // Empties every table (before a rebuild).
  Status Clear();

 private:
  Index(std::string path, std::unique_ptr<state::Db> db, ino_t ino)
      : path_(std::move(path)), db_(std::move(db)), ino_(ino) {}
  static Result<std::unique_ptr<state::Db>> OpenDb(const std::string& path, ino_t* ino);
  // mu_ held:
  Status Usable() const;
  bool ReplacedLocked() const;
  void CloseLocked();
  Status AddPackLocked(const PackFile& p);
  // A statement prepared once and kept (a snapshot of 256 MiB looks up and
  // inserts ~4,000 chunks; preparing each time was a tenth of its CPU).
  Result<state::Stmt*> Kept(std::optional<state::Stmt>* slot, std::string_view sql);

  const std::string path_;
  mutable std::mutex mu_;
  std::unique_ptr<state::Db> db_;  // guarded by mu_; null after a failed Reopen
  ino_t ino_ = 0;                  // guarded by mu_: the inode db_ has open
  std::optional<state::Stmt> find_chunk_, insert_chunk_;  // after db_: finalized before it closes
};

}  // namespace lathe::snap
