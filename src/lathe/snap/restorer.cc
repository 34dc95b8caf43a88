#include "lathe/snap/restorer.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unordered_map>

#include "lathe/common/ids.h"
#include "lathe/os/fd.h"
#include "lathe/os/files.h"
#include "lathe/snap/pack_cache.h"
#include "lathe/snap/parallel.h"
#include "lathe/snap/paths.h"

namespace lathe::snap {
namespace {

constexpr uint64_t kJobBytes = 8u << 20;  // one unit of parallel work

enum class TargetState { kMissing, kEmpty, kNonEmpty };

Result<TargetState> InspectTarget(const std::string& target) {
  auto st = os::LstatFile(target);
  if (!st.ok()) {
    if (st.status().IsNotFound()) return TargetState::kMissing;
    return st.status();
  }
  if (!S_ISDIR(st->mode)) return TargetState::kNonEmpty;
  ASSIGN_OR_RETURN(auto names, os::ListDir(target));
  return names.empty() ? TargetState::kEmpty : TargetState::kNonEmpty;
}

// A run of consecutive chunks of one file.
struct Job {
  size_t file;
  size_t first, last;  // chunk index range [first, last)
  uint64_t offset;     // file offset of chunk `first`
};

struct DigestHash {
  size_t operator()(const Digest& d) const {
    size_t h;
    std::memcpy(&h, d.data(), sizeof h);
    return h;
  }
};

class Restorer {
 public:
  Restorer(const StoreContext& ctx, const SnapshotId& id, const Manifest& m,
           const RestoreOptions& opts)
      : ctx_(ctx), id_(id), m_(m), opts_(opts), packs_(ctx.layout) {}

  Status Layout(const std::string& tmp);
  Status Locate();
  Status WriteAll(const std::string& tmp);
  Status Finish(const std::string& tmp);
  RestoreResult result() { return {files_, total_, packs_.DamagedHeaders()}; }

 private:
  Status RunJob(const std::string& tmp, const Job& j);
  std::vector<Job> Jobs() const;

  const StoreContext& ctx_;
  const SnapshotId& id_;
  const Manifest& m_;
  const RestoreOptions& opts_;
  PackCache packs_;
  std::unordered_map<Digest, ChunkLocation, DigestHash> where_;  // filled by Locate, then read-only
  std::atomic<uint64_t> done_{0};
  uint64_t total_ = 0, files_ = 0;
};

// Creates every directory, empty file (at its final size) and symlink.
Status Restorer::Layout(const std::string& tmp) {
  for (const auto& e : m_.files) {  // sorted: a directory comes before its contents
    std::string p = tmp + "/" + e.path;
    if (e.type == EntryType::kDir) {
      RETURN_IF_ERROR(os::MakeDir(p, 0700));
    } else if (e.type == EntryType::kSymlink) {
      RETURN_IF_ERROR(os::MakeSymlink(e.target, p));
    } else {
      ASSIGN_OR_RETURN(os::Fd fd, os::Fd::Open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600));
      RETURN_IF_ERROR(os::Truncate(fd.get(), e.size, p));
      total_ += e.size;
      ++files_;
    }
  }
  return Status::OK();
}

// Finds every chunk and opens every pack the snapshot needs, so that the
// writing part reads through open descriptors only (see RestoreOptions::write_as).
Status Restorer::Locate() {
  for (const auto& e : m_.files) {
    for (const auto& c : e.chunks) {
      if (where_.count(c.id)) continue;
      ASSIGN_OR_RETURN(auto loc, ctx_.index.FindChunk(c.id));
      if (!loc) {
        return Status::Msg(
            Code::kIoError, "snap.file_chunk_missing",
            {{"snapshot", id_.substr(0, 12)}, {"file", e.path}, {"chunk", ToHex(c.id)}});
      }
      RETURN_IF_ERROR(packs_.Get(loc->pack).status());
      where_.emplace(c.id, std::move(*loc));
    }
  }
  return Status::OK();
}

std::vector<Job> Restorer::Jobs() const {
  std::vector<Job> jobs;
  for (size_t f = 0; f < m_.files.size(); ++f) {
    const auto& chunks = m_.files[f].chunks;
    uint64_t off = 0;
    for (size_t i = 0; i < chunks.size();) {
      Job j{f, i, i, off};
      uint64_t bytes = 0;
      while (j.last < chunks.size() && (bytes == 0 || bytes + chunks[j.last].size <= kJobBytes)) {
        bytes += chunks[j.last++].size;
      }
      jobs.push_back(j);
      off += bytes;
      i = j.last;
    }
  }
  return jobs;
}

Status Restorer::RunJob(const std::string& tmp, const Job& j) {
  const FileEntry& e = m_.files[j.file];
  std::string path = tmp + "/" + e.path;
  ASSIGN_OR_RETURN(os::Fd fd, os::Fd::Open(path, O_WRONLY | O_NOFOLLOW));
  uint64_t off = j.offset;
  for (size_t i = j.first; i < j.last; ++i) {
    const ChunkRef& c = e.chunks[i];
    const ChunkLocation& loc = where_.at(c.id);
    ASSIGN_OR_RETURN(int pfd, packs_.Get(loc.pack));
    auto data = ReadBlob(pfd, loc.entry, loc.pack);
    if (!data.ok()) {
      return Status::Msg(Code::kIoError, "snap.file_chunk_damaged",
                         {{"snapshot", id_.substr(0, 12)},
                          {"file", e.path},
                          {"chunk", ToHex(c.id)},
                          {"detail", data.status().message()}});
    }
    RETURN_IF_ERROR(os::PwriteFull(fd.get(), data->data(), data->size(), off, path));
    off += data->size();
    done_ += data->size();
  }
  return fd.Close(path);
}

Status Restorer::WriteAll(const std::string& tmp) {
  std::vector<Job> jobs = Jobs();
  auto tick = [&] {
    if (opts_.progress) opts_.progress({done_.load(), total_});
  };
  return ParallelFor(
      jobs.size(), ctx_.threads, [&](size_t i) { return RunJob(tmp, jobs[i]); }, tick);
}

// Modes and mtimes, deepest first so that setting them on a directory comes
// after everything inside it changed; then one syncfs for all the data.
Status Restorer::Finish(const std::string& tmp) {
  for (auto it = m_.files.rbegin(); it != m_.files.rend(); ++it) {
    std::string p = tmp + "/" + it->path;
    if (it->type != EntryType::kSymlink) RETURN_IF_ERROR(os::Chmod(p, it->mode));
    RETURN_IF_ERROR(os::SetMtime(p, it->mtime_ns));
  }
  RETURN_IF_ERROR(os::Chmod(tmp, 0755));
  ASSIGN_OR_RETURN(os::Fd dir, os::Fd::Open(tmp, O_RDONLY | O_DIRECTORY));
  return os::SyncFilesystem(dir.get(), tmp);
}

// Puts `tmp` at `target`. With an old target, exchanges the two atomically
// (or, where the filesystem cannot, moves the old one aside first), then
// removes the old contents.
Status SwapIntoPlace(const std::string& tmp, const std::string& target, TargetState state,
                     const std::string& parent) {
  if (state != TargetState::kNonEmpty) {
    RETURN_IF_ERROR(os::Rename(tmp, target));
  } else if (os::ExchangePaths(tmp, target).ok()) {
    RETURN_IF_ERROR(os::RemoveAll(tmp));  // now holds the old contents
  } else {
    std::string old = parent + "/." + std::filesystem::path(target).filename().string() +
                      ".lathe-old-" + NewId("");
    RETURN_IF_ERROR(os::Rename(target, old));
    if (Status st = os::Rename(tmp, target); !st.ok()) {
      (void)os::Rename(old, target);  // put the old contents back; the first error is the one
      return st;
    }
    RETURN_IF_ERROR(os::RemoveAll(old));
  }
  return os::FsyncDir(parent);
}

Status WriteTarget(Restorer& r, const std::string& target_arg, const RestoreOptions& opts) {
  std::filesystem::path tp = std::filesystem::absolute(target_arg).lexically_normal();
  if (!tp.has_filename()) tp = tp.parent_path();
  // A target that is a symlink to a directory (checkpoints on another
  // disk) is restored where it points; the link stays.
  std::error_code ec;
  if (std::filesystem::is_symlink(tp, ec) && std::filesystem::is_directory(tp, ec)) {
    tp = std::filesystem::canonical(tp, ec);
    if (ec) return Status::IoError("resolve " + target_arg + ": " + ec.message());
  }
  std::string target = tp.string(), parent = tp.parent_path().string();
  RETURN_IF_ERROR(os::MakeDirs(parent));
  ASSIGN_OR_RETURN(TargetState state, InspectTarget(target));
  if (state == TargetState::kNonEmpty && !opts.force) {
    return Status::Msg(Code::kFailedPrecondition, "snap.target_not_empty", {{"path", target}});
  }
  std::string tmp = parent + "/." + tp.filename().string() + ".lathe-restore-" + NewId("");
  RETURN_IF_ERROR(os::MakeDir(tmp, 0700));
  Status st = r.Layout(tmp);
  if (st.ok()) st = r.WriteAll(tmp);
  if (st.ok()) st = r.Finish(tmp);
  if (st.ok()) st = SwapIntoPlace(tmp, target, state, parent);
  if (!st.ok()) (void)os::RemoveAll(tmp);  // best effort: the restore's own error is what matters
  return st;
}

}  // namespace

Result<RestoreResult> RestoreSnapshot(const StoreContext& ctx, const SnapshotId& id,
                                      const Manifest& m, const std::string& target_arg,
                                      const RestoreOptions& opts) {
  RETURN_IF_ERROR(ValidateManifestPaths(m));
  Restorer r(ctx, id, m, opts);
  RETURN_IF_ERROR(r.Locate());
  auto write = [&]() -> Status { return WriteTarget(r, target_arg, opts); };
  RETURN_IF_ERROR(opts.write_as ? opts.write_as(write) : write());
  return r.result();
}

}  // namespace lathe::snap
