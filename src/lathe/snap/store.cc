#include "lathe/snap/store.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include <spdlog/spdlog.h>

#include "lathe/os/disk_space.h"
#include "lathe/os/fd.h"
#include "lathe/os/file_lock.h"
#include "lathe/os/files.h"
#include "lathe/snap/fsck.h"
#include "lathe/snap/gc.h"
#include "lathe/snap/index.h"
#include "lathe/snap/manifest_files.h"
#include "lathe/snap/parallel.h"
#include "lathe/snap/pins.h"
#include "lathe/snap/prune.h"
#include "lathe/snap/restorer.h"
#include "lathe/snap/snapshotter.h"
#include "lathe/state/db.h"

namespace lathe::snap {
namespace {

constexpr size_t kMinPrefix = 4;

Result<std::string> RealPath(const std::string& p) {
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf) == nullptr) return ErrnoStatus(p, errno);
  return std::string(buf);
}

Status MakeStoreDirs(const StoreLayout& l) {
  for (const auto& d : {l.packs(), l.pack_tmp(), l.snapshots(), l.skipped()})
    RETURN_IF_ERROR(os::MakeDirs(d));
  return Status::OK();
}

Result<PackFile> ReadPackFile(const StoreLayout& l, const std::string& name) {
  PackFile p;
  p.name = name;
  ASSIGN_OR_RETURN(os::Fd fd, os::Fd::Open(l.pack(name), O_RDONLY));
  ASSIGN_OR_RETURN(os::FileStamp st, os::StatOpenFile(fd.get(), l.pack(name)));
  p.size = st.size_bytes;
  ASSIGN_OR_RETURN(p.entries, ReadPackIndex(fd.get(), p.size, name));
  return p;
}

const Status& StatusOf(const Status& s) { return s; }
template <typename T>
const Status& StatusOf(const Result<T>& r) {
  return r.status();
}

SkipRecord ParseSkip(const nlohmann::json& j) {
  SkipRecord r;
  r.time_ms = j.value("time_ms", int64_t{0});
  r.source = j.value("source", "");
  r.reason = j.value("reason", "");
  r.msg_id = j.value("msg_id", "");
  if (j.contains("tags") && j["tags"].is_object()) {
    for (const auto& [k, v] : j["tags"].items())
      r.tags[k] = v.is_string() ? v.get<std::string>() : v.dump();
  }
  if (j.contains("args") && j["args"].is_object()) {
    for (const auto& [k, v] : j["args"].items())
      r.args.push_back({k, v.is_string() ? v.get<std::string>() : v.dump()});
  }
  return r;
}

}  // namespace

Store::~Store() = default;

Result<std::unique_ptr<Store>> Store::Create(const std::string& dir, StoreOptions opts) {
  RETURN_IF_ERROR(os::MakeDirs(dir));
  ASSIGN_OR_RETURN(std::string root, RealPath(dir));
  StoreLayout l{root};
  if (!os::Exists(l.config())) {
    if (!ValidChunkerParams(opts.chunker)) {
      return Status::InvalidArgument(
          "chunker parameters: need min < avg < max, avg a power of two, max <= 16 MiB");
    }
    RETURN_IF_ERROR(MakeStoreDirs(l));
    StoreConfig c{opts.chunker, opts.pack_target_bytes, std::nullopt,
                  (opts.clock ? *opts.clock : os::RealClock()).NowMs()};
    // The config is written last: a store exists once it is in place.
    RETURN_IF_ERROR(os::WriteFileAtomic(l.config(), ConfigToJson(c)));
  }
  return OpenExisting(root, std::move(opts));
}

Result<std::unique_ptr<Store>> Store::Open(const std::string& dir, StoreOptions opts) {
  auto root = RealPath(dir);
  // A store this user may not look into is not a missing one.
  Status found = root.ok() ? os::StatFile(StoreLayout{*root}.config()).status() : root.status();
  if (found.IsPermissionDenied())
    return Status::Msg(Code::kPermissionDenied, "snap.store_unreadable", {{"path", dir}});
  if (!found.ok()) return Status::Msg(Code::kNotFound, "snap.no_store", {{"path", dir}});
  return OpenExisting(*root, std::move(opts));
}

Result<std::unique_ptr<Store>> Store::OpenExisting(const std::string& root, StoreOptions opts) {
  std::unique_ptr<Store> s(new Store());
  s->layout_ = StoreLayout{root};
  ASSIGN_OR_RETURN(std::string text, os::ReadFile(s->layout_.config()));
  ASSIGN_OR_RETURN(s->config_, ConfigFromJson(text, s->layout_.config()));
  RETURN_IF_ERROR(MakeStoreDirs(s->layout_));
  s->clock_ = opts.clock ? opts.clock : &os::RealClock();
  if (opts.threads == 0) opts.threads = DefaultThreads();
  if (opts.reserve_bytes) {
    s->reserve_bytes_ = *opts.reserve_bytes;
  } else if (s->config_.reserve_bytes) {
    s->reserve_bytes_ = *s->config_.reserve_bytes;
  } else {
    ASSIGN_OR_RETURN(uint64_t fs, os::FilesystemBytes(root));
    s->reserve_bytes_ = DefaultReserveBytes(fs);
  }
  s->opts_ = std::move(opts);
  auto index = Index::Open(s->layout_.index());
  if (index.ok()) {
    s->index_ = std::move(*index);
  } else if (state::IsCorruption(index.status())) {
    RETURN_IF_ERROR(s->RepairIndex(index.status()));
  } else {
    return index.status();
  }
  RETURN_IF_ERROR(
      s->Repairing([&] { return s->LockAndReconcile(os::FileLock::Mode::kShared).status(); }));
  return s;
}

Result<os::FileLock> Store::LockAndReconcile(os::FileLock::Mode mode) {
  if (index_->Replaced()) RETURN_IF_ERROR(index_->Reopen(false, 0).status());
  ASSIGN_OR_RETURN(auto lock, os::FileLock::Acquire(layout_.lock(), mode));
  RETURN_IF_ERROR(Reconcile());
  return lock;
}

// Operations nest (Snapshot resolves its parent through List): only the
// outermost one repairs, once its lock is released, since the exclusive lock
// cannot be had while this thread holds the shared one.
thread_local int repairing_depth = 0;

template <typename F>
auto Store::Repairing(F&& op) -> decltype(op()) {
  ++repairing_depth;
  auto r = op();
  --repairing_depth;
  const Status& st = StatusOf(r);
  if (st.ok() || !state::IsCorruption(st) || repairing_depth > 0) return r;
  Status why = st;
  RETURN_IF_ERROR(RepairIndex(why));
  return op();
}

// Under the exclusive lock no other process uses the index, so what is found
// damaged now is damaged for all; a file found healthy was repaired by
// another process meanwhile (this one may still have the old one open).
Status Store::RepairIndex(const Status& why) {
  ASSIGN_OR_RETURN(auto lock,
                   os::FileLock::Acquire(layout_.lock(), os::FileLock::Mode::kExclusive));
  Status health;
  if (index_) {
    auto reopened = index_->Reopen(false, 0);
    health = reopened.ok() ? index_->Check() : reopened.status();
  } else {
    auto fresh = Index::Open(layout_.index());
    health = fresh.ok() ? (*fresh)->Check() : fresh.status();
    if (health.ok()) index_ = std::move(*fresh);
  }
  if (!health.ok() && !state::IsCorruption(health)) return health;
  if (!health.ok()) {
    int64_t now = clock_->NowMs();
    std::string moved;
    if (index_) {
      ASSIGN_OR_RETURN(moved, index_->Reopen(true, now));
    } else {
      ASSIGN_OR_RETURN(moved, Index::MoveAside(layout_.index(), now));
      ASSIGN_OR_RETURN(index_, Index::Open(layout_.index()));
    }
    spdlog::warn(
        "snapshot index {} was damaged ({}); moved to {} and rebuilt from the packs and manifests",
        layout_.index(), why.message(), moved);
    std::lock_guard<std::mutex> l(repair_mu_);
    repair_ = IndexRepair{moved, why.message()};
  }
  return Reconcile();
}

std::optional<IndexRepair> Store::index_repair() const {
  std::lock_guard<std::mutex> l(repair_mu_);
  return repair_;
}

StoreContext Store::Ctx() const {
  return {layout_, config_, *index_, *clock_, reserve_bytes_, opts_.threads};
}

// Brings the index in line with packs/ and snapshots/. The caller holds a
// lock, so no gc runs meanwhile: a pack listed here stays on disk.
Status Store::Reconcile() {
  ASSIGN_OR_RETURN(auto disk_packs, ListPackNames(layout_));
  ASSIGN_OR_RETURN(auto known_packs, index_->PackNames());
  std::vector<PackFile> add;
  for (const auto& name : disk_packs) {
    if (known_packs.erase(name)) continue;
    auto p = ReadPackFile(layout_, name);
    if (p.ok()) {
      add.push_back(std::move(*p));
    } else {
      spdlog::warn("pack {} not indexed: {}", name, p.status().ToString());
    }
  }
  RETURN_IF_ERROR(index_->AddPacks(add));
  for (const auto& gone : known_packs) RETURN_IF_ERROR(index_->RemovePack(gone));

  // Prunes a killed process left half-done (manifest_files.h).
  ASSIGN_OR_RETURN(auto pruned, ListPrunedIds(layout_));
  for (const auto& id : pruned) {
    RETURN_IF_ERROR(index_->RemoveSnapshot(id));
    RETURN_IF_ERROR(UnlinkPruned(layout_, id));
  }
  ASSIGN_OR_RETURN(auto disk_ids, ListManifestIds(layout_));
  ASSIGN_OR_RETURN(auto known_ids, index_->SnapshotIds());
  for (const auto& id : disk_ids) {
    if (known_ids.count(id)) continue;
    auto m = ReadManifest(layout_, id);
    if (m.ok()) {
      RETURN_IF_ERROR(index_->AddSnapshot(Summarize(id, *m)));
      // A prune may have taken it away since it was read: its entry must not
      // outlive it, or it would look lost.
      if (!os::Exists(layout_.manifest(id))) RETURN_IF_ERROR(index_->RemoveSnapshot(id));
    } else if (!m.status().IsNotFound()) {
      spdlog::warn("snapshot {} not indexed: {}", id, m.status().ToString());
    }
  }
  // Snapshots the index lists without a manifest stay listed: lost ones
  // (lost.h), reported by fsck until the manifest is back or RebuildIndex.
  return Status::OK();
}

Result<SnapshotResult> Store::Snapshot(const std::string& dir, const SnapshotOptions& opts) {
  return Repairing([&] { return SnapshotOnce(dir, opts); });
}

Result<SnapshotResult> Store::SnapshotOnce(const std::string& dir, const SnapshotOptions& opts) {
  ASSIGN_OR_RETURN(auto lock, LockAndReconcile(os::FileLock::Mode::kShared));
  SnapshotId parent_id;
  if (opts.parent == "auto") {
    Result<std::string> source = Status::NotFound(dir);
    // Best effort: the body only looks: what it finds is in the variables it sets.
    (void)os::WithAccess(opts.read_as, [&] {
      source = RealPath(dir);
      return Status::OK();
    });
    ASSIGN_OR_RETURN(auto snaps, index_->Snapshots());
    auto run = opts.tags.find("run");
    for (const auto& s : snaps) {  // newest first
      if (!source.ok() || s.source != *source) continue;
      if (run != opts.tags.end() && s.tags.count("run") && s.tags.at("run") != run->second)
        continue;
      parent_id = s.id;
      break;
    }
  } else if (!opts.parent.empty()) {
    ASSIGN_OR_RETURN(parent_id, Resolve(opts.parent));
  }
  std::optional<Manifest> parent;
  if (!parent_id.empty()) {
    auto m = ReadManifest(layout_, parent_id);
    if (!m.ok() && opts.parent != "auto") return m.status();
    if (m.ok()) parent = std::move(*m);
    if (!m.ok()) parent_id.clear();  // a damaged parent only costs re-reading the files
  }
  return TakeSnapshot(Ctx(), dir, opts, parent ? &*parent : nullptr, parent_id);
}

Result<std::vector<SnapshotInfo>> Store::List() {
  auto snaps = Repairing([&]() -> Result<std::vector<SnapshotInfo>> {
    ASSIGN_OR_RETURN(auto lock, LockAndReconcile(os::FileLock::Mode::kShared));
    return index_->Snapshots();
  });
  // Lost snapshots (lost.h) can be neither shown nor restored: fsck names them.
  if (snaps.ok())
    std::erase_if(*snaps,
                  [&](const SnapshotInfo& s) { return !os::Exists(layout_.manifest(s.id)); });
  return snaps;
}

Result<std::vector<SkipRecord>> Store::Skipped() {
  ASSIGN_OR_RETURN(auto names, os::ListDir(layout_.skipped()));
  std::vector<SkipRecord> out;
  for (const auto& n : names) {
    if (n.size() < 5 || n.compare(n.size() - 5, 5, ".json") != 0) continue;
    auto text = os::ReadFile(layout_.skipped() + "/" + n);
    if (!text.ok()) continue;
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_object()) out.push_back(ParseSkip(j));
  }
  std::sort(out.begin(), out.end(),
            [](const SkipRecord& a, const SkipRecord& b) { return a.time_ms > b.time_ms; });
  return out;
}

Result<SnapshotId> Store::Resolve(std::string_view ref) {
  if (ref == "latest") {
    ASSIGN_OR_RETURN(auto snaps, List());
    if (snaps.empty())
      return Status::Msg(Code::kNotFound, "snap.not_found", {{"snapshot", "latest"}});
    return snaps.front().id;
  }
  if (!IsHexPrefix(ref) || ref.size() < kMinPrefix) {
    return Status::Msg(Code::kInvalidArgument, "snap.bad_ref", {{"snapshot", std::string(ref)}});
  }
  ASSIGN_OR_RETURN(auto ids, ListManifestIds(layout_));
  std::vector<SnapshotId> hits;
  for (const auto& id : ids) {
    if (id.compare(0, ref.size(), ref) == 0) hits.push_back(id);
  }
  if (hits.empty())
    return Status::Msg(Code::kNotFound, "snap.not_found", {{"snapshot", std::string(ref)}});
  if (hits.size() > 1) {
    return Status::Msg(Code::kInvalidArgument, "snap.ambiguous",
                       {{"snapshot", std::string(ref)}, {"count", std::to_string(hits.size())}});
  }
  return hits.front();
}

Result<Manifest> Store::Load(const SnapshotId& id) { return ReadManifest(layout_, id); }

Result<RestoreResult> Store::Restore(const SnapshotId& id, const std::string& target,
                                     const RestoreOptions& opts) {
  return Repairing([&]() -> Result<RestoreResult> {
    ASSIGN_OR_RETURN(auto lock, LockAndReconcile(os::FileLock::Mode::kShared));
    ASSIGN_OR_RETURN(Manifest m, ReadManifest(layout_, id));
    return RestoreSnapshot(Ctx(), id, m, target, opts);
  });
}

Result<PruneResult> Store::Prune(const PrunePolicy& policy) {
  return Repairing([&]() -> Result<PruneResult> {
    ASSIGN_OR_RETURN(auto lock, LockAndReconcile(os::FileLock::Mode::kShared));
    return PruneSnapshots(Ctx(), policy);
  });
}

Status Store::Forget(const SnapshotId& id) {
  return Repairing([&]() -> Status {
    ASSIGN_OR_RETURN(auto lock, LockAndReconcile(os::FileLock::Mode::kShared));
    return ForgetSnapshot(Ctx(), id);
  });
}

Status Store::Pin(const SnapshotId& id, const std::string& holder) {
  RETURN_IF_ERROR(CheckPinHolder(holder));
  return Repairing([&]() -> Status {
    ASSIGN_OR_RETURN(auto lock, LockAndReconcile(os::FileLock::Mode::kShared));
    ASSIGN_OR_RETURN(auto pins, LockPins(layout_));
    // Under the pins lock no removal is between its check and its mark: a
    // manifest seen here stays until the pin is undone.
    if (!IsSnapshotId(id) || !os::Exists(layout_.manifest(id))) {
      return Status::Msg(Code::kNotFound, "snap.not_found", {{"snapshot", id}});
    }
    return WritePin(layout_, id, holder);
  });
}

Status Store::Unpin(const SnapshotId& id, const std::string& holder) {
  if (!IsSnapshotId(id)) return Status::Msg(Code::kNotFound, "snap.not_found", {{"snapshot", id}});
  ASSIGN_OR_RETURN(auto pins, LockPins(layout_));
  return RemovePin(layout_, id, holder);
}

Result<std::vector<std::string>> Store::Pins(const SnapshotId& id) {
  if (!IsSnapshotId(id)) return std::vector<std::string>();
  return ReadPins(layout_, id);
}

Result<GcResult> Store::Gc() {
  return Repairing([&]() -> Result<GcResult> {
    ASSIGN_OR_RETURN(auto lock, LockAndReconcile(os::FileLock::Mode::kExclusive));
    return CollectGarbage(Ctx());
  });
}

Result<FsckReport> Store::Fsck() {
  auto r = Repairing([&]() -> Result<FsckReport> {
    RETURN_IF_ERROR(index_->Check());
    ASSIGN_OR_RETURN(auto lock, LockAndReconcile(os::FileLock::Mode::kShared));
    return CheckStore(Ctx());
  });
  if (r.ok()) r->index_repair = index_repair();
  return r;
}

Status Store::RebuildIndex() {
  return Repairing([&]() -> Status {
    if (index_->Replaced()) RETURN_IF_ERROR(index_->Reopen(false, 0).status());
    ASSIGN_OR_RETURN(auto lock,
                     os::FileLock::Acquire(layout_.lock(), os::FileLock::Mode::kExclusive));
    RETURN_IF_ERROR(index_->Check());
    RETURN_IF_ERROR(index_->Clear());
    return Reconcile();
  });
}

}  // namespace lathe::snap
