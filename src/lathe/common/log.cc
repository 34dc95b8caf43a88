#include "lathe/common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace lathe {

void InitLogging(std::string_view default_level) {
  const char* env = std::getenv("LATHE_LOG");
  std::string level = env != nullptr && *env != '\0' ? env : std::string(default_level);
  auto logger = spdlog::stderr_color_mt("lathe");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
}

}  // namespace lathe
