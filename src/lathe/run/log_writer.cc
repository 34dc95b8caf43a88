#include "lathe/run/log_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "lathe/run/log_format.h"

namespace lathe::run {
namespace {

class FdFile final : public LogFile {
 public:
  explicit FdFile(int fd) : fd_(fd) {}
  ssize_t Append(std::string_view data) override {
    ssize_t n = ::write(fd_, data.data(), data.size());
    return n < 0 ? -errno : n;
  }
  int Truncate(uint64_t size) override {
    return ::ftruncate(fd_, static_cast<off_t>(size)) == 0 ? 0 : -errno;
  }
  int PunchHole(uint64_t offset, uint64_t len) override {
    return ::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                       static_cast<off_t>(len)) == 0
               ? 0
               : -errno;
  }

 private:
  int fd_;
};

// Holes are punched in whole blocks of this size (a file system's usual).
constexpr uint64_t kHoleAlignBytes = 4096;

uint64_t AlignUp(uint64_t n) {
  return (n + kHoleAlignBytes - 1) / kHoleAlignBytes * kHoleAlignBytes;
}
uint64_t AlignDown(uint64_t n) { return n / kHoleAlignBytes * kHoleAlignBytes; }

}  // namespace

std::unique_ptr<LogFile> FdLogFile(int fd) { return std::make_unique<FdFile>(fd); }

uint64_t OutputBytesOf(std::string_view records) {
  uint64_t n = 0;
  while (!records.empty()) {
    size_t nl = records.find('\n');
    std::string_view line = records.substr(0, nl);
    auto rec = ParseLogRecord(line);
    n += rec ? rec->content.size() + (rec->partial ? 0 : 1) : line.size();
    if (nl == std::string_view::npos) break;
    records.remove_prefix(nl + 1);
  }
  return n;
}

std::string DescribeWriteError(int err) {
  switch (err) {
    case ENOSPC:
      return "disk full";
    case EDQUOT:
      return "disk quota exceeded";
    default:
      return std::strerror(err);
  }
}

LogWriter::LogWriter(std::unique_ptr<LogFile> file, uint64_t size, os::Clock& clock,
                     LogWriterOptions options)
    : file_(std::move(file)), clock_(clock), options_(options), size_(size) {}

void LogWriter::Append(std::string records) {
  if (records.empty()) return;
  if (capped_hard_) {
    lost_bytes_ += OutputBytesOf(records);
    return;
  }
  if (held_bytes_ >= options_.max_held_bytes && StallOver()) return Drop(records);
  held_bytes_ += records.size();
  if (!held_.empty() && held_.back().gap_bytes == 0) {
    held_.back().bytes += records;  // `done` still counts from the start
  } else {
    held_.push_back(Entry{std::move(records)});
  }
  Flush();
  if (held_bytes_ >= options_.max_held_bytes && full_since_ms_ < 0) {
    full_since_ms_ = clock_.MonotonicMs();
  }
}

bool LogWriter::Flush() {
  while (!held_.empty()) {
    if (!WriteFront()) return false;
    if (held_bytes_ < options_.max_held_bytes) full_since_ms_ = -1;
  }
  return true;
}

bool LogWriter::Accepting() { return held_bytes_ < options_.max_held_bytes || StallOver(); }

// Requires a full hold buffer.
bool LogWriter::StallOver() {
  int64_t now = clock_.MonotonicMs();
  if (full_since_ms_ < 0) full_since_ms_ = now;
  return now - full_since_ms_ >= options_.max_stall_ms;
}

// Writes (some of) the front entry; false when the file took nothing.
bool LogWriter::WriteFront() {
  Entry& e = held_.front();
  if (e.gap_bytes > 0 && e.bytes.empty()) {  // the count is final once formatted
    e.bytes = Marker(e.gap_bytes, e.gap_ns);
    held_bytes_ += e.bytes.size();
  }
  ssize_t n;
  do {
    n = file_->Append(std::string_view(e.bytes).substr(e.done));
  } while (n == -EINTR);
  if (n <= 0) {
    err_ = n < 0 ? static_cast<int>(-n) : EIO;
    return false;
  }
  e.done += static_cast<size_t>(n);
  size_ += static_cast<uint64_t>(n);
  held_bytes_ -= static_cast<size_t>(n);
  if (e.done == e.bytes.size()) held_.pop_front();
  KeepWithinCap();
  return true;
}

// 1. Once the head is full, a marker says what happens past the cap.
// 2. Past the cap, the middle down to the newest quarter is punched out.
// 3. Where holes cannot be punched, what comes past the cap is dropped.
void LogWriter::KeepWithinCap() {
  const uint64_t max = options_.max_file_bytes;
  if (max == 0 || capped_hard_) return;
  if (!head_marked_ && size_ >= max / 2) {
    head_marked_ = true;
    std::string note = FormatLogRecord(
        clock_.NowMs() * 1'000'000, "stderr", false,
        fmt::format("[lathe: this log is capped at {} bytes (run_log_max): past that, what lies "
                    "between here and its newest {} bytes is dropped]",
                    max, max / 4));
    held_bytes_ += note.size();
    held_.push_back(Entry{std::move(note)});
    head_end_ = AlignUp(size_ + held_bytes_);  // the marker is the head's last record
  }
  if (!head_marked_ || size_ - trimmed_bytes_ <= max) return;
  const uint64_t from = std::max(trimmed_to_, head_end_);
  const uint64_t to = AlignDown(size_ - max / 4);
  if (to <= from) return;
  if (file_->PunchHole(from, to - from) != 0) {
    capped_hard_ = true;
    lost_reason_ = "the log reached its cap (run_log_max)";
    return;
  }
  trimmed_bytes_ += to - from;
  trimmed_to_ = to;
}

void LogWriter::Drop(std::string_view records) {
  uint64_t n = OutputBytesOf(records);
  if (n == 0) return;
  lost_bytes_ += n;
  if (lost_reason_.empty()) lost_reason_ = DescribeWriteError(err_ != 0 ? err_ : ENOSPC);
  Entry* back = held_.empty() ? nullptr : &held_.back();
  if (back != nullptr && back->gap_bytes > 0 && back->bytes.empty()) {
    back->gap_bytes += n;
  } else {
    held_.push_back(Entry{{}, 0, n, clock_.NowMs() * 1'000'000});
  }
}

void LogWriter::Abandon() {
  if (held_.empty()) return;
  // 1. A record the file holds only the start of is cut off again.
  Entry& front = held_.front();
  if (front.done > 0) {
    size_t nl = std::string_view(front.bytes).substr(0, front.done).rfind('\n');
    size_t keep = nl == std::string_view::npos ? 0 : nl + 1;
    if (keep < front.done && file_->Truncate(size_ - (front.done - keep)) == 0) {
      size_ -= front.done - keep;
      front.done = keep;
    }
  }
  // 2. Everything not in the file is lost; gaps were counted when dropped.
  uint64_t marker_bytes = 0;
  for (const Entry& e : held_) {
    if (e.gap_bytes > 0) {
      marker_bytes += e.gap_bytes;
    } else {
      uint64_t n = OutputBytesOf(std::string_view(e.bytes).substr(e.done));
      lost_bytes_ += n;
      marker_bytes += n;
    }
  }
  held_.clear();
  held_bytes_ = 0;
  full_since_ms_ = -1;
  if (lost_reason_.empty()) lost_reason_ = DescribeWriteError(err_ != 0 ? err_ : ENOSPC);
  // 3. The marker, whole or not at all.
  std::string marker = Marker(marker_bytes, clock_.NowMs() * 1'000'000);
  ssize_t n = file_->Append(marker);
  if (n > 0 && static_cast<size_t>(n) < marker.size()) {
    // Best effort: the log keeps growing if it cannot shrink; the cap is checked again at the next
    // write.
    (void)file_->Truncate(size_);
  } else if (n > 0) {
    size_ += marker.size();
  }
}

std::string LogWriter::Marker(uint64_t bytes, int64_t ns) const {
  std::string why =
      lost_reason_.empty() ? DescribeWriteError(err_ != 0 ? err_ : ENOSPC) : lost_reason_;
  return FormatLogRecord(ns, "stderr", false,
                         fmt::format("[lathe: {} bytes of output lost: {}]", bytes, why));
}

}  // namespace lathe::run
