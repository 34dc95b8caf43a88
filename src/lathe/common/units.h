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
#include <utility>

#include "lathe/common/status.h"

namespace lathe {

Result<uint64_t> ParseBytes(std::string_view s);
Result<std::chrono::milliseconds> ParseDuration(std::string_view s);
Result<uint64_t> ParseCount(std::string_view s);

// Human forms: FormatBytes(16ull<<30) == "16GiB", FormatBytes(1500) == "1.5kB".
std::string FormatBytes(uint64_t bytes);
// Two counts in one unit, so that they compare at a glance: the unit that
// FormatBytes would give the larger (binary when either is a whole number of
// the binary unit FormatBytes picks for it, as a 2MiB reserve is), with as
// few decimals (0-3) as tell different counts apart, else exact bytes.
// FormatBytesPair(2'080'000, 2ull << 20) == {"1.98MiB", "2.00MiB"}, where
// FormatBytes alone gives "2.1MB" and "2MiB".
std::pair<std::string, std::string> FormatBytesPair(uint64_t a, uint64_t b);
// "2025-06-01 12:00:00 UTC" for epoch milliseconds.
std::string FormatUtc(int64_t ms);

// FormatDuration(90s) == "1m30s", FormatDuration(12h) == "12h".
std::string FormatDuration(std::chrono::milliseconds d);

}  // namespace lathe
