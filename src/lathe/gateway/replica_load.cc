#include "lathe/gateway/replica_load.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

namespace lathe::gateway {
namespace {

// One sample line "name{labels} value [timestamp]": its name and value;
// false for comments, blank and malformed lines.
bool Sample(std::string_view line, std::string_view& name, double& value) {
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  if (line.empty() || line.front() == '#') return false;
  size_t i = line.find_first_of("{ \t");
  if (i == std::string_view::npos) return false;
  name = line.substr(0, i);
  if (line[i] == '{') {
    // Label values are quoted and may hold spaces, braces and escapes.
    bool quoted = false;
    for (++i; i < line.size(); ++i) {
      const char c = line[i];
      if (quoted && c == '\\') {
        ++i;
      } else if (c == '"') {
        quoted = !quoted;
      } else if (!quoted && c == '}') {
        break;
      }
    }
    if (i >= line.size()) return false;
    ++i;
  }
  std::string rest(line.substr(i));
  const char* begin = rest.c_str();
  char* end = nullptr;
  value = std::strtod(begin, &end);
  return end != begin && std::isfinite(value);
}

}  // namespace

std::optional<ReplicaLoad> ParseReplicaLoad(std::string_view text) {
  double queued = 0, in_flight = 0;
  bool seen = false;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    std::string_view name;
    double v = 0;
    if (!Sample(line, name, v)) continue;
    if (name == kQueueMetric) {
      queued += v;
      seen = true;
    } else if (name == kInFlightMetric) {
      in_flight += v;
    }
  }
  if (!seen) return std::nullopt;
  ReplicaLoad load;
  load.queued = std::max<int64_t>(0, std::llround(queued));
  load.running = std::max<int64_t>(0, std::llround(in_flight) - load.queued);
  return load;
}

}  // namespace lathe::gateway
