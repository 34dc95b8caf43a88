// Content-defined chunking (FastCDC with a gear hash and normalized chunking).
//
// A file is cut where a rolling hash of the last ~64 bytes matches a mask, so a
// cut depends only on nearby content: inserting or deleting bytes moves the
// cuts around the edit and leaves every other chunk identical, which is what
// lets unchanged parts of a checkpoint deduplicate.
//
// Parameters (see docs/snapshots.md for the measurements behind them):
//   min 16 KiB, normal point 64 KiB, max 256 KiB. A 4 KiB block rewritten in
//   a 256 MiB checkpoint then re-stores one ~64 KiB chunk instead of the 1-2 MiB
//   that restic and borg lose; per-chunk metadata (~100 bytes in a manifest and
//   the index) stays near 0.15% of the data; pack files keep the file count
//   and the fsyncs independent of the chunk count.
// The parameters and the gear table are part of a store's format: changing
// them would stop new snapshots from deduplicating against old ones, so a
// store records them in its config and keeps using them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lathe::snap {

struct ChunkerParams {
  uint32_t min_bytes = 16 * 1024;   // no cut before this many bytes
  uint32_t avg_bytes = 64 * 1024;   // normal point: the mask gets easier after it
  uint32_t max_bytes = 256 * 1024;  // forced cut
};

// True when min < avg < max, avg is a power of two, and max <= 16 MiB.
bool ValidChunkerParams(const ChunkerParams& p);

// Stateless: each call looks for the next cut in `data` (which starts at the
// previous cut). Thread-safe.
class GearChunker {
 public:
  explicit GearChunker(const ChunkerParams& p);

  // Length of the chunk that starts at data[0], or 0 when `n` bytes are not
  // enough to decide (n < max_bytes and more data may follow). With `final`
  // (end of file, or a forced boundary at data[n]) it never returns 0 for
  // n > 0: when no cut is found the chunk is all n bytes.
  size_t NextCut(const uint8_t* data, size_t n, bool final) const;

  const ChunkerParams& params() const { return p_; }

 private:
  ChunkerParams p_;
  uint64_t mask_small_;  // harder mask, used before the normal point
  uint64_t mask_large_;  // easier mask, used after it
};

}  // namespace lathe::snap
