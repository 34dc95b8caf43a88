// Per-user API tokens: POST /tokens, GET /tokens[?all=1], DELETE /tokens/{token}.
//
// Who may (docs/security.md, "Credentials"):
//   - anyone issues tokens for themselves; over the unix socket, root and
//     the daemon's user also for another user ("user" in the body);
//   - over TCP a token issues only for its own user, and the new token
//     expires no later than the one that asked for it (a browser session's:
//     no later than the session's current end);
//   - a user lists and revokes their own tokens; root and the daemon's user
//     everyone's (?all=1).
#include <algorithm>
#include <array>

#include "lathe/api/routes.h"
#include "lathe/api/server.h"
#include "lathe/os/users.h"

namespace lathe::api {
namespace {

constexpr std::array<std::string_view, 3> kTokenFields = {"name", "expires", "user"};

// The optional string field `field` of the body; "" when absent.
Result<std::string> OptionalString(const Json& body, std::string_view field) {
  auto v = GetString(body, field);
  if (v.status().IsNotFound()) return std::string();
  return v;
}

Status CheckFields(const Json& body) {
  std::string allowed;
  for (auto f : kTokenFields) allowed += (allowed.empty() ? "" : ", ") + std::string(f);
  for (const auto& [key, value] : body.items()) {
    if (std::find(kTokenFields.begin(), kTokenFields.end(), key) == kTokenFields.end()) {
      return Status::Msg(Code::kInvalidArgument, "token.unknown_field",
                         {{"field", key}, {"allowed", allowed}});
    }
  }
  return Status::OK();
}

}  // namespace

void ApiServer::PostToken(ApiCall& call) {
  auto body = ParseJson(call.req.body.empty() ? "{}" : call.req.body);
  if (!body.ok()) return call.Reply(body.status());
  if (!body->is_object()) return call.Reply(Status::Msg(Code::kInvalidArgument, "json.not_object"));
  if (Status s = CheckFields(*body); !s.ok()) return call.Reply(s);
  auto name = OptionalString(*body, "name");
  auto expires = OptionalString(*body, "expires");
  auto user = OptionalString(*body, "user");
  for (const auto* r : {&name, &expires, &user})
    if (!r->ok()) return call.Reply(r->status());

  TokenRequest req;
  req.uid = call.caller.uid;
  req.user = call.caller.user;
  if (!user->empty() && *user != call.caller.user) {
    // For someone else: an admin, proven by the kernel, not by a token.
    if (!call.caller.admin || call.auth.via != Via::kSocket) {
      return call.Reply(
          Status::Msg(Code::kPermissionDenied, "token.for_others", {{"user", *user}}));
    }
    auto u = os::LookupUserByName(*user);
    if (!u.ok()) {
      return call.Reply(
          Status::Msg(Code::kInvalidArgument, "token.no_such_user", {{"user", *user}}));
    }
    req.uid = u->uid;
    req.user = u->name;
  }
  req.name = *name;
  if (body->contains("expires")) req.expires = *expires;  // "" too: refused, not "never"
  if (call.auth.via == Via::kUserToken) req.not_after_ms = call.auth.token_expires_at_ms;
  // A browser session makes no token that outlives it.
  if (call.auth.via == Via::kSession && call.auth.session) {
    req.not_after_ms = call.auth.session->expires_ms;
  }
  req.created_by = CreatedBy(call.auth);
  auto issued = tokens_->Issue(req);
  if (!issued.ok()) return call.Reply(issued.status());
  Json j = TokenToJson(issued->record, issued->record.created_at_ms);
  j["token"] = issued->token;
  call.Reply(j, 201);
}

void ApiServer::ListTokens(ApiCall& call) {
  bool all = Truthy(call.req.QueryParam("all"));
  if (all && !call.caller.admin) {
    return call.Reply(Status::Msg(Code::kPermissionDenied, "api.admin_only"));
  }
  auto tokens = tokens_->List(all ? std::nullopt : std::optional<uid_t>(call.caller.uid));
  if (!tokens.ok()) return call.Reply(tokens.status());
  const int64_t now = (opts_.clock ? *opts_.clock : os::RealClock()).NowMs();
  Json arr = Json::array();
  for (const auto& t : *tokens) arr.push_back(TokenToJson(t, now));
  call.Reply(Json{{"tokens", arr}});
}

void ApiServer::DeleteToken(ApiCall& call) {
  std::optional<uid_t> owner;
  if (!call.caller.admin) owner = call.caller.uid;
  auto r = tokens_->Revoke(call.Param("token"), owner);
  if (!r.ok()) return call.Reply(r.status());
  const int64_t now = (opts_.clock ? *opts_.clock : os::RealClock()).NowMs();
  Json j = TokenToJson(*r, now);
  j["revoked"] = true;
  call.Reply(j);
}

}  // namespace lathe::api
