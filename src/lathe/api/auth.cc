#include "lathe/api/auth.h"

#include "lathe/os/users.h"

namespace lathe::api {

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

Result<daemon::Caller> Authenticate(const net::HttpRequest& req, const std::string& token,
                                    uid_t daemon_uid) {
  daemon::Caller c;
  if (req.peer) {
    c.uid = req.peer->uid;
  } else {
    std::string_view auth = req.Header("Authorization");
    constexpr std::string_view kBearer = "Bearer ";
    if (auth.substr(0, kBearer.size()) != kBearer || token.empty() ||
        !ConstantTimeEquals(std::string(auth.substr(kBearer.size())), token)) {
      return Status::Msg(Code::kPermissionDenied, "api.unauthenticated");
    }
    c.uid = daemon_uid;
  }
  auto u = os::LookupUser(c.uid);
  c.user = u.ok() ? u->name : std::to_string(c.uid);
  c.admin = c.uid == 0 || c.uid == daemon_uid;
  return c;
}

}  // namespace lathe::api
