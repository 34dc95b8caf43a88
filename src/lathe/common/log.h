// Logging set-up (spdlog). Components log through spdlog's default logger;
// LATHE_LOG=debug|info|warn|error chooses the level (default info for the
// daemon, warn for other commands).
#pragma once

#include <spdlog/spdlog.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace lathe {

// Configures the default logger to write to stderr with timestamps.
void InitLogging(std::string_view default_level);

// Keeps a message that repeats (an error met on every pass of a loop, such as
// a full disk every 100 ms) from flooding the log: the first occurrence is
// logged, repeats within `window_ms` of it are only counted, and the count is
// reported with the first occurrence after the window (or, when the message
// stopped, with the next line that goes through the same filter):
//
//   run r1: disk full
//   run r1: disk full (599 repeats suppressed in the last 60s)
//
// Identical text is what repeats: messages that differ (another run id) are
// counted apart, up to `max_messages` of them (the oldest is forgotten).
// Thread-safe.
class RepeatFilter {
 public:
  using NowMsFn = std::function<int64_t()>;  // a monotonic clock, ms

  struct Options {
    int64_t window_ms = 60000;  // default 60 s
    size_t max_messages = 256;  // distinct messages remembered
  };
  // `now_ms` defaults to std::chrono::steady_clock.
  explicit RepeatFilter(Options options, NowMsFn now_ms = nullptr);
  RepeatFilter() : RepeatFilter(Options{}) {}

  // The lines to log now for one occurrence of `message` (none while it
  // repeats within the window; possibly reports of others that stopped).
  std::vector<std::string> Admit(const std::string& message);

 private:
  struct Seen {
    int64_t since_ms = 0;  // start of its window
    uint64_t suppressed = 0;
  };
  std::string Report(const std::string& message, uint64_t n) const;

  const Options options_;
  const NowMsFn now_ms_;
  std::mutex mu_;
  std::map<std::string, Seen> seen_;  // guarded by mu_
};

// Logs `message` at `level` through the default logger, as `filter` allows.
void LogFiltered(RepeatFilter& filter, spdlog::level::level_enum level, const std::string& message);

}  // namespace lathe
