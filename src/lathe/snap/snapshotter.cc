#include "lathe/snap/snapshotter.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "lathe/common/ids.h"
#include "lathe/os/fd.h"
#include "lathe/os/files.h"
#include "lathe/snap/checkpoints.h"
#include "lathe/snap/chunker.h"
#include "lathe/snap/compress.h"
#include "lathe/snap/manifest_files.h"
#include "lathe/snap/pack.h"
#include "lathe/snap/parallel.h"

namespace lathe::snap {
namespace {

constexpr size_t kReadBytes = 8u << 20;
constexpr uint64_t kProgressEveryBytes = 8u << 20;
constexpr size_t kInlineHashBytes = 1u << 20;  // a smaller file is hashed without a thread

struct DigestHash {
  size_t operator()(const Digest& d) const {
    size_t h;
    std::memcpy(&h, d.data(), sizeof h);  // already uniformly distributed
    return h;
  }
};

class Snapshotter {
 public:
  Snapshotter(const StoreContext& ctx, const SnapshotOptions& opts, const Manifest* parent,
              SpaceGuard* guard)
      : ctx_(ctx),
        opts_(opts),
        parent_(parent),
        guard_(guard),
        chunker_(ctx.config.chunker),
        writer_({ctx.layout.pack_tmp(), ctx.config.pack_target_bytes, guard}),
        buf_{std::unique_ptr<uint8_t[]>(new uint8_t[kReadBytes + ctx.config.chunker.max_bytes]),
             std::unique_ptr<uint8_t[]>(new uint8_t[kReadBytes + ctx.config.chunker.max_bytes])} {}

  Status Walk(const std::string& root, const std::string& rel, std::vector<FileEntry>* out);
  Status CaptureAll(const std::string& root, std::vector<FileEntry>* files);
  Result<SnapshotId> Commit(Manifest* m);
  // Removes the temporary packs now (so a skip record finds the space).
  void Abort() { writer_.Abort(); }
  // The store's directory: left out when it lies inside the source.
  void SetStoreStat(const os::FileStamp& st) { store_st_ = st; }

 private:
  // Returns false when the file vanished (deleted while we walked).
  Result<bool> Capture(const std::string& root, FileEntry* e);
  bool ReuseParent(FileEntry* e);
  struct Cut {
    const uint8_t* data;
    size_t size;
    Digest id;
  };
  Status ChunkFile(int fd, const FormatCheck& fc, FileEntry* e);
  std::future<Status> HashCuts(std::vector<Cut>* cuts, bool inline_small);
  Status StoreCuts(const std::vector<Cut>& cuts, FileEntry* e);
  Status AddChunk(const Cut& c, FileEntry* e);
  void Report(bool force);

  const StoreContext& ctx_;
  const SnapshotOptions& opts_;
  const Manifest* parent_;
  SpaceGuard* guard_;
  GearChunker chunker_;
  PackWriter writer_;
  std::unique_ptr<uint8_t[]> buf_[2];
  std::unordered_set<Digest, DigestHash> known_;  // chunks already in the store or this snapshot
  ManifestStats stats_;
  os::FileStamp store_st_;
  uint64_t done_bytes_ = 0, total_bytes_ = 0, reported_ = 0;
};

Status Snapshotter::Walk(const std::string& root, const std::string& rel,
                         std::vector<FileEntry>* out) {
  std::string dir = rel.empty() ? root : root + "/" + rel;
  auto names = os::ListDir(dir);
  if (!names.ok())
    return names.status().IsNotFound() && !rel.empty() ? Status::OK() : names.status();
  for (const auto& name : *names) {
    std::string r = rel.empty() ? name : rel + "/" + name;
    auto found = os::LstatFile(root + "/" + r);
    if (!found.ok()) {
      // Deleted since the listing: old checkpoints come and go.
      if (found.status().IsNotFound()) continue;
      return found.status();
    }
    const os::FileStamp& st = *found;
    FileEntry e;
    e.path = r;
    e.mode = st.mode & 07777;
    e.mtime_ns = st.mtime_ns;
    if (S_ISDIR(st.mode)) {
      if (st.device == store_st_.device && st.inode == store_st_.inode)
        continue;  // the store itself
      e.type = EntryType::kDir;
      out->push_back(e);
      RETURN_IF_ERROR(Walk(root, r, out));
    } else if (S_ISREG(st.mode)) {
      e.size = st.size_bytes;
      e.inode = st.inode;
      total_bytes_ += e.size;
      out->push_back(e);
    } else if (S_ISLNK(st.mode)) {
      auto target = os::ReadLink(root + "/" + r);
      if (!target.ok()) continue;
      e.type = EntryType::kSymlink;
      e.target = std::move(*target);
      out->push_back(e);
    }  // sockets, fifos and devices are not checkpoint data
  }
  return Status::OK();
}

bool Snapshotter::ReuseParent(FileEntry* e) {
  const FileEntry* p = parent_ ? parent_->Find(e->path) : nullptr;
  if (p == nullptr || p->type != EntryType::kFile || p->size != e->size ||
      p->mtime_ns != e->mtime_ns || p->inode != e->inode) {
    return false;
  }
  e->chunks = p->chunks;
  e->format = p->format;
  e->check = p->check;
  e->reason = p->reason;
  return true;
}

Result<bool> Snapshotter::Capture(const std::string& root, FileEntry* e) {
  if (ReuseParent(e)) {
    done_bytes_ += e->size;
    return true;
  }
  std::string path = root + "/" + e->path;
  Result<os::Fd> fd = Status::Internal("not opened");
  // Best effort: the body only looks: what it finds is in the variables it sets.
  (void)os::WithAccess(opts_.read_as, [&] {
    fd = os::Fd::Open(path, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NOATIME);
    if (!fd.ok() && fd.status().IsPermissionDenied())
      fd = os::Fd::Open(path, O_RDONLY | O_NOFOLLOW | O_NOCTTY);
    return Status::OK();
  });
  if (!fd.ok()) {
    if (fd.status().IsNotFound()) return false;
    return fd.status();
  }
  ASSIGN_OR_RETURN(os::FileStamp before, os::StatOpenFile(fd->get(), path));
  if (!S_ISREG(before.mode)) return false;
  e->size = before.size_bytes;
  e->mtime_ns = before.mtime_ns;
  e->inode = before.inode;
  ::posix_fadvise(fd->get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  FormatCheck fc = CheckFormat(e->path, FdSource(fd->get(), e->size, path));
  e->format = fc.format;
  e->check = fc.verdict;
  e->reason = fc.reason;
  RETURN_IF_ERROR(ChunkFile(fd->get(), fc, e));
  ++stats_.files_read;
  ASSIGN_OR_RETURN(os::FileStamp after, os::StatOpenFile(fd->get(), path));
  uint64_t read = 0;
  for (const auto& c : e->chunks) read += c.size;
  if (read != e->size || after.size_bytes != before.size_bytes || after.mtime_ns != e->mtime_ns) {
    e->size = read;
    e->check = Verdict::kIncomplete;
    e->reason = "changed while it was being captured";
  }
  return true;
}

// Reads the file front to back through two buffers. While the chunks of one
// buffer are hashed on other threads (SHA-256 is most of the CPU time), this
// thread reads and cuts the next one, then stores the hashed chunks in order.
// Cuts fall at a tensor start when one is in reach, otherwise where the
// chunker says.
Status Snapshotter::ChunkFile(int fd, const FormatCheck& fc, FileEntry* e) {
  const size_t max = chunker_.params().max_bytes, cap = kReadBytes + max;
  const auto& hints = fc.tensor_offsets;
  std::vector<Cut> cuts[2];
  std::future<Status> hashing[2];  // after `cuts`: an early return waits for them first
  int cur = 0;
  size_t len = 0, hint = 0;  // bytes in buf_[cur], the first of which may be carried over
  uint64_t base = 0;         // file offset of buf_[cur][0]
  bool eof = false;
  while (true) {
    uint8_t* buf = buf_[cur].get();
    if (!eof) {
      ASSIGN_OR_RETURN(size_t n, os::ReadUpTo(fd, buf + len, cap - len, e->path));
      eof = n < cap - len;
      len += n;
    }
    size_t pos = 0;
    cuts[cur].clear();
    while (pos < len && (eof || len - pos >= max)) {
      uint64_t at = base + pos;
      while (hint < hints.size() && hints[hint] <= at) ++hint;
      size_t limit = len - pos;
      bool final = eof;
      if (hint < hints.size() && hints[hint] - at <= limit) {
        limit = static_cast<size_t>(hints[hint] - at);
        final = true;
      }
      size_t cut = chunker_.NextCut(buf + pos, limit, final);
      if (cut == 0) return Status::Internal("chunker asked for more data with a full buffer");
      cuts[cur].push_back({buf + pos, cut, Digest{}});
      pos += cut;
    }
    hashing[cur] = HashCuts(&cuts[cur], eof && base == 0);
    if (hashing[1 - cur].valid()) {  // the previous buffer, hashed meanwhile
      RETURN_IF_ERROR(hashing[1 - cur].get());
      RETURN_IF_ERROR(StoreCuts(cuts[1 - cur], e));
    }
    if (eof && pos == len) {
      RETURN_IF_ERROR(hashing[cur].get());
      return StoreCuts(cuts[cur], e);
    }
    // The other buffer's chunks are stored: carry the uncut tail over to it.
    std::memcpy(buf_[1 - cur].get(), buf + pos, len - pos);
    base += pos;
    len -= pos;
    cur = 1 - cur;
  }
}

// Hashes on another thread (or, with more than two threads, several), unless
// `inline_small` and there is too little to be worth a thread.
std::future<Status> Snapshotter::HashCuts(std::vector<Cut>* cuts, bool inline_small) {
  auto hash_all = [cuts, threads = ctx_.threads]() -> Status {
    auto hash = [cuts](size_t i) {
      Cut& c = (*cuts)[i];
      c.id = Sha256(c.data, c.size);
      return Status::OK();
    };
    if (threads <= 2 || cuts->size() < 2) {
      for (size_t i = 0; i < cuts->size(); ++i) (void)hash(i);  // cannot fail
      return Status::OK();
    }
    return ParallelFor(cuts->size(), threads - 1, hash);
  };
  size_t bytes = 0;
  for (const Cut& c : *cuts) bytes += c.size;
  if (inline_small && bytes < kInlineHashBytes) {
    std::promise<Status> done;
    done.set_value(hash_all());
    return done.get_future();
  }
  return std::async(std::launch::async, hash_all);
}

Status Snapshotter::StoreCuts(const std::vector<Cut>& cuts, FileEntry* e) {
  for (const Cut& c : cuts) RETURN_IF_ERROR(AddChunk(c, e));
  return Status::OK();
}

Status Snapshotter::AddChunk(const Cut& c, FileEntry* e) {
  const Digest& d = c.id;
  const uint8_t* p = c.data;
  size_t n = c.size;
  e->chunks.push_back({d, static_cast<uint32_t>(n)});
  done_bytes_ += n;
  Report(false);
  if (known_.count(d)) return Status::OK();
  ASSIGN_OR_RETURN(bool have, ctx_.index.HasChunk(d));
  known_.insert(d);
  if (have) return Status::OK();
  std::string_view raw(reinterpret_cast<const char*>(p), n);
  std::string z;
  bool compressed = MaybeCompress(raw, &z);
  std::string_view stored = compressed ? std::string_view(z) : raw;
  RETURN_IF_ERROR(writer_.Add(d, stored, static_cast<uint32_t>(n), compressed ? kBlobZstd : 0));
  ++stats_.new_chunks;
  stats_.new_bytes += stored.size();
  return Status::OK();
}

void Snapshotter::Report(bool force) {
  if (!opts_.progress || (!force && done_bytes_ - reported_ < kProgressEveryBytes)) return;
  reported_ = done_bytes_;
  opts_.progress({done_bytes_, total_bytes_});
}

Status Snapshotter::CaptureAll(const std::string& root, std::vector<FileEntry>* files) {
  std::vector<FileEntry> kept;
  for (auto& e : *files) {
    if (e.type == EntryType::kFile) {
      ASSIGN_OR_RETURN(bool present, Capture(root, &e));
      Report(true);
      if (!present) continue;
      ++stats_.files;
      stats_.bytes += e.size;
    }
    kept.push_back(std::move(e));
  }
  *files = std::move(kept);
  return Status::OK();
}

Result<SnapshotId> Snapshotter::Commit(Manifest* m) {
  ASSIGN_OR_RETURN(auto packs, writer_.Finish());
  for (const auto& p : packs) {
    RETURN_IF_ERROR(os::Rename(p.tmp_path, ctx_.layout.pack(p.name)));
  }
  if (!packs.empty()) RETURN_IF_ERROR(os::FsyncDir(ctx_.layout.packs()));
  m->stats = stats_;
  ASSIGN_OR_RETURN(SnapshotId id, WriteManifest(ctx_.layout, *m, guard_));
  // Committed. The index is a cache: Store::Open reconciles it if this fails.
  Status st = ctx_.index.AddPacks(packs);
  if (st.ok()) st = ctx_.index.AddSnapshot(Summarize(id, *m));
  if (!st.ok()) spdlog::warn("snapshot {} committed, index not updated: {}", id, st.ToString());
  return id;
}

Result<std::string> RealDir(const std::string& dir) {
  char buf[PATH_MAX];
  if (::realpath(dir.c_str(), buf) == nullptr) {
    if (errno == ENOENT)
      return Status::Msg(Code::kNotFound, "snap.source_missing", {{"path", dir}});
    return ErrnoStatus(dir, errno);
  }
  auto st = os::StatFile(buf);
  if (!st.ok() || !S_ISDIR(st->mode)) {
    return Status::Msg(Code::kInvalidArgument, "snap.source_not_dir", {{"path", dir}});
  }
  return std::string(buf);
}

// Space errors that carry no catalog message (ENOSPC from a write) get one.
Status SpaceStatus(const Status& st) {
  if (st.code() != Code::kResourceExhausted || !st.msg_id().empty()) return st;
  return Status::Msg(Code::kResourceExhausted, "snap.disk_full", {{"detail", st.message()}});
}

}  // namespace

void RecordSkip(const StoreContext& ctx, const std::string& source, const SnapshotOptions& opts,
                const Status& why) {
  nlohmann::json args = nlohmann::json::object();
  for (const auto& a : why.args()) args[a.key] = a.value;
  nlohmann::json j = {{"time_ms", ctx.clock.NowMs()}, {"source", source},       {"tags", opts.tags},
                      {"reason", why.message()},      {"msg_id", why.msg_id()}, {"args", args}};
  std::string path =
      ctx.layout.skipped() + "/" + std::to_string(ctx.clock.NowMs()) + "-" + NewId("") + ".json";
  Status st = os::WriteFileAtomic(path, j.dump() + "\n");
  if (!st.ok()) spdlog::warn("cannot record the skipped snapshot of {}: {}", source, st.ToString());
}

Result<SnapshotResult> TakeSnapshot(const StoreContext& ctx, const std::string& dir,
                                    const SnapshotOptions& opts, const Manifest* parent,
                                    const SnapshotId& parent_id) {
  Result<std::string> real = Status::Internal("not resolved");
  RETURN_IF_ERROR(os::WithAccess(opts.read_as, [&] {
    real = RealDir(dir);
    return Status::OK();
  }));
  ASSIGN_OR_RETURN(std::string root, std::move(real));
  SpaceGuard guard(ctx.layout.root, opts.reserve_bytes.value_or(ctx.reserve_bytes));
  Snapshotter s(ctx, opts, parent, &guard);
  if (auto store_st = os::StatFile(ctx.layout.root); store_st.ok()) s.SetStoreStat(*store_st);
  Manifest m;
  m.time_ms = ctx.clock.NowMs();
  m.source = root;
  m.parent = parent_id;
  m.tags = opts.tags;
  int64_t start = ctx.clock.MonotonicMs();
  // The walk only reads the source: all of it with the reader's identity.
  Status st = os::WithAccess(opts.read_as, [&] { return s.Walk(root, "", &m.files); });
  if (st.ok()) {
    std::sort(m.files.begin(), m.files.end(),
              [](const FileEntry& a, const FileEntry& b) { return a.path < b.path; });
    st = s.CaptureAll(root, &m.files);
  }
  if (st.ok()) m.checkpoints = FindCheckpoints(m.files);
  int64_t captured = ctx.clock.MonotonicMs();
  Result<SnapshotId> id = st.ok() ? s.Commit(&m) : Result<SnapshotId>(st);
  if (!id.ok()) {
    s.Abort();
    Status why = SpaceStatus(id.status());
    if (why.code() == Code::kResourceExhausted) RecordSkip(ctx, root, opts, why);
    return why;
  }
  return SnapshotResult{*id, std::move(m), captured - start, ctx.clock.MonotonicMs() - captured};
}

}  // namespace lathe::snap
