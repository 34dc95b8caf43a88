#include "lathe/net/router.h"

namespace lathe::net {
namespace {

// Splits `path` into its non-empty segments; false when it has more than `max`.
bool SplitPath(std::string_view path, std::string_view* out, size_t max, size_t* n) {
  *n = 0;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) {
      if (*n == max) return false;
      out[(*n)++] = path.substr(i, j - i);
    }
    i = j + 1;
  }
  return true;
}

Status BadPattern(std::string_view pattern, std::string_view why) {
  return Status::InvalidArgument("route pattern '" + std::string(pattern) +
                                 "': " + std::string(why));
}

}  // namespace

std::string_view PathParams::Get(std::string_view name) const {
  for (size_t i = 0; i < size_; ++i) {
    if (names_[i] == name) return values_[i];
  }
  return {};
}

Result<size_t> RouteTable::Add(std::string_view method, std::string_view pattern) {
  if (method.empty()) return BadPattern(pattern, "no method");
  if (pattern.empty() || pattern[0] != '/') return BadPattern(pattern, "must start with '/'");
  std::array<std::string_view, kMaxSegments> parts;
  size_t n = 0;
  if (!SplitPath(pattern, parts.data(), parts.size(), &n))
    return BadPattern(pattern, "too many segments");
  Route r{std::string(method), std::string(pattern), {}};
  size_t params = 0;
  for (size_t i = 0; i < n; ++i) {
    std::string_view s = parts[i];
    Segment seg;
    size_t open = s.find('{');
    size_t close = s.find('}');
    if (open == std::string_view::npos && close == std::string_view::npos) {
      seg.prefix = std::string(s);
    } else {
      if (open == std::string_view::npos || close == std::string_view::npos || close < open + 2) {
        return BadPattern(pattern, "unbalanced or empty '{}'");
      }
      if (s.find_first_of("{}", close + 1) != std::string_view::npos) {
        return BadPattern(pattern, "more than one parameter in a segment");
      }
      if (++params > PathParams::kMax) return BadPattern(pattern, "too many parameters");
      seg.prefix = std::string(s.substr(0, open));
      seg.param = std::string(s.substr(open + 1, close - open - 1));
      seg.suffix = std::string(s.substr(close + 1));
    }
    r.segments.push_back(std::move(seg));
  }
  for (const auto& other : routes_) {
    if (other.method == r.method && other.pattern == r.pattern)
      return BadPattern(pattern, "added twice");
  }
  routes_.push_back(std::move(r));
  return routes_.size() - 1;
}

bool RouteTable::MatchSegments(const Route& r, const std::string_view* segs, size_t n,
                               PathParams* params) {
  if (r.segments.size() != n) return false;
  params->size_ = 0;
  for (size_t i = 0; i < n; ++i) {
    const Segment& seg = r.segments[i];
    std::string_view s = segs[i];
    if (seg.param.empty()) {
      if (s != seg.prefix) return false;
      continue;
    }
    // A parameter is never empty: "{m}:predict" does not match ":predict".
    if (s.size() <= seg.prefix.size() + seg.suffix.size() || !s.starts_with(seg.prefix) ||
        !s.ends_with(seg.suffix)) {
      return false;
    }
    params->names_[params->size_] = seg.param;
    params->values_[params->size_] =
        s.substr(seg.prefix.size(), s.size() - seg.prefix.size() - seg.suffix.size());
    params->size_++;
  }
  return true;
}

RouteMatch RouteTable::Find(std::string_view method, std::string_view path) const {
  RouteMatch m;
  std::array<std::string_view, kMaxSegments> segs;
  size_t n = 0;
  if (!SplitPath(path, segs.data(), segs.size(), &n)) return m;
  // 1. A route of this method.
  for (size_t i = 0; i < routes_.size(); ++i) {
    const Route& r = routes_[i];
    if (r.segments.size() != n || r.method != method) continue;
    if (MatchSegments(r, segs.data(), n, &m.params)) {
      m.kind = RouteMatch::Kind::kFound;
      m.route = i;
      return m;
    }
  }
  // 2. Another method's routes: the Allow header of a 405.
  PathParams scratch;
  bool path_known = false;
  for (const auto& r : routes_) {
    if (r.method == method || !MatchSegments(r, segs.data(), n, &scratch)) continue;
    path_known = true;
    bool listed = false;
    for (size_t at = 0; at < m.allow.size();) {
      size_t end = m.allow.find(", ", at);
      if (end == std::string::npos) end = m.allow.size();
      if (std::string_view(m.allow).substr(at, end - at) == r.method) listed = true;
      at = end + 2;
    }
    if (listed) continue;
    if (!m.allow.empty()) m.allow += ", ";
    m.allow += r.method;
  }
  m.params = PathParams();
  m.kind = path_known ? RouteMatch::Kind::kWrongMethod : RouteMatch::Kind::kNotFound;
  return m;
}

std::unique_ptr<ResponseStream> StartEventStream(Responder& res) {
  return res.StartStream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
}

std::string SseEvent(std::string_view event, std::string_view data, int64_t id) {
  std::string out;
  out.reserve(event.size() + data.size() + 32);
  if (id > 0) {
    out += "id: ";
    out += std::to_string(id);
    out += '\n';
  }
  out += "event: ";
  out += event;
  out += '\n';
  size_t i = 0;
  do {
    size_t j = data.find('\n', i);
    if (j == std::string_view::npos) j = data.size();
    out += "data: ";
    out += data.substr(i, j - i);
    out += '\n';
    i = j + 1;
  } while (i <= data.size());
  out += '\n';
  return out;
}

}  // namespace lathe::net
