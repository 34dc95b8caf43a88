#include "lathe/snap/space_guard.h"

#include <algorithm>

#include "lathe/common/units.h"
#include "lathe/os/disk_space.h"

namespace lathe::snap {

Status SpaceGuard::Claim(uint64_t bytes, uint64_t unwritten) {
  if (!checked_ || since_check_ + bytes > kRecheckBytes) {
    ASSIGN_OR_RETURN(uint64_t avail, os::AvailableBytes(dir_));
    known_free_ = avail > unwritten ? avail - unwritten : 0;
    since_check_ = 0;
    checked_ = true;
  }
  if (known_free_ < bytes) {  // would not fit at all, reserve or not
    return Status::Msg(
        Code::kResourceExhausted, "snap.disk_full",
        {{"detail", FormatBytes(known_free_) + " free, " + FormatBytes(bytes) + " to write"}});
  }
  if (known_free_ - bytes < reserve_) {
    // What would be left, in the reserve's unit: "1.98MiB ... below 2.00MiB",
    // never "2.1MB ... below 2MiB".
    auto [left, reserve] = FormatBytesPair(known_free_ - bytes, reserve_);
    return Status::Msg(Code::kResourceExhausted, "snap.reserve",
                       {{"free", left}, {"need", FormatBytes(bytes)}, {"reserve", reserve}});
  }
  known_free_ -= bytes;
  since_check_ += bytes;
  return Status::OK();
}

uint64_t DefaultReserveBytes(uint64_t fs_bytes) {
  return std::min<uint64_t>(1ull << 30, fs_bytes / 10);
}

}  // namespace lathe::snap
