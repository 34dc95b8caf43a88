#include "lathe/snap/manifest_files.h"

#include <unistd.h>

#include <cerrno>

#include "lathe/os/files.h"
#include "lathe/snap/compress.h"

namespace lathe::snap {
namespace {
constexpr std::string_view kExt = ".json.zst";
}

bool IsSnapshotId(std::string_view s) { return s.size() == 64 && IsHexPrefix(s); }

Result<SnapshotId> WriteManifest(const StoreLayout& l, const Manifest& m, SpaceGuard* guard) {
  std::string json = ManifestToJson(m);
  SnapshotId id = ManifestId(json);
  std::string z = Compress(json);
  if (guard) RETURN_IF_ERROR(guard->Claim(z.size()));
  RETURN_IF_ERROR(os::WriteFileAtomic(l.manifest(id), z, 0444));
  return id;
}

Result<Manifest> ReadManifest(const StoreLayout& l, const SnapshotId& id) {
  auto z = os::ReadFile(l.manifest(id));
  if (!z.ok()) {
    if (z.status().IsNotFound())
      return Status::Msg(Code::kNotFound, "snap.not_found", {{"snapshot", id}});
    return z.status();
  }
  auto damaged = [&](const std::string& why) {
    return Status::Msg(Code::kIoError, "snap.manifest_damaged",
                       {{"snapshot", id}, {"detail", why}});
  };
  auto json = Decompress(*z, 0);
  if (!json.ok()) return damaged(json.status().message());
  if (ManifestId(*json) != id) return damaged("content does not match its SHA-256");
  auto m = ManifestFromJson(*json);
  if (!m.ok()) return damaged(m.status().message());
  return m;
}

Result<std::vector<SnapshotId>> ListManifestIds(const StoreLayout& l) {
  ASSIGN_OR_RETURN(auto names, os::ListDir(l.snapshots()));
  std::vector<SnapshotId> out;
  for (const auto& n : names) {
    if (n.size() == 64 + kExt.size() && n.compare(64, kExt.size(), kExt) == 0 &&
        IsSnapshotId(n.substr(0, 64))) {
      out.push_back(n.substr(0, 64));
    }
  }
  return out;
}

Status RemoveManifest(const StoreLayout& l, const SnapshotId& id) {
  return os::RemoveFile(l.manifest(id));
}

Status MarkPruned(const StoreLayout& l, const SnapshotId& id) {
  Status st = os::Rename(l.manifest(id), l.pruned(id));
  return st.IsNotFound() ? Status::OK() : st;
}

Status UnlinkPruned(const StoreLayout& l, const SnapshotId& id) {
  return os::RemoveFile(l.pruned(id));
}

Result<std::vector<SnapshotId>> ListPrunedIds(const StoreLayout& l) {
  constexpr std::string_view kPruned = ".pruned";
  ASSIGN_OR_RETURN(auto names, os::ListDir(l.snapshots()));
  std::vector<SnapshotId> out;
  for (const auto& n : names) {
    if (n.size() == 64 + kPruned.size() && n.compare(64, kPruned.size(), kPruned) == 0 &&
        IsSnapshotId(n.substr(0, 64))) {
      out.push_back(n.substr(0, 64));
    }
  }
  return out;
}

}  // namespace lathe::snap
