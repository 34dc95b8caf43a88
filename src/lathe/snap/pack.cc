#include "lathe/snap/pack.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstring>

#include "lathe/common/ids.h"
#include "lathe/os/fd.h"
#include "lathe/os/files.h"
#include "lathe/snap/compress.h"

namespace lathe::snap {
namespace {

constexpr std::string_view kPackMagic = "LATHEPAK";
constexpr std::string_view kBlobMagic = "LBLK";
constexpr std::string_view kIndexMagic = "LATHEIDX";
constexpr uint32_t kPackVersion = 1;
constexpr size_t kIndexRecordBytes = 56;
constexpr size_t kFooterBytes = 24;
constexpr uint32_t kMaxBlobBytes = 64u << 20;

void PutLe(char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
uint64_t GetLe(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | static_cast<uint8_t>(p[i]);
  return v;
}

std::string BlobHeader(const Digest& id, uint32_t stored, uint32_t raw, uint8_t flags) {
  std::string h(kBlobHeaderBytes, '\0');
  std::memcpy(h.data(), kBlobMagic.data(), 4);
  h[4] = static_cast<char>(flags);
  PutLe(&h[8], stored, 4);
  PutLe(&h[12], raw, 4);
  std::memcpy(&h[16], id.data(), id.size());
  return h;
}

bool ParseBlobHeader(const std::string& h, PackEntry* e) {
  if (h.size() != kBlobHeaderBytes || h.compare(0, 4, kBlobMagic) != 0) return false;
  e->flags = static_cast<uint8_t>(h[4]);
  e->stored = static_cast<uint32_t>(GetLe(&h[8], 4));
  e->raw = static_cast<uint32_t>(GetLe(&h[12], 4));
  std::memcpy(e->id.data(), &h[16], e->id.size());
  return e->stored <= kMaxBlobBytes && e->raw <= kMaxBlobBytes;
}

std::string IndexBytes(const std::vector<PackEntry>& entries) {
  std::string out(entries.size() * kIndexRecordBytes, '\0');
  for (size_t i = 0; i < entries.size(); ++i) {
    char* p = &out[i * kIndexRecordBytes];
    const PackEntry& e = entries[i];
    std::memcpy(p, e.id.data(), e.id.size());
    PutLe(p + 32, e.offset, 8);
    PutLe(p + 40, e.stored, 4);
    PutLe(p + 44, e.raw, 4);
    p[48] = static_cast<char>(e.flags);
  }
  return out;
}

}  // namespace

PackWriter::PackWriter(Options opts)
    : opts_(std::move(opts)), out_(BackgroundWriter::Options{.direct = opts_.direct}) {}

PackWriter::~PackWriter() {
  if (!taken_) Abort();
}

Status PackWriter::OpenPack() {
  cur_ = PackFile{};
  cur_.tmp_path = opts_.tmp_dir + "/" + NewId("p") + ".pack.tmp";
  RETURN_IF_ERROR(out_.Open(cur_.tmp_path, 0444));
  std::string h(kPackHeaderBytes, '\0');
  std::memcpy(h.data(), kPackMagic.data(), kPackMagic.size());
  PutLe(&h[8], kPackVersion, 4);
  if (opts_.guard) RETURN_IF_ERROR(opts_.guard->Claim(h.size(), out_.unwritten_bytes()));
  RETURN_IF_ERROR(out_.Append(h.data(), h.size()));
  cur_.size = h.size();
  return Status::OK();
}

Status PackWriter::Add(const Digest& id, std::string_view stored, uint32_t raw_size,
                       uint8_t flags) {
  if (!out_.file_open()) RETURN_IF_ERROR(OpenPack());
  std::string h = BlobHeader(id, static_cast<uint32_t>(stored.size()), raw_size, flags);
  if (opts_.guard)
    RETURN_IF_ERROR(opts_.guard->Claim(h.size() + stored.size(), out_.unwritten_bytes()));
  RETURN_IF_ERROR(out_.Append(h.data(), h.size()));
  RETURN_IF_ERROR(out_.Append(stored.data(), stored.size()));
  size_t want = h.size() + stored.size();
  cur_.entries.push_back({id, cur_.size, static_cast<uint32_t>(stored.size()), raw_size, flags});
  cur_.size += want;
  bytes_written_ += want;
  if (cur_.size >= opts_.target_bytes) return ClosePack();
  return Status::OK();
}

// Appends the index and footer and hands the pack to the writer's thread,
// which writes what is left, fsyncs and closes it while the next pack fills.
Status PackWriter::ClosePack() {
  std::string index = IndexBytes(cur_.entries);
  std::string footer(kFooterBytes, '\0');
  PutLe(&footer[0], cur_.size, 8);
  PutLe(&footer[8], cur_.entries.size(), 8);
  std::memcpy(&footer[16], kIndexMagic.data(), kIndexMagic.size());
  std::string tail = index + footer;
  if (opts_.guard) RETURN_IF_ERROR(opts_.guard->Claim(tail.size(), out_.unwritten_bytes()));
  RETURN_IF_ERROR(out_.Append(tail.data(), tail.size()));
  RETURN_IF_ERROR(out_.CloseAsync());
  cur_.size += tail.size();
  cur_.name = ToHex(Sha256(index)).substr(0, 32);
  done_.push_back(std::move(cur_));
  cur_ = PackFile{};
  return Status::OK();
}

Result<std::vector<PackFile>> PackWriter::Finish() {
  if (out_.file_open()) RETURN_IF_ERROR(ClosePack());
  RETURN_IF_ERROR(out_.Wait());
  taken_ = true;
  return done_;
}

void PackWriter::Abort() {
  if (out_.file_open()) (void)out_.CloseAsync();  // aborting: the pack is thrown away
  // Best effort: aborting: the pack is thrown away whatever its write did.
  (void)out_.Wait();
  // Aborting: a temporary pack left behind is swept by the next gc.
  if (!cur_.tmp_path.empty()) (void)os::RemoveFile(cur_.tmp_path);
  // Best effort: clean-up: what stays is removed again at the next start or sweep.
  for (const auto& p : done_) (void)os::RemoveFile(p.tmp_path);
  cur_ = PackFile{};
  done_.clear();
}

Status CheckPackHeader(int fd, const std::string& name) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("header damaged: " + why);
  };
  std::string h(kPackHeaderBytes, '\0');
  Status st = os::PreadFull(fd, h.data(), h.size(), 0, name);
  if (!st.ok()) return bad(st.message());
  if (h.compare(0, kPackMagic.size(), kPackMagic) != 0)
    return bad("the magic is not " + std::string(kPackMagic));
  uint64_t version = GetLe(&h[8], 4), reserved = GetLe(&h[12], 4);
  if (version != kPackVersion) {
    return bad("version " + std::to_string(version) + ", this lathe writes and reads " +
               std::to_string(kPackVersion));
  }
  if (reserved != 0) return bad("the reserved field is " + std::to_string(reserved) + ", not 0");
  return Status::OK();
}

Result<std::vector<PackEntry>> ReadPackIndex(int fd, uint64_t size, const std::string& name) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("pack " + name + ": " + why);
  };
  if (size < kPackHeaderBytes + kFooterBytes) return bad("too short");
  std::string footer(kFooterBytes, '\0');
  RETURN_IF_ERROR(os::PreadFull(fd, footer.data(), footer.size(), size - kFooterBytes, name));
  if (footer.compare(16, 8, kIndexMagic) != 0) return bad("no index footer");
  uint64_t off = GetLe(&footer[0], 8), count = GetLe(&footer[8], 8);
  if (off < kPackHeaderBytes || count > size / kIndexRecordBytes ||
      off + count * kIndexRecordBytes + kFooterBytes != size) {
    return bad("index does not fit the file");
  }
  std::string index(count * kIndexRecordBytes, '\0');
  RETURN_IF_ERROR(os::PreadFull(fd, index.data(), index.size(), off, name));
  std::vector<PackEntry> out(count);
  for (size_t i = 0; i < count; ++i) {
    const char* p = &index[i * kIndexRecordBytes];
    PackEntry& e = out[i];
    std::memcpy(e.id.data(), p, e.id.size());
    e.offset = GetLe(p + 32, 8);
    e.stored = static_cast<uint32_t>(GetLe(p + 40, 4));
    e.raw = static_cast<uint32_t>(GetLe(p + 44, 4));
    e.flags = static_cast<uint8_t>(p[48]);
    if (e.offset + kBlobHeaderBytes + e.stored > off) return bad("index points past the data");
  }
  return out;
}

std::vector<PackEntry> ScanPack(int fd, uint64_t size) {
  std::vector<PackEntry> out;
  uint64_t off = kPackHeaderBytes;
  std::string h(kBlobHeaderBytes, '\0');
  while (off + kBlobHeaderBytes <= size &&
         os::PreadFull(fd, h.data(), h.size(), off, "pack").ok()) {
    PackEntry e;
    if (!ParseBlobHeader(h, &e) || off + kBlobHeaderBytes + e.stored > size) break;
    e.offset = off;
    out.push_back(e);
    off += kBlobHeaderBytes + e.stored;
  }
  return out;
}

Result<std::string> ReadBlob(int fd, const PackEntry& e, const std::string& pack_name) {
  auto damaged = [&](const std::string& why) {
    return Status::Msg(Code::kIoError, "snap.chunk_damaged",
                       {{"chunk", ToHex(e.id)}, {"pack", pack_name}, {"detail", why}});
  };
  std::string buf(kBlobHeaderBytes + e.stored, '\0');
  Status st = os::PreadFull(fd, buf.data(), buf.size(), e.offset, pack_name);
  if (!st.ok()) return damaged(st.message());
  PackEntry h;
  if (!ParseBlobHeader(buf.substr(0, kBlobHeaderBytes), &h) || h.id != e.id ||
      h.stored != e.stored || h.raw != e.raw) {
    return damaged("blob header does not match the index");
  }
  std::string_view stored = std::string_view(buf).substr(kBlobHeaderBytes);
  std::string plain;
  if (e.flags & kBlobZstd) {
    auto r = Decompress(stored, e.raw);
    if (!r.ok()) return damaged(r.status().message());
    plain = std::move(r).value();
  } else {
    plain.assign(stored);
  }
  if (plain.size() != e.raw || Sha256(plain) != e.id)
    return damaged("content does not match its SHA-256");
  return plain;
}

}  // namespace lathe::snap
