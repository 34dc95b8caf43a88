#include "lathe/api/run_origin.h"

#include <algorithm>
#include <cctype>

#include "lathe/run/spec.h"

namespace lathe::api {
namespace {

// A run id as a DNS label: 1-63 lower-case letters and digits.
bool ValidRunLabel(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); });
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::optional<RunOrigin> ParseRunOrigin(std::string_view host_header,
                                        const std::vector<std::string>& bases) {
  if (host_header.empty() || host_header.front() == '[') return std::nullopt;  // an IPv6 literal
  std::string host = Lower(host_header.substr(0, host_header.find(':')));
  if (!host.empty() && host.back() == '.') host.pop_back();
  for (const auto& b : bases) {
    std::string base = Lower(b);
    if (!base.empty() && base.back() == '.') base.pop_back();
    if (base.empty() || host.size() <= base.size() + 1 || !host.ends_with("." + base)) continue;
    std::string_view prefix(host.data(), host.size() - base.size() - 1);
    RunOrigin o;
    o.base = base;
    if (auto dot = prefix.find('.'); dot == std::string_view::npos) {
      o.run_id = std::string(prefix);
    } else {
      o.port_name = std::string(prefix.substr(0, dot));
      o.run_id = std::string(prefix.substr(dot + 1));
      if (!run::ValidPortName(o.port_name)) return std::nullopt;
    }
    if (!ValidRunLabel(o.run_id)) return std::nullopt;
    return o;
  }
  return std::nullopt;
}

std::string RunScope(std::string_view run_id) { return "run:" + std::string(run_id); }

std::string RunOriginHost(const RunOrigin& o) {
  return (o.port_name.empty() ? "" : o.port_name + ".") + o.run_id + "." + o.base;
}

bool IsOwnOriginPath(std::string_view next) {
  if (next.empty() || next[0] != '/' || (next.size() > 1 && next[1] == '/')) return false;
  for (char c : next) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '\\') return false;
  }
  return true;
}

}  // namespace lathe::api
