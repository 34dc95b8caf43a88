// Zip completeness (PyTorch's torch.save format and .npz). A zip is written
// front to back and its directory comes last, so a writer killed anywhere
// leaves no valid end record, or one that points outside the file.
#include <algorithm>
#include <string>

#include "lathe/snap/format_internal.h"

namespace lathe::snap::internal {
namespace {

constexpr size_t kEocdSize = 22;
constexpr size_t kMaxComment = 65535;
constexpr size_t kLocatorSize = 20;
constexpr size_t kZip64EocdSize = 56;
constexpr size_t kCdHeaderSize = 46;
constexpr size_t kLocalHeaderSize = 30;
constexpr uint64_t kMaxCdBytes = 256ull << 20;
constexpr std::string_view kEocdSig = "PK\x05\x06";
constexpr std::string_view kLocatorSig = "PK\x06\x07";
constexpr std::string_view kZip64EocdSig = "PK\x06\x06";
constexpr std::string_view kCdSig = "PK\x01\x02";
constexpr std::string_view kLocalSig = "PK\x03\x04";

struct Directory {
  uint64_t entries = 0;
  uint64_t cd_size = 0;
  uint64_t cd_offset = 0;
  uint64_t end = 0;  // where the central directory must end (the next record)
};

// Finds the end-of-central-directory record: the last "PK\5\6" whose comment
// length reaches exactly to the end of the file.
bool FindEocd(const ByteSource& src, uint64_t* pos, std::string* rec) {
  uint64_t size = src.size();
  size_t span = static_cast<size_t>(std::min<uint64_t>(size, kEocdSize + kMaxComment));
  std::string tail;
  if (!src.ReadAt(size - span, span, &tail).ok()) return false;
  for (size_t i = span - kEocdSize + 1; i-- > 0;) {
    if (tail.compare(i, 4, kEocdSig) != 0) continue;
    uint64_t comment = LoadLe(&tail[i + 20], 2);
    if (i + kEocdSize + comment == span) {
      *pos = size - span + i;
      *rec = tail.substr(i, kEocdSize);
      return true;
    }
  }
  return false;
}

// Reads the zip64 end record through its locator, just before the EOCD.
bool ReadZip64(const ByteSource& src, uint64_t eocd_pos, Directory* d, std::string* why) {
  std::string loc, rec;
  if (eocd_pos < kLocatorSize || !src.ReadAt(eocd_pos - kLocatorSize, kLocatorSize, &loc).ok() ||
      loc.compare(0, 4, kLocatorSig) != 0) {
    *why = "zip64 locator missing";
    return false;
  }
  uint64_t off = LoadLe(&loc[8], 8);
  if (off + kZip64EocdSize > eocd_pos - kLocatorSize ||
      !src.ReadAt(off, kZip64EocdSize, &rec).ok() || rec.compare(0, 4, kZip64EocdSig) != 0) {
    *why = "zip64 end record missing";
    return false;
  }
  d->entries = LoadLe(&rec[32], 8);
  d->cd_size = LoadLe(&rec[40], 8);
  d->cd_offset = LoadLe(&rec[48], 8);
  d->end = off;
  return true;
}

bool ReadDirectory(const ByteSource& src, Directory* d, std::string* why) {
  uint64_t pos = 0;
  std::string eocd;
  if (src.size() < kEocdSize || !FindEocd(src, &pos, &eocd)) {
    *why = "no end-of-central-directory record (truncated?)";
    return false;
  }
  d->entries = LoadLe(&eocd[10], 2);
  d->cd_size = LoadLe(&eocd[12], 4);
  d->cd_offset = LoadLe(&eocd[16], 4);
  d->end = pos;
  // PyTorch's writer adds the zip64 records even when no field needs them,
  // so a locator right before the end record means zip64 too.
  bool zip64 = d->entries == 0xFFFF || d->cd_size == 0xFFFFFFFF || d->cd_offset == 0xFFFFFFFF;
  std::string loc;
  if (!zip64 && pos >= kLocatorSize && src.ReadAt(pos - kLocatorSize, 4, &loc).ok() &&
      loc.compare(0, 4, kLocatorSig) == 0) {
    zip64 = true;
  }
  if (zip64 && !ReadZip64(src, pos, d, why)) return false;
  if (d->cd_offset > d->end || d->cd_offset + d->cd_size != d->end) {
    *why = "central directory does not end where the end record says";
    return false;
  }
  return true;
}

struct Entry {
  uint64_t csize = 0;
  uint64_t local_offset = 0;
};

// Replaces 0xFFFFFFFF fields with their values from the zip64 extra field.
void ApplyZip64Extra(std::string_view extra, uint64_t usize, Entry* e) {
  for (size_t i = 0; i + 4 <= extra.size();) {
    uint64_t id = LoadLe(&extra[i], 2), len = LoadLe(&extra[i + 2], 2);
    if (id == 1) {
      size_t p = i + 4, end = std::min(extra.size(), i + 4 + len);
      if (usize == 0xFFFFFFFF && p + 8 <= end) p += 8;
      if (e->csize == 0xFFFFFFFF && p + 8 <= end) e->csize = LoadLe(&extra[p], 8), p += 8;
      if (e->local_offset == 0xFFFFFFFF && p + 8 <= end) e->local_offset = LoadLe(&extra[p], 8);
      return;
    }
    i += 4 + len;
  }
}

// Checks one entry's local header and data extent; records where its data starts.
bool CheckEntry(const ByteSource& src, const Directory& d, const Entry& e, FormatCheck* out,
                std::string* why) {
  std::string lh;
  if (e.local_offset + kLocalHeaderSize > d.cd_offset ||
      !src.ReadAt(e.local_offset, kLocalHeaderSize, &lh).ok() || lh.compare(0, 4, kLocalSig) != 0) {
    *why = "a local file header is missing";
    return false;
  }
  uint64_t data = e.local_offset + kLocalHeaderSize + LoadLe(&lh[26], 2) + LoadLe(&lh[28], 2);
  if (data + e.csize > d.cd_offset) {
    *why = "an entry's data runs into the central directory";
    return false;
  }
  out->tensor_offsets.push_back(data);
  return true;
}

bool WalkDirectory(const ByteSource& src, const Directory& d, FormatCheck* out, std::string* why) {
  std::string cd;
  if (!src.ReadAt(d.cd_offset, d.cd_size, &cd).ok()) {
    *why = "cannot read the central directory";
    return false;
  }
  uint64_t count = 0;
  for (size_t i = 0; i < cd.size(); ++count) {
    if (i + kCdHeaderSize > cd.size() || cd.compare(i, 4, kCdSig) != 0) {
      *why = "damaged central directory";
      return false;
    }
    Entry e{LoadLe(&cd[i + 20], 4), LoadLe(&cd[i + 42], 4)};
    uint64_t usize = LoadLe(&cd[i + 24], 4);
    size_t name = LoadLe(&cd[i + 28], 2), extra = LoadLe(&cd[i + 30], 2),
           comment = LoadLe(&cd[i + 32], 2);
    size_t next = i + kCdHeaderSize + name + extra + comment;
    if (next > cd.size()) {
      *why = "damaged central directory";
      return false;
    }
    ApplyZip64Extra(std::string_view(cd).substr(i + kCdHeaderSize + name, extra), usize, &e);
    if (!CheckEntry(src, d, e, out, why)) return false;
    i = next;
  }
  if (count != d.entries) {
    *why = "the end record counts " + std::to_string(d.entries) + " entries, the directory has " +
           std::to_string(count);
    return false;
  }
  return true;
}

}  // namespace

void CheckZip(const ByteSource& src, FormatCheck* out) {
  Directory d;
  std::string why;
  if (!ReadDirectory(src, &d, &why)) return MarkIncomplete(out, why);
  if (d.cd_size > kMaxCdBytes) {
    out->verdict = Verdict::kOk;  // the end records agree; the directory is too big to walk
    out->reason = "central directory too large to walk";
    return;
  }
  if (!WalkDirectory(src, d, out, &why)) return MarkIncomplete(out, why);
  out->verdict = Verdict::kOk;
}

}  // namespace lathe::snap::internal
