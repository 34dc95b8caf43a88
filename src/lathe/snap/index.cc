#include "lathe/snap/index.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>

#include "lathe/os/files.h"

namespace lathe::snap {
namespace {

// Chunk ids are stored as hex text: state::Db binds text, and the index is a
// cache whose size matters little next to the packs.
const std::vector<std::string>& Migrations() {
  static const std::vector<std::string> m = {
      "CREATE TABLE packs(name TEXT PRIMARY KEY, size INTEGER NOT NULL);"
      "CREATE TABLE chunks(id TEXT NOT NULL, pack TEXT NOT NULL, offset INTEGER NOT NULL,"
      "  stored INTEGER NOT NULL, raw INTEGER NOT NULL, flags INTEGER NOT NULL,"
      "  PRIMARY KEY(id, pack)) WITHOUT ROWID;"
      "CREATE INDEX chunks_by_pack ON chunks(pack);"
      "CREATE TABLE snapshots(id TEXT PRIMARY KEY, time_ms INTEGER NOT NULL, source TEXT NOT NULL,"
      "  parent TEXT NOT NULL, tags TEXT NOT NULL, files INTEGER NOT NULL, bytes INTEGER NOT NULL,"
      "  new_bytes INTEGER NOT NULL, complete INTEGER NOT NULL, reason TEXT NOT NULL);",
  };
  return m;
}

}  // namespace

Result<std::unique_ptr<state::Db>> Index::OpenDb(const std::string& path, ino_t* ino) {
  ASSIGN_OR_RETURN(auto db, state::Db::Open(path, Migrations()));
  // The index is rebuildable, so a power cut may lose its last transaction;
  // NORMAL skips an fsync per commit.
  RETURN_IF_ERROR(db->Exec("PRAGMA synchronous=NORMAL"));
  auto st = os::StatFile(path);
  *ino = st.ok() ? static_cast<ino_t>(st->inode) : 0;
  return db;
}

Result<std::unique_ptr<Index>> Index::Open(const std::string& path) {
  ino_t ino = 0;
  ASSIGN_OR_RETURN(auto db, OpenDb(path, &ino));
  return std::unique_ptr<Index>(new Index(path, std::move(db), ino));
}

Result<std::string> Index::MoveAside(const std::string& path, int64_t now_ms) {
  std::string to = path + ".corrupt-" + std::to_string(now_ms);
  for (const char* suffix : {"", "-wal"}) {
    Status st = os::Rename(path + suffix, to + suffix);
    if (!st.ok() && !st.IsNotFound()) return st.WithContext("move aside");
  }
  RETURN_IF_ERROR(os::RemoveFile(path + "-shm"));
  return to;
}

Status Index::Usable() const {
  if (!db_) return Status::Unavailable("the snapshot index " + path_ + " is not open");
  return Status::OK();
}

Status Index::Check() {
  std::lock_guard<std::mutex> l(mu_);
  RETURN_IF_ERROR(Usable());
  return db_->QuickCheck();
}

bool Index::Replaced() const {
  std::lock_guard<std::mutex> l(mu_);
  return ReplacedLocked();
}

bool Index::ReplacedLocked() const {
  auto st = os::StatFile(path_);
  return st.ok() && st->inode != static_cast<uint64_t>(ino_);
}

// Closing a file that another process moved aside must not delete the WAL of
// the new one at the same path (SQLite deletes "<path>-wal" by name).
void Index::CloseLocked() {
  find_chunk_.reset();
  insert_chunk_.reset();
  if (db_ && ReplacedLocked()) db_->SkipCheckpointOnClose();
  db_.reset();
}

Index::~Index() {
  std::lock_guard<std::mutex> l(mu_);
  CloseLocked();
}

Result<std::string> Index::Reopen(bool move_aside, int64_t now_ms) {
  std::lock_guard<std::mutex> l(mu_);
  CloseLocked();
  std::string moved;
  if (move_aside) {
    ASSIGN_OR_RETURN(moved, MoveAside(path_, now_ms));
  }
  ASSIGN_OR_RETURN(db_, OpenDb(path_, &ino_));
  return moved;
}

Result<state::Stmt*> Index::Kept(std::optional<state::Stmt>* slot, std::string_view sql) {
  if (!slot->has_value()) {
    ASSIGN_OR_RETURN(auto s, db_->Prepare(sql));
    slot->emplace(std::move(s));
  }
  (*slot)->Reset();
  return &**slot;
}

Result<std::optional<ChunkLocation>> Index::FindChunk(const Digest& id) {
  std::lock_guard<std::mutex> l(mu_);
  RETURN_IF_ERROR(Usable());
  ASSIGN_OR_RETURN(
      state::Stmt * s,
      Kept(&find_chunk_, "SELECT pack, offset, stored, raw, flags FROM chunks WHERE id=? LIMIT 1"));
  s->Bind(1, ToHex(id));
  auto row = s->Step();
  std::optional<ChunkLocation> out;
  if (row.ok() && *row) {
    out = ChunkLocation{
        s->Text(0),
        PackEntry{id, static_cast<uint64_t>(s->Int(1)), static_cast<uint32_t>(s->Int(2)),
                  static_cast<uint32_t>(s->Int(3)), static_cast<uint8_t>(s->Int(4))}};
  }
  s->Reset();
  if (!row.ok()) return row.status();
  return out;
}

Result<bool> Index::HasChunk(const Digest& id) {
  ASSIGN_OR_RETURN(auto loc, FindChunk(id));
  return loc.has_value();
}

Result<std::set<std::string>> Index::PackNames() {
  std::lock_guard<std::mutex> l(mu_);
  RETURN_IF_ERROR(Usable());
  ASSIGN_OR_RETURN(auto s, db_->Prepare("SELECT name FROM packs"));
  std::set<std::string> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    out.insert(s.Text(0));
  }
}

Status Index::AddPackLocked(const PackFile& p) {
  ASSIGN_OR_RETURN(auto ps, db_->Prepare("INSERT OR REPLACE INTO packs(name, size) VALUES(?, ?)"));
  RETURN_IF_ERROR(ps.Bind(1, p.name).Bind(2, static_cast<int64_t>(p.size)).Run());
  for (const auto& e : p.entries) {
    ASSIGN_OR_RETURN(state::Stmt * s, Kept(&insert_chunk_,
                                           "INSERT OR REPLACE INTO chunks(id, pack, offset, "
                                           "stored, raw, flags) VALUES(?, ?, ?, ?, ?, ?)"));
    s->Bind(1, ToHex(e.id)).Bind(2, p.name).Bind(3, static_cast<int64_t>(e.offset));
    s->Bind(4, static_cast<int64_t>(e.stored))
        .Bind(5, static_cast<int64_t>(e.raw))
        .Bind(6, int64_t{e.flags});
    Status st = s->Run();
    s->Reset();
    RETURN_IF_ERROR(st);
  }
  return Status::OK();
}

Status Index::AddPacks(const std::vector<PackFile>& packs) {
  std::lock_guard<std::mutex> l(mu_);
  RETURN_IF_ERROR(Usable());
  return db_->Transaction([&]() -> Status {
    for (const auto& p : packs) RETURN_IF_ERROR(AddPackLocked(p));
    return Status::OK();
  });
}

Status Index::RemovePack(const std::string& name) {
  std::lock_guard<std::mutex> l(mu_);
  RETURN_IF_ERROR(Usable());
  return db_->Transaction([&]() -> Status {
    ASSIGN_OR_RETURN(auto c, db_->Prepare("DELETE FROM chunks WHERE pack=?"));
    RETURN_IF_ERROR(c.Bind(1, name).Run());
    ASSIGN_OR_RETURN(auto p, db_->Prepare("DELETE FROM packs WHERE name=?"));
    return p.Bind(1, name).Run();
  });
}

Result<std::set<SnapshotId>> Index::SnapshotIds() {
  std::lock_guard<std::mutex> l(mu_);
  RETURN_IF_ERROR(Usable());
  ASSIGN_OR_RETURN(auto s, db_->Prepare("SELECT id FROM snapshots"));
  std::set<SnapshotId> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    out.insert(s.Text(0));
  }
}

Status Index::AddSnapshot(const SnapshotInfo& i) {
  std::lock_guard<std::mutex> l(mu_);
  RETURN_IF_ERROR(Usable());
  ASSIGN_OR_RETURN(auto s, db_->Prepare("INSERT OR REPLACE INTO snapshots(id, time_ms, source, "
                                        "parent, tags, files, bytes, new_bytes, complete,"
                                        " reason) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  std::string tags = nlohmann::json(i.tags).dump();
  s.Bind(1, i.id).Bind(2, i.time_ms).Bind(3, i.source).Bind(4, i.parent).Bind(5, tags);
  s.Bind(6, static_cast<int64_t>(i.files)).Bind(7, static_cast<int64_t>(i.bytes));
  s.Bind(8, static_cast<int64_t>(i.new_bytes)).Bind(9, int64_t{i.complete}).Bind(10, i.reason);
  return s.Run();
}

Status Index::RemoveSnapshot(const SnapshotId& id) {
  std::lock_guard<std::mutex> l(mu_);
  RETURN_IF_ERROR(Usable());
  ASSIGN_OR_RETURN(auto s, db_->Prepare("DELETE FROM snapshots WHERE id=?"));
  return s.Bind(1, id).Run();
}

Result<std::vector<SnapshotInfo>> Index::Snapshots() {
  std::lock_guard<std::mutex> l(mu_);
  RETURN_IF_ERROR(Usable());
  ASSIGN_OR_RETURN(auto s, db_->Prepare("SELECT id, time_ms, source, parent, tags, files, bytes, "
                                        "new_bytes, complete, reason FROM snapshots"
                                        " ORDER BY time_ms DESC, id"));
  std::vector<SnapshotInfo> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    SnapshotInfo i;
    i.id = s.Text(0);
    i.time_ms = s.Int(1);
    i.source = s.Text(2);
    i.parent = s.Text(3);
    auto tags = nlohmann::json::parse(s.Text(4), nullptr, false);
    if (tags.is_object()) {
      for (const auto& [k, v] : tags.items())
        i.tags[k] = v.is_string() ? v.get<std::string>() : v.dump();
    }
    i.files = static_cast<uint64_t>(s.Int(5));
    i.bytes = static_cast<uint64_t>(s.Int(6));
    i.new_bytes = static_cast<uint64_t>(s.Int(7));
    i.complete = s.Int(8) != 0;
    i.reason = s.Text(9);
    out.push_back(std::move(i));
  }
}

Status Index::Clear() {
  std::lock_guard<std::mutex> l(mu_);
  RETURN_IF_ERROR(Usable());
  return db_->Exec("DELETE FROM chunks; DELETE FROM packs; DELETE FROM snapshots;");
}

}  // namespace lathe::snap
