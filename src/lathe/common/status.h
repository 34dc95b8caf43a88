// Status and Result<T>: how every expected failure travels in Lathe.
//
// A Status is OK or carries a Code, an English message for logs, and
// optionally a message id from the i18n catalog (data/messages.yaml) with
// named arguments, so the edge (CLI, API) can render it in the reader's
// language. Exceptions never cross a module boundary; they are caught at the
// library that throws them and turned into a Status.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace lathe {

enum class Code {
  kOk = 0,
  kInvalidArgument,     // bad input from a person or a client
  kNotFound,            // a named thing does not exist
  kAlreadyExists,       // a name is taken
  kPermissionDenied,    // the caller may not do this
  kFailedPrecondition,  // the system is not in a state that allows it
  kResourceExhausted,   // quota, disk, queue full
  kUnavailable,         // a peer (the daemon, a service) cannot be reached
  kIoError,             // the operating system said no
  kInternal,            // a bug
  kCancelled,
  kDeadlineExceeded,
};

// Stable lower-case name of a code, used in JSON ("invalid_argument").
std::string_view CodeName(Code code);
Code CodeFromName(std::string_view name);

struct MsgArg {
  std::string key;
  std::string value;
};
using MsgArgs = std::vector<MsgArg>;

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string msg) {
    return Status(Code::kInvalidArgument, std::move(msg));
  }
  static Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status AlreadyExists(std::string msg) {
    return Status(Code::kAlreadyExists, std::move(msg));
  }
  static Status PermissionDenied(std::string msg) {
    return Status(Code::kPermissionDenied, std::move(msg));
  }
  static Status FailedPrecondition(std::string msg) {
    return Status(Code::kFailedPrecondition, std::move(msg));
  }
  static Status ResourceExhausted(std::string msg) {
    return Status(Code::kResourceExhausted, std::move(msg));
  }
  static Status Unavailable(std::string msg) { return Status(Code::kUnavailable, std::move(msg)); }
  static Status IoError(std::string msg) { return Status(Code::kIoError, std::move(msg)); }
  static Status Internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }
  static Status Cancelled(std::string msg) { return Status(Code::kCancelled, std::move(msg)); }
  static Status DeadlineExceeded(std::string msg) {
    return Status(Code::kDeadlineExceeded, std::move(msg));
  }

  // A status whose text comes from the catalog entry `msg_id`, with {key}
  // placeholders filled from `args`. The English message is rendered now.
  static Status Msg(Code code, std::string msg_id, MsgArgs args = {});

  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }  // English
  const std::string& msg_id() const { return msg_id_; }    // empty when none
  const MsgArgs& args() const { return args_; }

  bool IsInvalidArgument() const { return code_ == Code::kInvalidArgument; }
  bool IsNotFound() const { return code_ == Code::kNotFound; }
  bool IsPermissionDenied() const { return code_ == Code::kPermissionDenied; }
  bool IsUnavailable() const { return code_ == Code::kUnavailable; }

  // "invalid_argument: message"
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context: `.
  Status WithContext(std::string_view context) const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
  std::string msg_id_;
  MsgArgs args_;
};

// Turns errno into a Status: ENOENT -> NotFound, EACCES/EPERM -> PermissionDenied,
// ENOSPC/EDQUOT -> ResourceExhausted, otherwise IoError. `context` names what failed.
Status ErrnoStatus(std::string_view context, int err);

// Result<T> holds a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: must not be OK

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T value_or(T other) const { return ok() ? value() : std::move(other); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace lathe

#define LATHE_CONCAT_INNER(a, b) a##b
#define LATHE_CONCAT(a, b) LATHE_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)     \
  do {                            \
    ::lathe::Status _st = (expr); \
    if (!_st.ok()) return _st;    \
  } while (0)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, expr) ASSIGN_OR_RETURN_IMPL(LATHE_CONCAT(_res_, __LINE__), lhs, expr)
