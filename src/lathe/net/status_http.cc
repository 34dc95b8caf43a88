#include "lathe/net/status_http.h"

namespace lathe::net {
namespace {

// A full disk is 507 Insufficient Storage (RFC 4918), not a rate limit (429).
bool IsOutOfSpace(const Status& s) {
  const std::string& id = s.msg_id();
  return id == "state.disk_full" || id == "snap.disk_full" || id == "snap.reserve";
}

}  // namespace

int HttpStatusFor(const Status& s) {
  switch (s.code()) {
    case Code::kOk:
      return 200;
    case Code::kInvalidArgument:
      return s.msg_id() == "run.idempotency_key_reused" ? 422 : 400;
    case Code::kNotFound:
      return 404;
    case Code::kPermissionDenied:
      return s.msg_id() == "api.unauthenticated" ? 401 : 403;
    case Code::kAlreadyExists:
    case Code::kFailedPrecondition:
      return 409;
    case Code::kResourceExhausted:
      return IsOutOfSpace(s) ? 507 : 429;
    case Code::kUnavailable:
    case Code::kCancelled:
    case Code::kDeadlineExceeded:
      return 503;
    case Code::kIoError:
    case Code::kInternal:
      return 500;
  }
  return 500;
}

}  // namespace lathe::net
