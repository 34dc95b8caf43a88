#include "lathe/common/status.h"

#include <cerrno>
#include <cstring>

#include "lathe/common/i18n.h"

namespace lathe {
namespace {
constexpr std::pair<Code, std::string_view> kNames[] = {
    {Code::kOk, "ok"},
    {Code::kInvalidArgument, "invalid_argument"},
    {Code::kNotFound, "not_found"},
    {Code::kAlreadyExists, "already_exists"},
    {Code::kPermissionDenied, "permission_denied"},
    {Code::kFailedPrecondition, "failed_precondition"},
    {Code::kResourceExhausted, "resource_exhausted"},
    {Code::kUnavailable, "unavailable"},
    {Code::kIoError, "io_error"},
    {Code::kInternal, "internal"},
    {Code::kCancelled, "cancelled"},
    {Code::kDeadlineExceeded, "deadline_exceeded"},
};
}  // namespace

std::string_view CodeName(Code code) {
  for (const auto& [c, name] : kNames) {
    if (c == code) return name;
  }
  return "internal";
}

Code CodeFromName(std::string_view name) {
  for (const auto& [c, n] : kNames) {
    if (n == name) return c;
  }
  return Code::kInternal;
}

Status Status::Msg(Code code, std::string msg_id, MsgArgs args) {
  Status s(code, Catalog::Default().Format(msg_id, Lang::kEn, args));
  s.msg_id_ = std::move(msg_id);
  s.args_ = std::move(args);
  return s;
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(CodeName(code_)) + ": " + message_;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  Status s = *this;
  s.message_ = std::string(context) + ": " + message_;
  return s;
}

Status ErrnoStatus(std::string_view context, int err) {
  std::string msg = std::string(context) + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
      return Status::NotFound(std::move(msg));
    case EACCES:
    case EPERM:
      return Status::PermissionDenied(std::move(msg));
    case ENOSPC:
    case EDQUOT:
      return Status::ResourceExhausted(std::move(msg));
    case EEXIST:
      return Status::AlreadyExists(std::move(msg));
    default:
      return Status::IoError(std::move(msg));
  }
}

}  // namespace lathe
