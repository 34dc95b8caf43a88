#include "lathe/web/assets.h"

#include <cctype>
#include <string>

namespace lathe::web {

const Asset* FindAsset(std::string_view path) {
  for (const Asset& a : Assets()) {
    if (a.path == path) return &a;
  }
  return nullptr;
}

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

// q=0 (q=0.0, q=0.000) refuses the coding (RFC 9110, 12.5.3).
bool RefusedByQ(std::string_view params) {
  size_t at = params.find("q=");
  if (at == std::string_view::npos) return false;
  std::string_view q = Trim(params.substr(at + 2));
  if (q.empty() || q[0] != '0') return false;
  for (char c : q.substr(1)) {
    if (c != '.' && c != '0') return false;
  }
  return true;
}

}  // namespace

bool AcceptsGzip(std::string_view accept_encoding) {
  std::string_view rest = accept_encoding;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    size_t semi = item.find(';');
    std::string_view coding = Trim(item.substr(0, semi));
    std::string_view params = semi == std::string_view::npos ? "" : item.substr(semi + 1);
    if ((EqualsIgnoreCase(coding, "gzip") || EqualsIgnoreCase(coding, "x-gzip")) &&
        !RefusedByQ(params))
      return true;
  }
  return false;
}

}  // namespace lathe::web
