#include "lathe/common/display_width.h"

#include <cstdint>
#include <utility>

namespace lathe {
namespace {

// East Asian wide code points of the Basic Multilingual Plane (CJK, Hangul,
// full-width forms); the rest of it takes one column.
bool Wide(uint32_t c) {
  return (c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0xA4CF) ||
         (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0xF900 && c <= 0xFAFF) ||
         (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF60) ||
         (c >= 0xFFE0 && c <= 0xFFE6);
}

// The length in bytes and the columns of the character at s[i].
std::pair<size_t, size_t> CharAt(std::string_view s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  if (i + len > s.size()) len = s.size() - i;
  if (len == 3) {
    uint32_t cp = ((c & 0x0Fu) << 12) | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 6) |
                  (static_cast<unsigned char>(s[i + 2]) & 0x3Fu);
    return {len, Wide(cp) ? 2 : 1};
  }
  return {len, len == 4 ? 2 : 1};
}

}  // namespace

size_t DisplayWidth(std::string_view s) {
  size_t w = 0;
  for (size_t i = 0; i < s.size();) {
    auto [len, cols] = CharAt(s, i);
    w += cols;
    i += len;
  }
  return w;
}

std::string FitWidth(std::string_view s, size_t width) {
  if (DisplayWidth(s) <= width) return std::string(s);
  if (width == 0) return "";
  std::string out;
  size_t w = 0;
  for (size_t i = 0; i < s.size();) {
    auto [len, cols] = CharAt(s, i);
    if (w + cols > width - 1) break;  // one column for the ellipsis
    out.append(s.substr(i, len));
    w += cols;
    i += len;
  }
  return out + "…";
}

std::string PadRight(std::string_view s, size_t width) {
  size_t w = DisplayWidth(s);
  return std::string(s) + std::string(w < width ? width - w : 0, ' ');
}

std::string PadLeft(std::string_view s, size_t width) {
  size_t w = DisplayWidth(s);
  return std::string(w < width ? width - w : 0, ' ') + std::string(s);
}

}  // namespace lathe
