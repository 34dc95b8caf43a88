// A snapshot's manifest: what was captured, where its bytes are (by chunk
// id), and which checkpoints it holds. The manifest is the snapshot: its id
// is the SHA-256 of its canonical JSON, and a snapshot exists exactly when
// its manifest file is durably in the store's snapshots/ directory.
//
// Canonical JSON: compact, object keys sorted (nlohmann's default map), files
// sorted by path, empty optional fields left out. The same Manifest always
// serialises to the same bytes, so the id is stable.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/snap/format_check.h"
#include "lathe/snap/sha256.h"

namespace lathe::snap {

using SnapshotId = std::string;  // 64 lower-case hex characters

inline constexpr std::string_view kManifestFormat = "lathe-snapshot/1";

enum class EntryType { kFile, kDir, kSymlink };
std::string_view EntryTypeName(EntryType t);  // "file" | "dir" | "symlink"

struct ChunkRef {
  Digest id{};
  uint32_t size = 0;  // plaintext bytes
  bool operator==(const ChunkRef&) const = default;
};

struct FileEntry {
  std::string path;  // relative to the snapshot root, '/'-separated, never "." or ".."
  EntryType type = EntryType::kFile;
  uint32_t mode = 0;  // permission bits (07777)
  int64_t mtime_ns = 0;
  uint64_t size = 0;   // files: bytes
  uint64_t inode = 0;  // files: the source's inode, for incremental snapshots
  std::string target;  // symlinks: the link text
  std::string format;  // files: checkpoint format (format_check.h), "" when none
  Verdict check = Verdict::kUnchecked;
  std::string reason;            // why `check` is incomplete
  std::vector<ChunkRef> chunks;  // files: the contents, in order
};

// A checkpoint: one file in a recognised format, or one directory such as
// Hugging Face's checkpoint-500/ or DeepSpeed's global_step500/ (checkpoints.h).
struct Checkpoint {
  std::string path;
  bool is_dir = false;
  std::optional<int64_t> step;
  bool complete = false;
  std::string reason;    // why not complete
  int64_t mtime_ns = 0;  // newest mtime of its files
};

struct ManifestStats {
  uint64_t files = 0;       // regular files
  uint64_t bytes = 0;       // their total size
  uint64_t files_read = 0;  // files read (the rest matched the parent)
  uint64_t new_chunks = 0;  // chunks this snapshot added to the store
  uint64_t new_bytes = 0;   // bytes it added (after compression, before pack overhead)
};

struct Manifest {
  int64_t time_ms = 0;                      // when the snapshot started, ms since the epoch
  std::string source;                       // absolute path of the directory captured
  SnapshotId parent;                        // "" when none
  std::map<std::string, std::string> tags;  // e.g. run=r123, step=500
  std::vector<FileEntry> files;             // sorted by path
  std::vector<Checkpoint> checkpoints;      // sorted by path
  ManifestStats stats;

  // True when every checkpoint is complete (and there is at least one, or
  // the snapshot holds no checkpoint at all).
  bool complete() const;
  const FileEntry* Find(std::string_view path) const;  // nullptr when absent
};

// One line of `lathe snap ls`: a manifest's summary, kept in the index.
struct SnapshotInfo {
  SnapshotId id;
  int64_t time_ms = 0;
  std::string source;
  SnapshotId parent;
  std::map<std::string, std::string> tags;
  uint64_t files = 0;
  uint64_t bytes = 0;
  uint64_t new_bytes = 0;
  bool complete = false;
  std::string reason;  // why not complete: the first incomplete checkpoint's reason
};
SnapshotInfo Summarize(const SnapshotId& id, const Manifest& m);

// Canonical JSON and back. Parsing fails with InvalidArgument naming the field.
std::string ManifestToJson(const Manifest& m);
Result<Manifest> ManifestFromJson(std::string_view json);

// The id of a manifest given its canonical JSON.
SnapshotId ManifestId(std::string_view canonical_json);

}  // namespace lathe::snap
