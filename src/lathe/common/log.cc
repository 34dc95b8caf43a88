#include "lathe/common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <chrono>
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

namespace {
int64_t SteadyNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

RepeatFilter::RepeatFilter(Options options, NowMsFn now_ms)
    : options_(options), now_ms_(now_ms ? std::move(now_ms) : NowMsFn(SteadyNowMs)) {}

std::string RepeatFilter::Report(const std::string& message, uint64_t n) const {
  return fmt::format("{} ({} repeats suppressed in the last {}s)", message, n,
                     (options_.window_ms + 999) / 1000);
}

std::vector<std::string> RepeatFilter::Admit(const std::string& message) {
  int64_t now = now_ms_();
  std::vector<std::string> out;
  std::lock_guard<std::mutex> l(mu_);
  // 1. Windows that have passed: report their repeats and forget them.
  for (auto it = seen_.begin(); it != seen_.end();) {
    if (now - it->second.since_ms < options_.window_ms || it->first == message) {
      ++it;
      continue;
    }
    if (it->second.suppressed > 0) out.push_back(Report(it->first, it->second.suppressed));
    it = seen_.erase(it);
  }
  // 2. This message: counted within its window, logged otherwise.
  auto it = seen_.find(message);
  if (it != seen_.end() && now - it->second.since_ms < options_.window_ms) {
    ++it->second.suppressed;
    return out;
  }
  if (it != seen_.end()) {
    out.push_back(it->second.suppressed > 0 ? Report(message, it->second.suppressed) : message);
    it->second = Seen{now, 0};
    return out;
  }
  // 3. A new message; the oldest one is forgotten when too many are kept.
  if (seen_.size() >= options_.max_messages && !seen_.empty()) {
    auto oldest = seen_.begin();
    for (auto j = seen_.begin(); j != seen_.end(); ++j) {
      if (j->second.since_ms < oldest->second.since_ms) oldest = j;
    }
    if (oldest->second.suppressed > 0)
      out.push_back(Report(oldest->first, oldest->second.suppressed));
    seen_.erase(oldest);
  }
  seen_.emplace(message, Seen{now, 0});
  out.push_back(message);
  return out;
}

void LogFiltered(RepeatFilter& filter, spdlog::level::level_enum level,
                 const std::string& message) {
  for (const std::string& line : filter.Admit(message)) spdlog::log(level, "{}", line);
}

}  // namespace lathe
