// Limits the daemon's API holds requests to (docs/api.md), shared by the
// server that enforces them and the client that explains them.
#pragma once

#include <cstddef>

namespace lathe::api {

// A larger request body is answered 413 and the connection closed.
inline constexpr size_t kMaxRequestBodyBytes = 4u << 20;

}  // namespace lathe::api
