// LogWriter: appends a run's log records (log_format.h) to its log file so
// that output is never lost silently and no record is ever torn.
//
// When the file cannot take more (a full disk, a quota), records are held in
// memory, in order, and written when a later Flush() succeeds. While the hold
// buffer is full, Accepting() is false: the monitor stops reading the run's
// pipes, so the run blocks in write() (backpressure) instead of losing output.
// That stall is bounded: once it has lasted `max_stall_ms`, the writer accepts
// again and drops new records, counting their bytes; when writing resumes, the
// held records go first, then one gap marker record in their place:
//
//   2026-11-29T18:30:00.123000000Z stderr F [lathe: 51234 bytes of output lost: disk full]
//
// (the time is that of the first lost record; the count is of the bytes the
// run printed, newlines included). A write that stops part-way through a
// record is completed by the next one, so a record is never followed by
// another before its end. Abandon() (the monitor is ending and the file still
// takes nothing) cuts a partly written record off again (ftruncate back to the
// last record boundary), counts everything held as lost and writes the marker
// if it can.
//
// A cap (LogWriterOptions::max_file_bytes, config.yaml `run_log_max`) keeps
// a run that prints without end from filling the daemon's disk: the first
// half of the cap (the head) is kept; once the file passes the cap, its
// middle is given back to the file system (a hole punched in the file, whose
// length and offsets stay as they were, so that followers keep their place)
// down to the newest quarter of the cap, again each time it passes the cap.
// When the head is full a marker record says so; a reader sees the hole as a
// stretch of zero bytes, i.e. a malformed record that is skipped. On a file
// system that cannot punch holes, output past the cap is dropped instead and
// counted as lost ("the log reached its cap").
//
// Single-threaded (the monitor's loop). Times come from the Clock.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>

#include "lathe/common/status.h"
#include "lathe/os/clock.h"

namespace lathe::run {

// Where the records go: a file opened for appending.
class LogFile {
 public:
  virtual ~LogFile() = default;
  // Appends a prefix of `data` (the whole of it normally); returns the bytes
  // written (> 0) or -errno.
  virtual ssize_t Append(std::string_view data) = 0;
  // Cuts the file to `size` bytes; 0 or -errno.
  virtual int Truncate(uint64_t size) = 0;
  // Gives the bytes [offset, offset + len) back to the file system, keeping
  // the file's length (they read as zeros); 0 or -errno.
  virtual int PunchHole(uint64_t offset, uint64_t len) = 0;
};

// The real file: `fd` opened with O_APPEND; the LogFile does not own it.
std::unique_ptr<LogFile> FdLogFile(int fd);

struct LogWriterOptions {
  // Record bytes held in memory while the file takes nothing. Default 4 MiB.
  size_t max_held_bytes = 4 << 20;
  // How long the run may be held back (its pipes unread) with the hold buffer
  // full before new output is dropped instead. Default 30 s.
  int64_t max_stall_ms = 30000;
  // The most of the file kept on disk (see above); 0: no cap.
  uint64_t max_file_bytes = 0;
};

class LogWriter {
 public:
  // `size` is the file's current length (a record boundary).
  LogWriter(std::unique_ptr<LogFile> file, uint64_t size, os::Clock& clock,
            LogWriterOptions options = {});

  // Queues complete records (each ending with '\n') behind what is held and
  // writes what the file takes. Records that find the hold buffer full after
  // the stall are dropped and counted; before it they are held (the buffer
  // may overshoot by what the monitor read before it saw Accepting() false).
  void Append(std::string records);
  // Writes what is held; true when nothing is held any more.
  bool Flush();
  // False while the run should be held back: the hold buffer is full and the
  // stall has lasted less than max_stall_ms.
  bool Accepting();
  // Gives up on what is held (see above). Nothing is held afterwards.
  void Abandon();

  bool holding() const { return !held_.empty(); }
  size_t held_bytes() const { return held_bytes_; }
  // Output bytes lost so far: dropped or abandoned, marker written or not.
  uint64_t lost_bytes() const { return lost_bytes_; }
  // Why output was lost ("disk full", ...); empty while nothing was lost.
  const std::string& lost_reason() const { return lost_reason_; }
  // Bytes of the file given back from its middle to keep it within the cap.
  uint64_t trimmed_bytes() const { return trimmed_bytes_; }

 private:
  struct Entry {
    std::string bytes;       // records; for a gap, empty until its marker is formatted
    size_t done = 0;         // bytes of it already in the file
    uint64_t gap_bytes = 0;  // > 0: a gap of this many lost output bytes
    int64_t gap_ns = 0;      // time of the first lost record
  };
  bool WriteFront();
  void KeepWithinCap();
  bool StallOver();
  void Drop(std::string_view records);
  std::string Marker(uint64_t bytes, int64_t ns) const;

  std::unique_ptr<LogFile> file_;
  os::Clock& clock_;
  const LogWriterOptions options_;
  uint64_t size_;               // the file's length as we wrote it
  std::deque<Entry> held_;      // front is written first
  size_t held_bytes_ = 0;       // unwritten record bytes in held_
  int64_t full_since_ms_ = -1;  // monotonic time the hold buffer filled
  int err_ = 0;                 // the last write error
  uint64_t lost_bytes_ = 0;
  std::string lost_reason_;
  // The cap: the head's end was marked; [head end, trimmed_to_) is a hole;
  // the file system cannot punch holes (output past the cap is dropped).
  bool head_marked_ = false;
  uint64_t head_end_ = 0;
  uint64_t trimmed_to_ = 0;
  uint64_t trimmed_bytes_ = 0;
  bool capped_hard_ = false;
};

// Bytes the program printed that `records` carry: content plus the newline
// of each full (F) record. Malformed lines count their length.
uint64_t OutputBytesOf(std::string_view records);

// Words for a write error in the gap marker: "disk full", "disk quota
// exceeded", else strerror.
std::string DescribeWriteError(int err);

}  // namespace lathe::run
