#include "lathe/api/host_check.h"

#include <algorithm>
#include <array>

namespace lathe::api {
namespace {

bool IsHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

bool IsPort(std::string_view p) {
  return !p.empty() && p.size() <= 5 &&
         std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// An entry of the allowlist as NormalizeHost would give it: a bare IPv6
// literal ("::1") gains its brackets.
std::string NormalizeEntry(std::string_view entry) {
  if (entry.find(':') != entry.rfind(':') && entry.front() != '[') {
    return NormalizeHost("[" + std::string(entry) + "]");
  }
  return NormalizeHost(entry);
}

}  // namespace

std::string NormalizeHost(std::string_view h) {
  std::string host;
  if (h.empty()) return "";
  if (h.front() == '[') {
    size_t close = h.find(']');
    if (close == std::string_view::npos) return "";
    std::string_view rest = h.substr(close + 1);
    if (!rest.empty() && (rest.front() != ':' || !IsPort(rest.substr(1)))) return "";
    std::string_view inner = h.substr(1, close - 1);
    if (inner.empty()) return "";
    for (char c : inner) {
      char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      bool ok = (l >= '0' && l <= '9') || (l >= 'a' && l <= 'f') || l == ':' || l == '.';
      if (!ok) return "";
      host += l;
    }
    return "[" + host + "]";
  }
  size_t colon = h.find(':');
  std::string_view name = h.substr(0, colon);
  if (colon != std::string_view::npos && !IsPort(h.substr(colon + 1))) return "";
  for (char c : name) host += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!host.empty() && host.back() == '.') host.pop_back();
  if (host.empty() || !std::all_of(host.begin(), host.end(), IsHostChar)) return "";
  if (host.find("..") != std::string::npos || host.front() == '.' || host.back() == '.') return "";
  return host;
}

bool DaemonHostAllowed(std::string_view host_header, const std::vector<std::string>& allowed) {
  const std::string host = NormalizeHost(host_header);
  if (host.empty()) return false;
  constexpr std::array<std::string_view, 3> kLoopback = {"localhost", "127.0.0.1", "[::1]"};
  if (std::find(kLoopback.begin(), kLoopback.end(), host) != kLoopback.end()) return true;
  for (const auto& entry : allowed) {
    if (!entry.empty() && NormalizeEntry(entry) == host) return true;
  }
  return false;
}

bool IsLoopbackListenHost(std::string_view h) {
  return h == "localhost" || h == "::1" || h == "[::1]" || h.starts_with("127.");
}

}  // namespace lathe::api
