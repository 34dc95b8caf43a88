// The store's index (SQLite, <store>/index.db): where each chunk lies and a
// summary of each snapshot, so that dedup lookups and `snap ls` need not read
// every pack and manifest. It is a cache: everything in it can be rebuilt
// from packs/ and snapshots/ (Store::RebuildIndex), and Store::Open
// reconciles it with the directory listings, so a crash between committing a
// manifest and updating the index loses nothing.
//
// Thread-safe: one connection guarded by a mutex. Other processes may use
// the same file (SQLite WAL, busy timeout).
#pragma once

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
  explicit Index(std::unique_ptr<state::Db> db) : db_(std::move(db)) {}
  Status AddPackLocked(const PackFile& p);
  // A statement prepared once and kept (a snapshot of 256 MiB looks up and
  // inserts ~4,000 chunks; preparing each time was a tenth of its CPU).
  Result<state::Stmt*> Kept(std::optional<state::Stmt>* slot, std::string_view sql);

  std::mutex mu_;
  std::unique_ptr<state::Db> db_;  // guarded by mu_
  std::optional<state::Stmt> find_chunk_, insert_chunk_;  // after db_: finalized before it closes
};

}  // namespace lathe::snap
