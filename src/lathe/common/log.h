// Logging set-up (spdlog). Components log through spdlog's default logger;
// LATHE_LOG=debug|info|warn|error chooses the level (default info for the
// daemon, warn for other commands).
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace lathe {

// Configures the default logger to write to stderr with timestamps.
void InitLogging(std::string_view default_level);

}  // namespace lathe
