// Pack files: many chunks in one file, so a checkpoint of thousands of chunks
// costs a handful of files and fsyncs instead of thousands.
//
// Layout (all integers little-endian):
//   header  16 bytes  "LATHEPAK", u32 version = 1, u32 0 (reserved). It has
//           no checksum, but no field is free: CheckPackHeader checks all three
//   blobs   each: 48-byte header ("LBLK", u8 flags, 3 zero bytes, u32 stored
//           length, u32 plain length, 32-byte SHA-256 of the plain bytes),
//           then the stored bytes (zstd frame when flags & kBlobZstd)
//   index   one 56-byte record per blob: id[32], u64 offset of its header,
//           u32 stored, u32 plain, u8 flags, 7 zero bytes
//   footer  24 bytes: u64 index offset, u64 record count, "LATHEIDX"
// Every blob header repeats its id, so a pack whose index is damaged can
// still be read front to back (ScanPack). A pack's name is the first 32 hex
// digits of the SHA-256 of its index: the same content gets the same name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/snap/background_writer.h"
#include "lathe/snap/sha256.h"
#include "lathe/snap/space_guard.h"

namespace lathe::snap {

inline constexpr uint8_t kBlobZstd = 1;
inline constexpr size_t kPackHeaderBytes = 16;
inline constexpr size_t kBlobHeaderBytes = 48;

struct PackEntry {
  Digest id{};
  uint64_t offset = 0;  // of the blob header
  uint32_t stored = 0;  // bytes after the header
  uint32_t raw = 0;     // plain bytes
  uint8_t flags = 0;
};

struct PackFile {
  std::string name;      // final name without ".pack"
  std::string tmp_path;  // where it lies until committed
  uint64_t size = 0;
  std::vector<PackEntry> entries;
};

// Appends chunks to packs in a temporary directory. Packs are written and
// fsynced by a background thread (BackgroundWriter) while the caller hashes
// the next chunks, so durability costs little waiting in Finish(). Not
// thread-safe: one per snapshot. The destructor removes every temporary file
// unless Finish() succeeded and the caller took the packs.
class PackWriter {
 public:
  struct Options {
    std::string tmp_dir;
    uint64_t target_bytes = 16ull << 20;  // a pack is finished once it reaches this size
    SpaceGuard* guard = nullptr;          // may be null (no reserve)
    bool direct = true;                   // write around the page cache where possible
  };
  explicit PackWriter(Options opts);
  ~PackWriter();
  PackWriter(const PackWriter&) = delete;
  PackWriter& operator=(const PackWriter&) = delete;

  Status Add(const Digest& id, std::string_view stored, uint32_t raw_size, uint8_t flags);
  // Finishes the open pack and waits until every pack is durable on disk.
  // The caller then owns the files (renames them into place).
  Result<std::vector<PackFile>> Finish();
  // Removes every temporary file written so far.
  void Abort();

  uint64_t bytes_written() const { return bytes_written_; }

 private:
  Status OpenPack();
  Status ClosePack();

  Options opts_;
  BackgroundWriter out_;
  PackFile cur_;
  std::vector<PackFile> done_;
  uint64_t bytes_written_ = 0;
  bool taken_ = false;
};

// Reads the 16-byte header and checks each field: the magic, the version
// this code writes, the reserved zero. InvalidArgument ("header damaged:
// ...", without the pack's name) naming the field when one differs. The chunks do not depend on it
// (each blob carries its own header and SHA-256), so a damaged header alone loses no data.
Status CheckPackHeader(int fd, const std::string& name);

// Reads a pack's index through its footer. InvalidArgument when the footer
// or index is damaged.
Result<std::vector<PackEntry>> ReadPackIndex(int fd, uint64_t size, const std::string& name);
// Walks the blob headers from the front, for packs whose index is damaged;
// stops at the first header that does not parse.
std::vector<PackEntry> ScanPack(int fd, uint64_t size);

// Reads one chunk, decompresses it and checks its SHA-256 against its id.
// A mismatch is IoError with catalog id snap.chunk_damaged.
Result<std::string> ReadBlob(int fd, const PackEntry& e, const std::string& pack_name);

}  // namespace lathe::snap
