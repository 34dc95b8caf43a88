#include "lathe/run/log_format.h"

#include <fmt/format.h>

#include <ctime>

namespace lathe::run {

std::string FormatTimestampNs(int64_t ns) {
  time_t secs = static_cast<time_t>(ns / 1'000'000'000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ns % 1'000'000'000);
}

std::string FormatLogRecord(int64_t ns, std::string_view stream, bool partial,
                            std::string_view content) {
  std::string out = FormatTimestampNs(ns);
  out += ' ';
  out += stream;
  out += partial ? " P " : " F ";
  out += content;
  out += '\n';
  return out;
}

std::optional<LogRecord> ParseLogRecord(std::string_view line) {
  LogRecord r;
  size_t a = line.find(' ');
  if (a == std::string_view::npos) return std::nullopt;
  size_t b = line.find(' ', a + 1);
  if (b == std::string_view::npos || b + 2 > line.size()) return std::nullopt;
  r.timestamp = line.substr(0, a);
  r.stream = line.substr(a + 1, b - a - 1);
  char tag = line[b + 1];
  if (tag != 'F' && tag != 'P') return std::nullopt;
  r.partial = tag == 'P';
  r.content = b + 3 <= line.size() ? line.substr(b + 3) : std::string_view();
  return r;
}

std::string RenderLog(std::string_view text, bool timestamps, std::string* rest) {
  std::string out;
  std::string pending;  // joined partial records
  std::string_view pending_ts;
  size_t pos = 0;
  size_t group_start = 0;  // first record of the line being joined
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) break;
    auto rec = ParseLogRecord(text.substr(pos, nl - pos));
    if (pending.empty()) group_start = pos;
    pos = nl + 1;
    if (!rec) continue;
    if (pending.empty()) pending_ts = rec->timestamp;
    pending += rec->content;
    if (rec->partial) continue;
    if (timestamps) {
      out += pending_ts;
      out += ' ';
    }
    out += pending;
    out += '\n';
    pending.clear();
  }
  if (rest != nullptr) *rest = std::string(text.substr(pending.empty() ? pos : group_start));
  return out;
}

}  // namespace lathe::run
