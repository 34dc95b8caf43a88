// SHA-256 (OpenSSL) and the hex form used to name chunks and snapshots.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lathe::snap {

using Digest = std::array<uint8_t, 32>;

// SHA-256 of `n` bytes. Thread-safe.
Digest Sha256(const void* data, size_t n);
inline Digest Sha256(std::string_view s) { return Sha256(s.data(), s.size()); }

// 64 lower-case hex characters.
std::string ToHex(const Digest& d);
// The inverse; nullopt unless `hex` is exactly 64 hex characters.
std::optional<Digest> DigestFromHex(std::string_view hex);
// True when `s` is 1-64 lower-case hex characters (an id or an id prefix).
bool IsHexPrefix(std::string_view s);

}  // namespace lathe::snap
