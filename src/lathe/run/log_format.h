// The per-run log format: the CRI container log format that kubelet and
// containerd write, one record per line:
//
//   2026-11-29T18:30:00.123456789Z stdout F hello world
//
// stream is stdout|stderr; F marks a full line, P a partial one (a line
// longer than kMaxLineBytes is split into P records ending with an F).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lathe::run {

constexpr size_t kMaxLineBytes = 16 * 1024;

// RFC 3339 UTC with nanoseconds, from ns since the epoch.
std::string FormatTimestampNs(int64_t ns_since_epoch);

// One record, newline included.
std::string FormatLogRecord(int64_t ns_since_epoch, std::string_view stream, bool partial,
                            std::string_view content);

struct LogRecord {
  std::string_view timestamp;
  std::string_view stream;
  bool partial = false;
  std::string_view content;
};
// Parses one line (without its newline); nullopt for a malformed line.
std::optional<LogRecord> ParseLogRecord(std::string_view line);

// Turns raw CRI text into what the program printed, incrementally: feed it
// the file's bytes as they come. Partial records are joined per stream (a
// stderr line may arrive between the pieces of a long stdout line); each full
// line ends with '\n'. With `timestamps`, each line starts with the time of
// its first piece and a space. An incomplete record is kept for the next Feed.
class LogRenderer {
 public:
  explicit LogRenderer(bool timestamps) : timestamps_(timestamps) {}
  std::string Feed(std::string_view bytes);

 private:
  struct Pending {
    std::string ts;
    std::string text;
  };
  bool timestamps_;
  std::string tail_;   // bytes after the last newline
  Pending out_, err_;  // partial lines of stdout and stderr
};

// The whole of a log at once.
std::string RenderLog(std::string_view cri_text, bool timestamps);

}  // namespace lathe::run
