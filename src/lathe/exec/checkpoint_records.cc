#include "lathe/exec/checkpoint_records.h"

#include <fcntl.h>

#include <algorithm>

#include "lathe/os/fd.h"
#include "lathe/os/files.h"

namespace lathe::exec {

namespace {
// A records file holds a line per checkpoint: even a run saving every
// second for a month stays far below this.
constexpr size_t kMaxRecordsBytes = 64u << 20;
}  // namespace

Json CheckpointRecordToJson(const CheckpointRecord& r) {
  return Json{{"seq", r.seq}, {"at_ms", r.at_ms}, {"paths", r.paths}};
}

Status AppendCheckpointRecord(const std::string& path, const CheckpointRecord& r) {
  const std::string line = CheckpointRecordToJson(r).dump() + "\n";
  ASSIGN_OR_RETURN(
      os::Fd fd, os::Fd::Open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600));
  RETURN_IF_ERROR(os::WriteFull(fd.get(), line, path));
  RETURN_IF_ERROR(os::Fsync(fd.get(), path));
  return fd.Close(path);
}

Result<int64_t> CountCheckpointRecords(const std::string& path) {
  auto text = os::ReadRegularFileUpTo(path, kMaxRecordsBytes);
  if (!text.ok()) {
    if (text.status().IsNotFound()) return int64_t{0};
    return text.status();
  }
  return static_cast<int64_t>(std::count(text->begin(), text->end(), '\n'));
}

}  // namespace lathe::exec
