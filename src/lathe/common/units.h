// The one units parser for all of Lathe (Kubernetes-style quantities).
//
//   bytes:     "16G" = "16GB" = 16×10⁹;  "16Gi" = "16GiB" = 16×2³⁰;  "512" = 512;
//              suffixes k/K, M, G, T, P (decimal) and Ki, Mi, Gi, Ti, Pi (binary),
//              an optional trailing "B"; decimals allowed ("1.5Gi").
//   durations: "90s", "500ms", "15m", "12h", "2d", "1h30m"; a bare number is seconds.
//   counts:    "7B" = 7×10⁹, "350M", "13k", "1.5T", "42".
//
// Errors are InvalidArgument naming the input and what is allowed
// (catalog id units.bad_bytes / units.bad_duration / units.bad_count).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "lathe/common/status.h"

namespace lathe {

Result<uint64_t> ParseBytes(std::string_view s);
Result<std::chrono::milliseconds> ParseDuration(std::string_view s);
Result<uint64_t> ParseCount(std::string_view s);

// Human forms: FormatBytes(16ull<<30) == "16GiB", FormatBytes(1500) == "1.5kB".
std::string FormatBytes(uint64_t bytes);
// FormatDuration(90s) == "1m30s", FormatDuration(12h) == "12h".
std::string FormatDuration(std::chrono::milliseconds d);

}  // namespace lathe
