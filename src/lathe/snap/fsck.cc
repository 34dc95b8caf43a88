#include "lathe/snap/fsck.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <map>
#include <mutex>
#include <set>

#include "lathe/os/fd.h"
#include "lathe/os/files.h"
#include "lathe/snap/lost.h"
#include "lathe/snap/manifest_files.h"
#include "lathe/snap/pack.h"
#include "lathe/snap/parallel.h"

namespace lathe::snap {
namespace {

struct ChunkState {
  std::set<Digest> good;
  std::map<Digest, std::string> damaged;  // id -> "pack: detail"
  std::map<std::string, std::vector<Digest>> by_pack;
};

class Checker {
 public:
  explicit Checker(const StoreContext& ctx) : ctx_(ctx) {}
  Status CheckPacks();
  Status CheckManifests();
  Status CheckLost();
  void CountLeftovers();
  FsckReport Take() { return std::move(report_); }

 private:
  Status CheckPack(const std::string& name);
  void Problem(FsckProblem p) {
    std::lock_guard<std::mutex> l(mu_);
    report_.problems.push_back(std::move(p));
  }

  const StoreContext& ctx_;
  std::mutex mu_;
  ChunkState chunks_;  // guarded by mu_ while packs are checked
  FsckReport report_;  // guarded by mu_ while packs are checked
  std::set<Digest> referenced_;
};

Status Checker::CheckPack(const std::string& name) {
  std::string path = ctx_.layout.pack(name);
  auto fd = os::Fd::Open(path, O_RDONLY);
  if (!fd.ok()) {
    Problem({"", "", "", name, "cannot open: " + fd.status().message()});
    return Status::OK();
  }
  ASSIGN_OR_RETURN(os::FileStamp st, os::StatOpenFile(fd->get(), path));
  uint64_t size = st.size_bytes;
  if (Status h = CheckPackHeader(fd->get(), name); !h.ok())
    Problem({"", "", "", name, h.message()});
  auto entries = ReadPackIndex(fd->get(), size, name);
  if (!entries.ok()) {
    Problem({"", "", "", name,
             "index damaged (" + entries.status().message() + "); chunks read by scanning"});
    entries = ScanPack(fd->get(), size);
  }
  for (const auto& e : *entries) {
    auto data = ReadBlob(fd->get(), e, name);
    std::lock_guard<std::mutex> l(mu_);
    chunks_.by_pack[name].push_back(e.id);
    ++report_.chunks;
    if (data.ok()) {
      chunks_.good.insert(e.id);
    } else {
      chunks_.damaged[e.id] = name + ": " + data.status().message();
      report_.problems.push_back(
          {"", "", ToHex(e.id), name, "damaged: " + data.status().message()});
    }
  }
  return Status::OK();
}

Status Checker::CheckPacks() {
  ASSIGN_OR_RETURN(auto names, ListPackNames(ctx_.layout));
  report_.packs = names.size();
  return ParallelFor(names.size(), ctx_.threads, [&](size_t i) { return CheckPack(names[i]); });
}

Status Checker::CheckManifests() {
  ASSIGN_OR_RETURN(auto ids, ListManifestIds(ctx_.layout));
  report_.snapshots = ids.size();
  for (const auto& id : ids) {
    auto m = ReadManifest(ctx_.layout, id);
    if (!m.ok()) {
      report_.problems.push_back({id, "", "", "", m.status().message()});
      continue;
    }
    for (const auto& f : m->files) {
      for (const auto& c : f.chunks) {
        referenced_.insert(c.id);
        if (chunks_.good.count(c.id)) continue;
        auto d = chunks_.damaged.find(c.id);
        std::string what =
            d == chunks_.damaged.end() ? "chunk missing" : "chunk damaged in pack " + d->second;
        report_.problems.push_back({id, f.path, ToHex(c.id), "", what});
      }
    }
  }
  return Status::OK();
}

Status Checker::CheckLost() {
  ASSIGN_OR_RETURN(auto lost, LostSnapshots(ctx_));
  for (const auto& s : lost) {
    report_.problems.push_back({s.id, "", "", "",
                                "manifest missing: the index lists this snapshot but " +
                                    ctx_.layout.manifest(s.id) + " is gone"});
    report_.lost_snapshots.push_back(s.id);
  }
  return Status::OK();
}

void Checker::CountLeftovers() {
  for (const auto& [pack, ids] : chunks_.by_pack) {
    bool used = std::any_of(ids.begin(), ids.end(),
                            [&](const Digest& d) { return referenced_.count(d) > 0; });
    if (!used) ++report_.unreferenced_packs;
  }
  auto tmp = os::ListDir(ctx_.layout.pack_tmp());
  if (tmp.ok()) report_.temp_packs = tmp->size();
}

}  // namespace

Result<FsckReport> CheckStore(const StoreContext& ctx) {
  Checker c(ctx);
  RETURN_IF_ERROR(c.CheckPacks());
  RETURN_IF_ERROR(c.CheckManifests());
  RETURN_IF_ERROR(c.CheckLost());
  c.CountLeftovers();
  return c.Take();
}

}  // namespace lathe::snap
