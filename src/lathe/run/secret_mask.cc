#include "lathe/run/secret_mask.h"

#include <algorithm>

namespace lathe::run {

SecretMask::SecretMask(const std::vector<std::string>& values) {
  for (const auto& v : values) {
    size_t start = 0;
    while (start <= v.size()) {
      size_t end = std::min(v.find('\n', start), v.size());
      std::string line = v.substr(start, end - start);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.size() >= kMinMaskedBytes &&
          std::find(needles_.begin(), needles_.end(), line) == needles_.end()) {
        needles_.push_back(std::move(line));
      }
      start = end + 1;
    }
  }
  std::stable_sort(needles_.begin(), needles_.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

std::string SecretMask::Apply(std::string_view text) const {
  std::string out(text);
  for (const auto& n : needles_) {
    size_t at = out.find(n);
    while (at != std::string::npos) {
      out.replace(at, n.size(), kMaskText);
      at = out.find(n, at + kMaskText.size());
    }
  }
  return out;
}

}  // namespace lathe::run
