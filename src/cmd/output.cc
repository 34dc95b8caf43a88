#include "cmd/output.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace lathe::cmd {
namespace {
// Display width: CJK characters take two columns, other UTF-8 one.
size_t Width(const std::string& s) {
  size_t w = 0;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    w += len == 3 ? 2 : 1;
    i += len;
  }
  return w;
}
}  // namespace

void PrintTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& r : rows) {
    if (widths.size() < r.size()) widths.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) widths[i] = std::max(widths[i], Width(r[i]));
  }
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(widths[i] - Width(r[i]) + 2, ' ');
    }
    std::printf("%s\n", line.c_str());
  }
}

void PrintJson(const Json& j) { std::printf("%s\n", j.dump(2).c_str()); }

std::string Age(int64_t ms) {
  if (ms <= 0) return "-";
  int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  int64_t s = std::max<int64_t>(0, (now - ms) / 1000);
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m";
  if (s < 86400) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

bool IsTerminal() { return ::isatty(1) == 1; }

}  // namespace lathe::cmd
