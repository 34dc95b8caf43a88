#include "lathe/snap/gc.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <set>

#include "lathe/os/fd.h"
#include "lathe/os/files.h"
#include "lathe/snap/compress.h"
#include "lathe/snap/lost.h"
#include "lathe/snap/manifest_files.h"
#include "lathe/snap/pack.h"

namespace lathe::snap {
namespace {

// Step 1: every chunk any manifest references. A lost snapshot (lost.h)
// references chunks no one can name any more: nothing is swept then.
Result<std::set<Digest>> MarkLive(const StoreContext& ctx) {
  ASSIGN_OR_RETURN(auto lost, LostSnapshots(ctx));
  if (!lost.empty()) {
    return Status::Msg(Code::kFailedPrecondition, "snap.gc_lost",
                       {{"snapshot", lost.front().id.substr(0, 12)},
                        {"path", ctx.layout.manifest(lost.front().id)},
                        {"count", std::to_string(lost.size())}});
  }
  std::set<Digest> live;
  ASSIGN_OR_RETURN(auto ids, ListManifestIds(ctx.layout));
  for (const auto& id : ids) {
    auto m = ReadManifest(ctx.layout, id);
    if (!m.ok()) {
      return Status::Msg(Code::kFailedPrecondition, "snap.gc_damaged",
                         {{"snapshot", id}, {"detail", m.status().message()}});
    }
    for (const auto& f : m->files) {
      for (const auto& c : f.chunks) live.insert(c.id);
    }
  }
  return live;
}

// Step 2: temporary files of killed snapshots and interrupted atomic
// writes; what they held counts as freed.
void RemoveTemporaries(const StoreContext& ctx, GcResult* r) {
  auto sweep = [&](const std::string& dir, bool all) {
    auto names = os::ListDir(dir);
    if (!names.ok()) return;
    for (const auto& name : *names) {
      if (!all && name.find(".tmp-") == std::string::npos) continue;
      std::string path = dir + "/" + name;
      auto st = os::LstatFile(path);
      if (!st.ok() || S_ISDIR(st->mode)) continue;
      if (!os::RemoveFile(path).ok()) continue;
      ++r->temp_files_removed;
      r->bytes_freed += st->size_bytes;
    }
  };
  sweep(ctx.layout.pack_tmp(), true);
  sweep(ctx.layout.snapshots(), false);
  sweep(ctx.layout.skipped(), false);
}

struct PackUse {
  std::string name;
  uint64_t size = 0;
  std::vector<PackEntry> live;
  uint64_t dead_bytes = 0;
};

Result<std::optional<PackUse>> Inspect(const StoreContext& ctx, const std::string& name,
                                       const std::set<Digest>& live) {
  std::string path = ctx.layout.pack(name);
  ASSIGN_OR_RETURN(os::Fd fd, os::Fd::Open(path, O_RDONLY));
  ASSIGN_OR_RETURN(os::FileStamp st, os::StatOpenFile(fd.get(), path));
  auto entries = ReadPackIndex(fd.get(), st.size_bytes, name);
  if (!entries.ok()) return std::optional<PackUse>();  // damaged: keep it for fsck to report
  PackUse u{name, st.size_bytes, {}, 0};
  for (const auto& e : *entries) {
    if (live.count(e.id)) {
      u.live.push_back(e);
    } else {
      u.dead_bytes += kBlobHeaderBytes + e.stored;
    }
  }
  return std::optional<PackUse>(std::move(u));
}

Status DeletePack(const StoreContext& ctx, const std::string& name) {
  RETURN_IF_ERROR(
      ctx.index.RemovePack(name));  // the index first: it must never name a missing chunk
  return os::RemoveFile(ctx.layout.pack(name));
}

// Step 4: copies the live chunks of `packs` into new packs, commits those,
// then deletes the old ones. A chunk that does not verify keeps its pack.
Status Rewrite(const StoreContext& ctx, const std::vector<PackUse>& packs, GcResult* r) {
  SpaceGuard guard(ctx.layout.root, ctx.reserve_bytes);
  PackWriter w({ctx.layout.pack_tmp(), ctx.config.pack_target_bytes, &guard});
  std::set<Digest> copied;
  std::vector<std::string> replaced;
  for (const auto& p : packs) {
    ASSIGN_OR_RETURN(os::Fd fd, os::Fd::Open(ctx.layout.pack(p.name), O_RDONLY));
    bool intact = true;
    for (const auto& e : p.live) {
      if (copied.count(e.id)) continue;
      auto plain = ReadBlob(fd.get(), e, p.name);
      if (!plain.ok()) {
        intact = false;
        continue;
      }
      std::string z;
      bool comp = MaybeCompress(*plain, &z);
      RETURN_IF_ERROR(w.Add(e.id, comp ? std::string_view(z) : std::string_view(*plain), e.raw,
                            comp ? kBlobZstd : 0));
      copied.insert(e.id);
    }
    if (intact) replaced.push_back(p.name);
  }
  ASSIGN_OR_RETURN(auto fresh, w.Finish());
  for (const auto& f : fresh) {
    RETURN_IF_ERROR(os::Rename(f.tmp_path, ctx.layout.pack(f.name)));
  }
  RETURN_IF_ERROR(os::FsyncDir(ctx.layout.packs()));
  RETURN_IF_ERROR(ctx.index.AddPacks(fresh));
  for (const auto& p : packs) {
    bool is_replaced = std::find(replaced.begin(), replaced.end(), p.name) != replaced.end();
    bool reborn = std::any_of(fresh.begin(), fresh.end(),
                              [&](const PackFile& f) { return f.name == p.name; });
    if (!is_replaced || reborn) continue;
    RETURN_IF_ERROR(DeletePack(ctx, p.name));
    r->bytes_freed += p.dead_bytes;
    ++r->packs_rewritten;
  }
  return Status::OK();
}

}  // namespace

Result<GcResult> CollectGarbage(const StoreContext& ctx) {
  GcResult r;
  ASSIGN_OR_RETURN(std::set<Digest> live, MarkLive(ctx));  // 1
  r.live_chunks = live.size();
  RemoveTemporaries(ctx, &r);  // 2
  ASSIGN_OR_RETURN(auto names, ListPackNames(ctx.layout));
  std::vector<PackUse> rewrite;
  for (const auto& name : names) {  // 3: sweep packs with nothing live
    ASSIGN_OR_RETURN(auto use, Inspect(ctx, name, live));
    if (!use) continue;
    if (use->live.empty()) {
      RETURN_IF_ERROR(DeletePack(ctx, name));
      r.bytes_freed += use->size;
      ++r.packs_deleted;
    } else if (static_cast<double>(use->dead_bytes) >
               kRepackDeadFraction * static_cast<double>(use->size)) {
      rewrite.push_back(std::move(*use));
    }
  }
  if (!rewrite.empty()) RETURN_IF_ERROR(Rewrite(ctx, rewrite, &r));  // 4
  RETURN_IF_ERROR(os::FsyncDir(ctx.layout.packs()));
  return r;
}

}  // namespace lathe::snap
