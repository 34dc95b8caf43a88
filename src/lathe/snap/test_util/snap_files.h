// Test helpers for snap/: temporary directories, files, random bytes, and
// hand-built checkpoint files (zip, safetensors, npy) in their real formats.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace lathe::snap::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

std::string RandomBytes(size_t n, uint64_t seed);
void WriteFile(const std::string& path, const std::string& data,
               unsigned mode = 0644);  // makes parents
std::string ReadAll(const std::string& path);

// Relative path -> description ("f:<mode>:<content>", "d:<mode>", "l:<target>")
// of everything under `root`, for comparing trees.
std::map<std::string, std::string> TreeOf(const std::string& root);

// A zip of stored (uncompressed) entries, as torch.save and np.savez write.
// With zip64, the end records use the zip64 form.
std::string MakeZip(const std::vector<std::pair<std::string, std::string>>& entries,
                    bool zip64 = false);
// safetensors with F32 tensors of the given element counts, data filled from `seed`.
std::string MakeSafetensors(const std::vector<std::pair<std::string, size_t>>& tensors,
                            uint64_t seed);
// An .npy (version 1.0) of `count` little-endian float32.
std::string MakeNpy(size_t count, uint64_t seed);

}  // namespace lathe::snap::testing
