#include "lathe/snap/store.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include <spdlog/spdlog.h>

#include "lathe/os/files.h"
#include "lathe/snap/file_io.h"
#include "lathe/snap/fsck.h"
#include "lathe/snap/gc.h"
#include "lathe/snap/index.h"
#include "lathe/snap/manifest_files.h"
#include "lathe/snap/parallel.h"
#include "lathe/snap/prune.h"
#include "lathe/snap/restorer.h"
#include "lathe/snap/snapshotter.h"

namespace lathe::snap {
namespace {

constexpr size_t kMinPrefix = 4;

Result<std::string> RealPath(const std::string& p) {
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf) == nullptr) return ErrnoStatus(p, errno);
  return std::string(buf);
}

Status MakeStoreDirs(const StoreLayout& l) {
  for (const auto& d : {l.packs(), l.pack_tmp(), l.snapshots(), l.skipped()}) RETURN_IF_ERROR(os::MakeDirs(d));
  return Status::OK();
}

Result<PackFile> ReadPackFile(const StoreLayout& l, const std::string& name) {
  PackFile p;
  p.name = name;
  ASSIGN_OR_RETURN(Fd fd, Fd::Open(l.pack(name), O_RDONLY));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(l.pack(name), errno);
  p.size = static_cast<uint64_t>(st.st_size);
  ASSIGN_OR_RETURN(p.entries, ReadPackIndex(fd.get(), p.size, name));
  return p;
}

SkipRecord ParseSkip(const nlohmann::json& j) {
  SkipRecord r;
  r.time_ms = j.value("time_ms", int64_t{0});
  r.source = j.value("source", "");
  r.reason = j.value("reason", "");
  r.msg_id = j.value("msg_id", "");
  if (j.contains("tags") && j["tags"].is_object()) {
    for (const auto& [k, v] : j["tags"].items()) r.tags[k] = v.is_string() ? v.get<std::string>() : v.dump();
  }
  if (j.contains("args") && j["args"].is_object()) {
    for (const auto& [k, v] : j["args"].items()) r.args.push_back({k, v.is_string() ? v.get<std::string>() : v.dump()});
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
      return Status::InvalidArgument("chunker parameters: need min < avg < max, avg a power of two, max <= 16 MiB");
    }
    RETURN_IF_ERROR(MakeStoreDirs(l));
    StoreConfig c{opts.chunker, opts.pack_target_bytes, std::nullopt, (opts.clock ? *opts.clock : os::RealClock()).NowMs()};
    // The config is written last: a store exists once it is in place.
    RETURN_IF_ERROR(os::WriteFileAtomic(l.config(), ConfigToJson(c)));
  }
  return OpenExisting(root, std::move(opts));
}

Result<std::unique_ptr<Store>> Store::Open(const std::string& dir, StoreOptions opts) {
  auto root = RealPath(dir);
  // A store this user may not look into is not a missing one.
  int err = 0;
  struct stat st;
  if (!root.ok()) {
    err = root.status().IsPermissionDenied() ? EACCES : ENOENT;
  } else if (::stat(StoreLayout{*root}.config().c_str(), &st) != 0) {
    err = errno;
  }
  if (err == EACCES) return Status::Msg(Code::kPermissionDenied, "snap.store_unreadable", {{"path", dir}});
  if (err != 0) return Status::Msg(Code::kNotFound, "snap.no_store", {{"path", dir}});
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
    ASSIGN_OR_RETURN(uint64_t fs, FilesystemBytes(root));
    s->reserve_bytes_ = DefaultReserveBytes(fs);
  }
  s->opts_ = std::move(opts);
  ASSIGN_OR_RETURN(s->index_, Index::Open(s->layout_.index()));
  ASSIGN_OR_RETURN(auto lock, FileLock::Acquire(s->layout_.lock(), FileLock::Mode::kShared));
  RETURN_IF_ERROR(s->Reconcile());
  return s;
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

  ASSIGN_OR_RETURN(auto disk_ids, ListManifestIds(layout_));
  ASSIGN_OR_RETURN(auto known_ids, index_->SnapshotIds());
  for (const auto& id : disk_ids) {
    if (known_ids.erase(id)) continue;
    auto m = ReadManifest(layout_, id);
    if (m.ok()) {
      RETURN_IF_ERROR(index_->AddSnapshot(Summarize(id, *m)));
    } else {
      spdlog::warn("snapshot {} not indexed: {}", id, m.status().ToString());
    }
  }
  for (const auto& gone : known_ids) RETURN_IF_ERROR(index_->RemoveSnapshot(gone));
  return Status::OK();
}

Result<SnapshotResult> Store::Snapshot(const std::string& dir, const SnapshotOptions& opts) {
  ASSIGN_OR_RETURN(auto lock, FileLock::Acquire(layout_.lock(), FileLock::Mode::kShared));
  RETURN_IF_ERROR(Reconcile());
  SnapshotId parent_id;
  if (opts.parent == "auto") {
    auto source = RealPath(dir);
    ASSIGN_OR_RETURN(auto snaps, index_->Snapshots());
    auto run = opts.tags.find("run");
    for (const auto& s : snaps) {  // newest first
      if (!source.ok() || s.source != *source) continue;
      if (run != opts.tags.end() && s.tags.count("run") && s.tags.at("run") != run->second) continue;
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
  {
    ASSIGN_OR_RETURN(auto lock, FileLock::Acquire(layout_.lock(), FileLock::Mode::kShared));
    RETURN_IF_ERROR(Reconcile());
  }
  return index_->Snapshots();
}

Result<std::vector<SkipRecord>> Store::Skipped() {
  ASSIGN_OR_RETURN(auto names, ListDir(layout_.skipped()));
  std::vector<SkipRecord> out;
  for (const auto& n : names) {
    if (n.size() < 5 || n.compare(n.size() - 5, 5, ".json") != 0) continue;
    auto text = os::ReadFile(layout_.skipped() + "/" + n);
    if (!text.ok()) continue;
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_object()) out.push_back(ParseSkip(j));
  }
  std::sort(out.begin(), out.end(), [](const SkipRecord& a, const SkipRecord& b) { return a.time_ms > b.time_ms; });
  return out;
}

Result<SnapshotId> Store::Resolve(std::string_view ref) {
  if (ref == "latest") {
    ASSIGN_OR_RETURN(auto snaps, List());
    if (snaps.empty()) return Status::Msg(Code::kNotFound, "snap.not_found", {{"snapshot", "latest"}});
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
  if (hits.empty()) return Status::Msg(Code::kNotFound, "snap.not_found", {{"snapshot", std::string(ref)}});
  if (hits.size() > 1) {
    return Status::Msg(Code::kInvalidArgument, "snap.ambiguous",
                       {{"snapshot", std::string(ref)}, {"count", std::to_string(hits.size())}});
  }
  return hits.front();
}

Result<Manifest> Store::Load(const SnapshotId& id) { return ReadManifest(layout_, id); }

Result<RestoreResult> Store::Restore(const SnapshotId& id, const std::string& target, const RestoreOptions& opts) {
  ASSIGN_OR_RETURN(auto lock, FileLock::Acquire(layout_.lock(), FileLock::Mode::kShared));
  ASSIGN_OR_RETURN(Manifest m, ReadManifest(layout_, id));
  return RestoreSnapshot(Ctx(), id, m, target, opts);
}

Result<PruneResult> Store::Prune(const PrunePolicy& policy) {
  ASSIGN_OR_RETURN(auto lock, FileLock::Acquire(layout_.lock(), FileLock::Mode::kShared));
  RETURN_IF_ERROR(Reconcile());
  return PruneSnapshots(Ctx(), policy);
}

Result<GcResult> Store::Gc() {
  ASSIGN_OR_RETURN(auto lock, FileLock::Acquire(layout_.lock(), FileLock::Mode::kExclusive));
  RETURN_IF_ERROR(Reconcile());
  return CollectGarbage(Ctx());
}

Result<FsckReport> Store::Fsck() {
  ASSIGN_OR_RETURN(auto lock, FileLock::Acquire(layout_.lock(), FileLock::Mode::kShared));
  return CheckStore(Ctx());
}

Status Store::RebuildIndex() {
  ASSIGN_OR_RETURN(auto lock, FileLock::Acquire(layout_.lock(), FileLock::Mode::kExclusive));
  RETURN_IF_ERROR(index_->Clear());
  return Reconcile();
}

}  // namespace lathe::snap
