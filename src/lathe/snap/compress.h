// zstd for chunks, used only where it pays: float weights barely compress
// (ratio ~1.08 at zstd -1), so compressing them would cost CPU on every
// capture and every restore for almost nothing.
#pragma once

#include <string>
#include <string_view>

#include "lathe/common/status.h"

namespace lathe::snap {

// A chunk is stored compressed only when that saves at least this fraction.
inline constexpr double kMinCompressionSavings = 0.10;

// Fills *out with the zstd frame of `raw` and returns true when it saves at
// least kMinCompressionSavings; false (and *out unspecified) otherwise. A 4
// KiB sample is tried first so incompressible chunks cost ~1/16 of a full
// attempt. Thread-safe (one compression context per thread).
bool MaybeCompress(std::string_view raw, std::string* out);

// Always compresses (for manifests); level 3.
std::string Compress(std::string_view raw);

// Decompresses a frame that must expand to exactly `raw_size` bytes
// (`raw_size` 0: any size up to 1 GiB). InvalidArgument when damaged.
Result<std::string> Decompress(std::string_view frame, size_t raw_size);

}  // namespace lathe::snap
