// The model registry (docs/api.md, "Models"): POST /models, GET /models,
// GET /models/{model} (NAME, NAME@ALIAS), GET and DELETE
// /models/{model}/versions/{version}, PUT and DELETE
// /models/{model}/aliases/{alias}, POST /models/{model}/versions/{version}/export.
// The rules are the daemon's (daemon/models.cc); this file reads bodies.
#include <algorithm>
#include <array>

#include "lathe/api/routes.h"
#include "lathe/api/server.h"

namespace lathe::api {
namespace {

constexpr std::array<std::string_view, 9> kCreateFields = {"name",     "from_run", "from_snapshot",
                                                           "from_dir", "file",     "handler",
                                                           "backend",  "note",     "public"};

Result<Json> ObjectBody(const net::HttpRequest& req) {
  ASSIGN_OR_RETURN(Json body, ParseJson(req.body.empty() ? "{}" : req.body));
  if (!body.is_object()) return Status::Msg(Code::kInvalidArgument, "json.not_object");
  return body;
}

// A string field ("" when absent); InvalidArgument naming it otherwise.
Result<std::string> OptString(const Json& body, const char* field) {
  if (!body.contains(field) || body[field].is_null()) return std::string();
  if (!body[field].is_string()) {
    return Status::Msg(Code::kInvalidArgument, "model.field_type",
                       {{"field", field}, {"type", "string"}});
  }
  return body[field].get<std::string>();
}

Result<deploy::ModelVersionRequest> CreateRequest(const Json& body) {
  for (const auto& [key, value] : body.items()) {
    if (std::find(kCreateFields.begin(), kCreateFields.end(), key) == kCreateFields.end()) {
      return Status::Msg(Code::kInvalidArgument, "model.unknown_field",
                         {{"field", key},
                          {"allowed",
                           "name, from_run, from_snapshot, from_dir, file, handler, "
                           "backend, note, public"}});
    }
  }
  deploy::ModelVersionRequest r;
  ASSIGN_OR_RETURN(r.name, OptString(body, "name"));
  ASSIGN_OR_RETURN(r.from_run, OptString(body, "from_run"));
  ASSIGN_OR_RETURN(r.from_snapshot, OptString(body, "from_snapshot"));
  ASSIGN_OR_RETURN(r.from_dir, OptString(body, "from_dir"));
  ASSIGN_OR_RETURN(r.file, OptString(body, "file"));
  ASSIGN_OR_RETURN(r.handler, OptString(body, "handler"));
  ASSIGN_OR_RETURN(r.backend, OptString(body, "backend"));
  ASSIGN_OR_RETURN(r.note, OptString(body, "note"));
  if (body.contains("public")) {
    if (!body["public"].is_boolean()) {
      return Status::Msg(Code::kInvalidArgument, "model.field_type",
                         {{"field", "public"}, {"type", "boolean"}});
    }
    r.is_public = body["public"].get<bool>();
  }
  return r;
}

// {model}/versions/{version} as a checked NAME/N.
Result<deploy::ModelRef> VersionRef(const ApiCall& call) {
  ASSIGN_OR_RETURN(auto ref,
                   deploy::ParseModelRef(call.Param("model") + "/" + call.Param("version")));
  return ref;
}

}  // namespace

void ApiServer::PostModel(ApiCall& call) {
  auto body = ObjectBody(call.req);
  if (!body.ok()) return call.Reply(body.status());
  auto req = CreateRequest(*body);
  if (!req.ok()) return call.Reply(req.status());
  call.Reply(models_.CreateVersion(call.caller, *req), 201);
}

void ApiServer::ListModels(ApiCall& call) { call.Reply(models_.List(call.caller)); }

void ApiServer::GetModel(ApiCall& call) {
  call.Reply(models_.Get(call.caller, call.Param("model")));
}

void ApiServer::GetModelVersion(ApiCall& call) {
  auto ref = VersionRef(call);
  if (!ref.ok()) return call.Reply(ref.status());
  call.Reply(models_.Get(call.caller, ref->name + "/" + std::to_string(*ref->version)));
}

void ApiServer::DeleteModelVersion(ApiCall& call) {
  auto ref = VersionRef(call);
  if (!ref.ok()) return call.Reply(ref.status());
  call.Reply(models_.DeleteVersion(call.caller, ref->name, *ref->version));
}

void ApiServer::PutModelAlias(ApiCall& call) {
  auto body = ObjectBody(call.req);
  if (!body.ok()) return call.Reply(body.status());
  const Json& v = (*body)["version"];
  if (!v.is_number_integer() || v.get<int64_t>() < 1) {
    return call.Reply(Status::Msg(Code::kInvalidArgument, "model.field_type",
                                  {{"field", "version"}, {"type", "integer ≥ 1"}}));
  }
  call.Reply(
      models_.SetAlias(call.caller, call.Param("model"), call.Param("alias"), v.get<int64_t>()));
}

void ApiServer::DeleteModelAlias(ApiCall& call) {
  call.Reply(models_.DeleteAlias(call.caller, call.Param("model"), call.Param("alias")));
}

void ApiServer::PostModelExport(ApiCall& call) {
  auto ref = VersionRef(call);
  if (!ref.ok()) return call.Reply(ref.status());
  auto body = ObjectBody(call.req);
  if (!body.ok()) return call.Reply(body.status());
  auto to = OptString(*body, "to");
  if (!to.ok()) return call.Reply(to.status());
  if (to->empty() || (*to)[0] != '/') {
    return call.Reply(Status::Msg(Code::kInvalidArgument, "snap.restore_needs_absolute",
                                  {{"path", to->substr(0, 200)}}));
  }
  const bool force = body->value("force", false);
  call.Reply(
      models_.Export(call.caller, ref->name + "/" + std::to_string(*ref->version), *to, force));
}

}  // namespace lathe::api
