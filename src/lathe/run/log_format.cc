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

std::string LogRenderer::Feed(std::string_view bytes) {
  std::string text = std::move(tail_);
  text.append(bytes);
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;
    auto rec = ParseLogRecord(std::string_view(text).substr(pos, nl - pos));
    pos = nl + 1;
    if (!rec) continue;
    Pending& p = rec->stream == "stderr" ? err_ : out_;
    if (p.text.empty()) p.ts = std::string(rec->timestamp);
    p.text += rec->content;
    if (rec->partial) continue;
    if (timestamps_) out += p.ts + ' ';
    out += p.text;
    out += '\n';
    p.text.clear();
  }
  tail_ = text.substr(pos);
  return out;
}

std::string RenderLog(std::string_view text, bool timestamps) {
  LogRenderer r(timestamps);
  return r.Feed(text);
}

}  // namespace lathe::run
