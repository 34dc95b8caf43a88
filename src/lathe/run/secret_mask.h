// Hides secrets' values in text shown of a run (its log, a diagnosis quoting
// it): every occurrence of a value becomes "***". A value of several lines is
// hidden line by line, since logs are read and shown a line at a time.
// Values (or lines of them) shorter than kMinMaskedBytes are left as they
// are: "1" or "yes" would turn every line of a log into stars while hiding
// nothing worth hiding.
//
// Immutable after construction; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::run {

inline constexpr size_t kMinMaskedBytes = 4;
inline constexpr std::string_view kMaskText = "***";

class SecretMask {
 public:
  SecretMask() = default;
  explicit SecretMask(const std::vector<std::string>& values);

  bool empty() const { return needles_.empty(); }
  // `text` with every needle replaced, longest needles first.
  std::string Apply(std::string_view text) const;

 private:
  std::vector<std::string> needles_;  // longest first, each >= kMinMaskedBytes
};

}  // namespace lathe::run
