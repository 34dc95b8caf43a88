#include "lathe/snap/format_check.h"

#include <algorithm>
#include <filesystem>

#include "lathe/os/fd.h"
#include "lathe/snap/format_internal.h"

namespace lathe::snap {

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kOk:
      return "ok";
    case Verdict::kIncomplete:
      return "incomplete";
    case Verdict::kUnchecked:
      return "unchecked";
  }
  return "unchecked";
}

Verdict VerdictFromName(std::string_view s) {
  if (s == "ok") return Verdict::kOk;
  if (s == "incomplete") return Verdict::kIncomplete;
  return Verdict::kUnchecked;
}

Status StringSource::ReadAt(uint64_t off, size_t n, std::string* out) const {
  if (off > data_.size() || n > data_.size() - off) return Status::IoError("read past the end");
  out->assign(data_.substr(off, n));
  return Status::OK();
}

Status FdSource::ReadAt(uint64_t off, size_t n, std::string* out) const {
  if (off > size_ || n > size_ - off) return Status::IoError("read past the end of " + name_);
  out->resize(n);
  return os::PreadFull(fd_, out->data(), n, off, name_);
}

namespace internal {
uint64_t LoadLe(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | static_cast<uint8_t>(p[i]);
  return v;
}
}  // namespace internal

namespace {
constexpr std::string_view kZipMagic = "PK\x03\x04";

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool StartsWithZipMagic(const ByteSource& src) {
  std::string head;
  return src.size() >= 4 && src.ReadAt(0, 4, &head).ok() && head == kZipMagic;
}

// PyTorch-style names: .pt .pth .ckpt and Hugging Face's pytorch_model.bin.
bool IsTorchExtension(const std::string& ext) {
  return ext == ".pt" || ext == ".pth" || ext == ".ckpt" || ext == ".bin";
}

void CheckTorch(const std::string& ext, const ByteSource& src, FormatCheck* out) {
  if (StartsWithZipMagic(src)) {
    out->format = "pytorch-zip";
    internal::CheckZip(src, out);
    return;
  }
  if (ext == ".bin") return;  // an arbitrary binary file, not a checkpoint
  out->format = "pytorch-legacy";
  // Fewer than 4 bytes may be the start of a zip that was never finished.
  if (src.size() < kZipMagic.size()) {
    internal::MarkIncomplete(out, "file too short (" + std::to_string(src.size()) + " bytes)");
    return;
  }
  // Legacy torch.save output is a pickle stream (first byte 0x80, the
  // protocol opcode); it cannot be checked without unpickling it.
  std::string head;
  bool pickle = src.ReadAt(0, 1, &head).ok() && head[0] == '\x80';
  out->verdict = Verdict::kUnchecked;
  out->reason =
      pickle ? "legacy (pickle) format: not checked" : "not a zip nor a pickle: not checked";
}
}  // namespace

FormatCheck CheckFormat(std::string_view name, const ByteSource& src) {
  FormatCheck out;
  std::string ext = Lower(std::filesystem::path(name).extension().string());
  if (IsTorchExtension(ext)) {
    CheckTorch(ext, src, &out);
  } else if (ext == ".npz") {
    out.format = "npz";
    internal::CheckZip(src, &out);
  } else if (ext == ".safetensors") {
    out.format = "safetensors";
    internal::CheckSafetensors(src, &out);
  } else if (ext == ".npy") {
    out.format = "npy";
    internal::CheckNpy(src, &out);
  }
  auto& t = out.tensor_offsets;
  std::sort(t.begin(), t.end());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  while (!t.empty() && t.back() >= src.size()) t.pop_back();
  return out;
}

}  // namespace lathe::snap
