// Router: one table of routes per server — method + path pattern → handler —
// and the server-sent events helper the routes answer streams with.
//
// A pattern is a path of '/'-separated segments; a segment is a literal
// ("runs") or holds one parameter, alone or with a literal prefix and/or
// suffix: "{run}", "{model}:predict". A parameter matches one non-empty
// segment. Patterns are compiled once, when the route is added; matching
// walks the request path's segments against them (no regular expression, no
// allocation).
//
// Paths are compared by their non-empty segments, as both servers always
// have: "/api/v1/runs/", "/api/v1//runs" and "/api/v1/runs" are the same path.
// The path given to Find is the percent-decoded one (HttpRequest::path).
//
// Find's answer, in this order:
//   1. a route with this method and a matching pattern: that route (the first
//      added, if several match);
//   2. routes that match the path but not the method: "wrong method", with the
//      methods they allow for the Allow header of a 405 (RFC 9110 §15.5.6);
//   3. otherwise "not found" (404).
// The server turns 2 and 3 into its own error bodies; the router sends nothing.
//
// Thread-safety: Add before the server starts (not thread-safe); Find is const
// and may be called from any number of threads at once.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/net/http.h"

namespace lathe::net {

// The parameters of a matched route, in the order of the pattern. The values
// are views into the path given to Find: they live as long as it does.
class PathParams {
 public:
  static constexpr size_t kMax = 4;  // parameters in one pattern, at most

  // The value of the parameter called `name`; "" when the pattern has none.
  std::string_view Get(std::string_view name) const;
  size_t size() const { return size_; }

 private:
  friend class RouteTable;
  std::array<std::string_view, kMax> names_{};
  std::array<std::string_view, kMax> values_{};
  size_t size_ = 0;
};

// The result of RouteTable::Find / Router::Find.
struct RouteMatch {
  enum class Kind { kFound, kWrongMethod, kNotFound };
  Kind kind = Kind::kNotFound;
  size_t route = 0;   // kFound: the route's index (the order of Add)
  PathParams params;  // kFound
  std::string allow;  // kWrongMethod: "GET, POST" (each method once, in the order added)
};

// The table itself, without handlers: patterns compiled into segments.
class RouteTable {
 public:
  // Compiles `pattern` ("/api/v1/runs/{run}/stop") for `method` ("GET");
  // returns the route's index. InvalidArgument for a pattern that does not
  // start with '/', an unbalanced or empty brace, two parameters in one
  // segment, more than PathParams::kMax parameters, or the same method and
  // pattern twice.
  Result<size_t> Add(std::string_view method, std::string_view pattern);
  RouteMatch Find(std::string_view method, std::string_view path) const;
  size_t size() const { return routes_.size(); }

  static constexpr size_t kMaxSegments = 16;  // longer paths match nothing

 private:
  struct Segment {
    std::string prefix;  // the literal, for a segment without a parameter
    std::string suffix;
    std::string param;  // "" for a literal segment
  };
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<Segment> segments;
  };
  static bool MatchSegments(const Route& r, const std::string_view* segs, size_t n,
                            PathParams* params);

  std::vector<Route> routes_;
};

// A RouteTable whose routes carry handlers of type H (a function pointer, a
// pointer to member, a std::function…); H is copied into the table.
template <typename H>
class Router {
 public:
  struct Entry {
    std::string_view method;
    std::string_view pattern;
    H handler;
  };

  Status Add(std::string_view method, std::string_view pattern, H handler) {
    auto added = table_.Add(method, pattern);
    if (!added.ok()) return added.status();
    handlers_.push_back(std::move(handler));
    return Status::OK();
  }
  // Adds every entry, in order; stops at the first error.
  Status AddAll(std::initializer_list<Entry> entries) {
    for (const auto& e : entries) RETURN_IF_ERROR(Add(e.method, e.pattern, e.handler));
    return Status::OK();
  }
  // kFound: *handler is the route's handler; nullptr otherwise.
  RouteMatch Find(std::string_view method, std::string_view path, const H** handler) const {
    RouteMatch m = table_.Find(method, path);
    *handler = m.kind == RouteMatch::Kind::kFound ? &handlers_[m.route] : nullptr;
    return m;
  }

 private:
  RouteTable table_;
  std::vector<H> handlers_;
};

// Server-sent events (text/event-stream, WHATWG HTML §9.2).
//
// Starts a 200 event stream on `res` (Cache-Control: no-cache) and returns it;
// the caller owns it and writes SseEvent() strings to it.
std::unique_ptr<ResponseStream> StartEventStream(Responder& res);
// One event: "id: ID\n" (only when id > 0), "event: EVENT\n", a "data: " line
// per line of `data` ('\n' separates them), then a blank line.
std::string SseEvent(std::string_view event, std::string_view data, int64_t id = 0);
// A comment line, which clients ignore: sent on a quiet stream so that a
// client's read timeout does not end it.
inline constexpr std::string_view kSseKeepAlive = ": keep-alive\n\n";

}  // namespace lathe::net
