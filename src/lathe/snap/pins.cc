#include "lathe/snap/pins.h"

#include <algorithm>

#include "lathe/os/files.h"

namespace lathe::snap {
namespace {

constexpr size_t kMaxHolderBytes = 200;

// A holder as a file name: '/', '%' and '.' percent-encoded, so that no
// name is "." or "..", and none looks like WriteFileAtomic's temporary
// files (NAME.tmp-…).
std::string Encode(const std::string& holder) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (char c : holder) {
    if (c == '/' || c == '%' || c == '.') {
      out += '%';
      out += kHex[(static_cast<unsigned char>(c) >> 4) & 0xf];
      out += kHex[static_cast<unsigned char>(c) & 0xf];
    } else {
      out += c;
    }
  }
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string Decode(const std::string& name) {
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '%' && i + 2 < name.size()) {
      int hi = HexDigit(name[i + 1]), lo = HexDigit(name[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += name[i];
  }
  return out;
}

}  // namespace

Status CheckPinHolder(const std::string& holder) {
  bool printable =
      std::all_of(holder.begin(), holder.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
  if (holder.empty() || holder.size() > kMaxHolderBytes || !printable) {
    return Status::InvalidArgument("a pin's holder must be 1 to 200 printable ASCII bytes");
  }
  return Status::OK();
}

Result<os::FileLock> LockPins(const StoreLayout& l) {
  return os::FileLock::Acquire(l.pins_lock(), os::FileLock::Mode::kExclusive, 0600);
}

Result<std::vector<std::string>> ReadPins(const StoreLayout& l, const std::string& id) {
  auto names = os::ListDir(l.pin_dir(id));
  if (!names.ok()) {
    if (names.status().IsNotFound()) return std::vector<std::string>();
    return names.status();
  }
  std::vector<std::string> out;
  for (const auto& n : *names) {
    if (n.find(".tmp-") != std::string::npos) continue;  // a write in progress
    out.push_back(Decode(n));
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status WritePin(const StoreLayout& l, const std::string& id, const std::string& holder) {
  RETURN_IF_ERROR(CheckPinHolder(holder));
  RETURN_IF_ERROR(os::MakeDirs(l.pin_dir(id), 0700));
  RETURN_IF_ERROR(os::WriteFileAtomic(l.pin_dir(id) + "/" + Encode(holder), holder + "\n", 0600));
  return os::FsyncDir(l.pins());
}

Status RemovePin(const StoreLayout& l, const std::string& id, const std::string& holder) {
  RETURN_IF_ERROR(CheckPinHolder(holder));
  RETURN_IF_ERROR(os::RemoveFile(l.pin_dir(id) + "/" + Encode(holder)));
  ASSIGN_OR_RETURN(auto left, ReadPins(l, id));
  if (left.empty()) return os::RemoveDir(l.pin_dir(id));
  return os::FsyncDir(l.pin_dir(id));
}

Status PinnedError(const std::string& id, const std::vector<std::string>& holders) {
  std::string names;
  for (const auto& h : holders) names += (names.empty() ? "" : ", ") + h;
  return Status::Msg(Code::kFailedPrecondition, "snap.pinned",
                     {{"snapshot", id.substr(0, 12)}, {"holders", names}});
}

}  // namespace lathe::snap
