// The Host allowlist of the daemon's own origin, against DNS rebinding
// (docs/security.md, "Host allowlist").
//
// A web page on evil.example can make its name resolve to 127.0.0.1 and then
// talk to the daemon from the browser as "evil.example"; refusing every Host
// the daemon does not know as its own name defeats that. Allowed: localhost,
// 127.0.0.1 and [::1], the configured listen host, and the names of
// `allowed_hosts` in the daemon's config — each with or without a port, in
// any letter case, with or without one trailing dot.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lathe::api {

// The host part of a Host header, lower-case, without its port and trailing
// dot; an IPv6 literal keeps its brackets ("[::1]"). "" when the header is
// malformed (empty, a bad port, unbalanced brackets, spaces or other bytes
// no host name has).
std::string NormalizeHost(std::string_view host_header);

// True when `host_header` names the daemon: one of the loopback names above
// or an entry of `allowed` (listen host and configured names; each may be
// written with brackets or without for IPv6, with a port or without, which is
// ignored). A malformed or missing header is never allowed.
bool DaemonHostAllowed(std::string_view host_header, const std::vector<std::string>& allowed);

// True when a listen host (as configured, not a Host header) is a loopback
// address or name: "localhost", 127.x.y.z, "::1" or "[::1]".
bool IsLoopbackListenHost(std::string_view host);

}  // namespace lathe::api
