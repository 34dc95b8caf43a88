// Who is calling the daemon's API.
//
// Unix socket: the kernel's peer credentials (SO_PEERCRED) name the user.
// TCP (127.0.0.1 only unless configured): `Authorization: Bearer <token>`
// with the token from <home>/token (0600), which acts as the daemon's user.
#pragma once

#include <string>

#include "lathe/common/status.h"
#include "lathe/daemon/daemon.h"
#include "lathe/net/http.h"

namespace lathe::api {

// Unauthenticated -> PermissionDenied with code "unauthenticated" in the
// message (mapped to 401 by the server).
Result<daemon::Caller> Authenticate(const net::HttpRequest& req, const std::string& token,
                                    uid_t daemon_uid);

// Compares in time independent of where the strings differ.
bool ConstantTimeEquals(const std::string& a, const std::string& b);

}  // namespace lathe::api
