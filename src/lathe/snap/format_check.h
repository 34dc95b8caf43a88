// Checkpoint format checks: is this file a complete checkpoint?
//
// A writer killed in the middle of torch.save or safetensors.save_file leaves
// a file that looks fine by name and size but cannot be loaded. These checks
// read the few structures that a complete file must have and that a
// truncated one lacks:
//   - PyTorch zip (.pt .pth .ckpt .bin starting with "PK"), and .npz: the
//     end-of-central-directory record (zip64 too) is present, the central
//     directory ends exactly where it says, every entry's local header and
//     data lie before it;
//   - safetensors: the 8-byte header length fits, the JSON header parses, each
//     tensor's offsets match its dtype and shape, and the data section is
//     exactly as long as the header says;
//   - .npy: magic, header, and data size = product(shape) x item size.
// Legacy (pre-1.6, non-zip) PyTorch files cannot be checked without
// unpickling; they are `unchecked`, which counts as complete.
//
// As a by-product the checks report where tensors start (`tensor_offsets`),
// which the chunker uses as extra cut points so an unchanged tensor yields
// exactly the same chunks whatever changed before it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"

namespace lathe::snap {

enum class Verdict {
  kOk,          // recognised and complete
  kIncomplete,  // recognised and damaged or truncated: never resume from it
  kUnchecked,   // not a known checkpoint format (or one that cannot be checked)
};
std::string_view VerdictName(Verdict v);      // "ok" | "incomplete" | "unchecked"
Verdict VerdictFromName(std::string_view s);  // unknown names are kUnchecked

struct FormatCheck {
  std::string format;  // "pytorch-zip", "pytorch-legacy", "safetensors", "npy", "npz"; "" = none
  Verdict verdict = Verdict::kUnchecked;
  std::string reason;                    // why incomplete, in English (for logs and manifests)
  std::vector<uint64_t> tensor_offsets;  // sorted, unique, each < file size
  bool is_checkpoint() const { return !format.empty(); }
};

// Random read access to a file's bytes (an fd, or memory in tests).
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  // Reads exactly n bytes at off (off + n <= size()).
  virtual Status ReadAt(uint64_t off, size_t n, std::string* out) const = 0;
};

class StringSource final : public ByteSource {
 public:
  explicit StringSource(std::string_view data) : data_(data) {}
  uint64_t size() const override { return data_.size(); }
  Status ReadAt(uint64_t off, size_t n, std::string* out) const override;

 private:
  std::string_view data_;
};

class FdSource final : public ByteSource {
 public:
  FdSource(int fd, uint64_t size, std::string name)
      : fd_(fd), size_(size), name_(std::move(name)) {}
  uint64_t size() const override { return size_; }
  Status ReadAt(uint64_t off, size_t n, std::string* out) const override;

 private:
  int fd_;
  uint64_t size_;
  std::string name_;
};

// Checks the file called `name` (only its extension is used) with contents
// `src`. Never fails: an I/O error while reading makes the file incomplete.
FormatCheck CheckFormat(std::string_view name, const ByteSource& src);

}  // namespace lathe::snap
