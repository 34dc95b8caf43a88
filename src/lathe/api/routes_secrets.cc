// Per-user secrets: POST /secrets {name, value}, GET /secrets,
// DELETE /secrets/{name} (docs/api.md, "Secrets").
//
// Every caller, root included, sets, lists, removes and uses only their own
// secrets (daemon/secrets.h); no answer ever holds a value.
#include <algorithm>
#include <array>

#include "lathe/api/routes.h"
#include "lathe/api/server.h"

namespace lathe::api {
namespace {

constexpr std::array<std::string_view, 2> kSecretFields = {"name", "value"};

Json SecretToJson(const state::SecretRecord& r) {
  return Json{
      {"name", r.name}, {"created_at_ms", r.created_at_ms}, {"updated_at_ms", r.updated_at_ms}};
}

Status CheckFields(const Json& body) {
  for (const auto& [key, value] : body.items()) {
    if (std::find(kSecretFields.begin(), kSecretFields.end(), key) == kSecretFields.end()) {
      return Status::Msg(Code::kInvalidArgument, "secret.unknown_field",
                         {{"field", key}, {"allowed", "name, value"}});
    }
  }
  return Status::OK();
}

}  // namespace

void ApiServer::PostSecret(ApiCall& call) {
  auto body = ParseJson(call.req.body.empty() ? "{}" : call.req.body);
  if (!body.ok()) return call.Reply(body.status());
  if (!body->is_object()) return call.Reply(Status::Msg(Code::kInvalidArgument, "json.not_object"));
  if (Status s = CheckFields(*body); !s.ok()) return call.Reply(s);
  auto name = GetString(*body, "name");
  if (!name.ok()) return call.Reply(name.status());
  const Json& value = (*body)["value"];
  if (!value.is_string()) {
    return call.Reply(Status::Msg(Code::kInvalidArgument, "secret.bad_value",
                                  {{"max", std::to_string(daemon::kMaxSecretValueBytes)}}));
  }
  auto created = daemon_.secrets().Set(call.caller.uid, call.caller.user, *name,
                                       value.get_ref<const std::string&>());
  if (!created.ok()) return call.Reply(created.status());
  call.Reply(Json{{"name", *name}, {"created", *created}}, *created ? 201 : 200);
}

void ApiServer::ListSecrets(ApiCall& call) {
  auto secrets = daemon_.secrets().List(call.caller.uid);
  if (!secrets.ok()) return call.Reply(secrets.status());
  Json arr = Json::array();
  for (const auto& s : *secrets) arr.push_back(SecretToJson(s));
  call.Reply(Json{{"secrets", arr}});
}

void ApiServer::DeleteSecret(ApiCall& call) {
  std::string name = call.Param("name");
  Status s = daemon_.secrets().Remove(call.caller.uid, name);
  if (!s.ok()) return call.Reply(s);
  call.Reply(Json{{"name", name}, {"removed", true}});
}

}  // namespace lathe::api
