// Run origins: each run's ports are served on a web origin of their own,
// `http://<run>.localhost:PORT/` for the run's main port and
// `http://<port>.<run>.localhost:PORT/` for another one (docs/security.md,
// "Run origins"). Browsers resolve every name under `localhost` to loopback,
// and `ssh -L PORT:localhost:PORT` carries them to a laptop. Under another
// base name (a configured host such as `lab.example.org`) the same forms
// need a wildcard DNS entry.
//
// A page served on a run's origin is another site than the daemon's own
// origin and than every other run's: its scripts cannot read the API's
// answers or send the API's cookie, and a cookie it sets stays its own.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::api {

// The cookie a run's origin signs a browser in with (host-only, for that
// origin alone; the API never accepts it), and its session scope.
inline constexpr std::string_view kRunCookie = "lathe_run";
std::string RunScope(std::string_view run_id);  // "run:<id>"
// Paths on a run's origin that the daemon answers itself and never forwards.
inline constexpr std::string_view kRunOriginPrefix = "/_lathe/";

struct RunOrigin {
  std::string run_id;     // the run's id (lower-case letters and digits)
  std::string port_name;  // "" = the run's main (first) port
  std::string base;       // the base name it was reached under ("localhost")
};

// The run origin a Host header names under one of `bases` ("localhost",
// configured names; compared ignoring case, a trailing dot and the port),
// or nullopt when it names none (the daemon's own origin, or junk).
std::optional<RunOrigin> ParseRunOrigin(std::string_view host_header,
                                        const std::vector<std::string>& bases);

// Whether `next` (a sign-in's `next=` target) is a path of the origin that
// answers it and nothing a browser could read as another site: it starts
// with one '/', and holds no backslash and no control character (C0 or DEL;
// a browser drops a tab or a newline from a URL, so "/\t/host" would become
// "//host").
bool IsOwnOriginPath(std::string_view next);

// The host part of a run origin: "tb.r3k7q0m9x2a.localhost".
std::string RunOriginHost(const RunOrigin& o);

}  // namespace lathe::api
