// Browser sessions: POST /sessions/code, GET /session, GET /sessions[?all=1],
// DELETE /sessions/{session}.
//
// Who may (docs/security.md, "Browser sessions"):
//   - anyone asks for a login code for themselves; root and the daemon's
//     user, on the unix socket only, also for another user ("user");
//   - GET /session answers a request made with a session's cookie: who it
//     is, and the CSRF token the web UI sends back;
//   - a user lists and revokes their own sessions; root and the daemon's
//     user everyone's (?all=1).
#include <algorithm>
#include <array>

#include "lathe/api/routes.h"
#include "lathe/api/server.h"
#include "lathe/os/users.h"

namespace lathe::api {
namespace {

constexpr std::array<std::string_view, 1> kCodeFields = {"user"};

Status CheckCodeFields(const Json& body) {
  std::string allowed;
  for (auto f : kCodeFields) allowed += (allowed.empty() ? "" : ", ") + std::string(f);
  for (const auto& [key, value] : body.items()) {
    if (std::find(kCodeFields.begin(), kCodeFields.end(), key) == kCodeFields.end()) {
      return Status::Msg(Code::kInvalidArgument, "session.unknown_field",
                         {{"field", key}, {"allowed", allowed}});
    }
  }
  return Status::OK();
}

}  // namespace

void ApiServer::PostSessionCode(ApiCall& call) {
  auto body = ParseJson(call.req.body.empty() ? "{}" : call.req.body);
  if (!body.ok()) return call.Reply(body.status());
  if (!body->is_object()) return call.Reply(Status::Msg(Code::kInvalidArgument, "json.not_object"));
  if (Status s = CheckCodeFields(*body); !s.ok()) return call.Reply(s);
  std::string user;
  if (body->contains("user")) {
    auto u = GetString(*body, "user");
    if (!u.ok()) return call.Reply(u.status());
    user = *u;
  }
  uid_t uid = call.caller.uid;
  std::string name = call.caller.user;
  if (!user.empty() && user != call.caller.user) {
    // For someone else: an admin, proven by the kernel, not by a credential.
    if (!call.caller.admin || call.auth.via != Via::kSocket) {
      return call.Reply(
          Status::Msg(Code::kPermissionDenied, "session.for_others", {{"user", user}}));
    }
    auto u = os::LookupUserByName(user);
    if (!u.ok()) {
      return call.Reply(
          Status::Msg(Code::kInvalidArgument, "token.no_such_user", {{"user", user}}));
    }
    uid = u->uid;
    name = u->name;
  }
  auto code = sessions_->IssueCode(uid, name, std::string(kUiScope), CreatedBy(call.auth),
                                   CredentialEndMs(call.auth));
  if (!code.ok()) return call.Reply(code.status());
  call.Reply(Json{{"code", *code},
                  {"url", LoginUrl(call.req, *code)},
                  {"uid", uid},
                  {"user", name},
                  {"scope", kUiScope},
                  {"expires_in_ms", opts_.sessions.code_ttl_ms}},
             201);
}

void ApiServer::GetSession(ApiCall& call) {
  if (call.auth.via != Via::kSession || !call.auth.session) {
    return call.Reply(Status::Msg(Code::kNotFound, "session.not_session"));
  }
  Json j = SessionToJson(*call.auth.session);
  j["csrf"] = sessions_->CsrfToken(*call.auth.session);
  j["csrf_header"] = kCsrfHeader;
  call.Reply(j);
}

void ApiServer::ListSessions(ApiCall& call) {
  bool all = Truthy(call.req.QueryParam("all"));
  if (all && !call.caller.admin) {
    return call.Reply(Status::Msg(Code::kPermissionDenied, "api.admin_only"));
  }
  auto list = sessions_->List(all ? std::nullopt : std::optional<uid_t>(call.caller.uid));
  if (!list.ok()) return call.Reply(list.status());
  Json arr = Json::array();
  for (const auto& s : *list) {
    Json j = SessionToJson(s);
    j["current"] = call.auth.session && call.auth.session->id == s.id;
    arr.push_back(std::move(j));
  }
  call.Reply(Json{{"sessions", arr}});
}

void ApiServer::DeleteSession(ApiCall& call) {
  std::optional<uid_t> owner;
  if (!call.caller.admin) owner = call.caller.uid;
  auto r = sessions_->Revoke(call.Param("session"), owner);
  if (!r.ok()) return call.Reply(r.status());
  Json j = SessionToJson(*r);
  j["revoked"] = true;
  call.Reply(j);
}

}  // namespace lathe::api
