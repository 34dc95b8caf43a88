#include "lathe/run/log_writer.h"

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

 private:
  int fd_;
};

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
  return true;
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
