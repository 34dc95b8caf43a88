// Container images: GET /images, POST /images/import {name, path},
// POST /images/pull, POST /images/build, POST /images/prune,
// GET /images/{name}, DELETE /images/{name} (docs/api.md, "Images"; the
// name percent-encoded: it may hold '/' and ':').
//
// Every caller, root included, sees and removes only their own names
// (daemon/images.h); an import reads its file as the caller.
#include <algorithm>
#include <array>

#include "lathe/api/routes.h"
#include "lathe/api/server.h"
#include "lathe/common/units.h"
#include "lathe/net/status_http.h"
#include "lathe/os/users.h"

namespace lathe::api {
namespace {

// `runs`: the caller's queued and active runs in it (ListImages, GetImage).
Json ImageToJson(const daemon::ImageView& v,
                 const std::map<std::string, std::vector<std::string>>& runs = {}) {
  auto it = runs.find(v.id);
  return Json{{"name", v.name},
              {"id", v.id},
              {"digest", v.digest},
              {"runs", it == runs.end() ? Json::array() : Json(it->second)},
              {"source", v.source},
              {"created_at_ms", v.created_at_ms},
              {"last_used_at_ms", v.last_used_at_ms},
              {"size_bytes", v.size_bytes}};
}

// One line of a streamed pull's or build's output: a "log" event.
void WriteLogLine(net::ResponseStream& s, std::string_view line) {
  (void)s.Write(net::SseEvent("log", Json{{"line", std::string(line)}}.dump(
                                         -1, ' ', false, Json::error_handler_t::replace)));
}

// The last event of a streamed pull or build: "result" (the image) or "error"
// ({"error": …, "http": status}); then the stream ends.
void EndWithImage(net::ResponseStream& s, const Result<daemon::ImageView>& v) {
  if (v.ok()) {
    (void)s.Write(net::SseEvent("result", ImageToJson(*v).dump()));
  } else {
    Json err = StatusToJson(v.status());
    err["http"] = net::HttpStatusFor(v.status());
    (void)s.Write(net::SseEvent("error", err.dump()));
  }
  s.Close();
}

// The request's JSON object, with no field but `allowed` (image.unknown_field
// names the one that is not and what is).
Result<Json> ImageBody(const ApiCall& call, std::initializer_list<std::string_view> allowed) {
  ASSIGN_OR_RETURN(Json body, ParseJson(call.req.body.empty() ? "{}" : call.req.body));
  if (!body.is_object()) return Status::Msg(Code::kInvalidArgument, "json.not_object");
  for (const auto& [key, value] : body.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string names;
      for (std::string_view a : allowed) names += (names.empty() ? "" : ", ") + std::string(a);
      return Status::Msg(Code::kInvalidArgument, "image.unknown_field",
                         {{"field", key}, {"allowed", names}});
    }
  }
  return body;
}

std::string NameParam(const ApiCall& call) {
  return net::PercentDecode(call.Param("name"), /*plus_is_space=*/false);
}

}  // namespace

// A pull's or a build's answer (`work`): the image, 201, when it ends; with
// ?stream=1 server-sent events instead, so that a long one is never cut off by
// a client's timeout: "log" ({"line": …}) for each line of podman's output as
// it comes, then "result" (the image) or "error" ({"error": …, "http": status}).
void ApiServer::AnswerImage(ApiCall& call, ImageWork work) {
  if (!Truthy(call.req.QueryParam("stream"))) {
    auto v = work([](std::string_view) {});
    if (!v.ok()) return call.Reply(v.status());
    return call.Reply(ImageToJson(*v), 201);
  }
  std::shared_ptr<net::ResponseStream> s = net::StartEventStream(*call.res);
  call.res.reset();
  StartStreamThread([work = std::move(work), s] {
    EndWithImage(*s, work([&](std::string_view line) { WriteLogLine(*s, line); }));
  });
}

void ApiServer::PostImageImport(ApiCall& call) {
  auto body = ImageBody(call, {"name", "path"});
  if (!body.ok()) return call.Reply(body.status());
  auto name = GetString(*body, "name");
  if (!name.ok()) return call.Reply(name.status());
  auto path = GetString(*body, "path");
  if (!path.ok()) return call.Reply(path.status());
  const os::FsIdentity who = os::IdentityOf(call.caller.uid, call.caller.uid);
  auto v = daemon_.images().Import(who, *name, *path);
  if (!v.ok()) return call.Reply(v.status());
  call.Reply(ImageToJson(*v), 201);
}

void ApiServer::PostImagePull(ApiCall& call) {
  auto body = ImageBody(call, {"ref", "name", "secret", "insecure"});
  if (!body.ok()) return call.Reply(body.status());
  auto ref = GetString(*body, "ref");
  if (!ref.ok()) return call.Reply(ref.status());
  const std::string name = body->value("name", "");
  const std::string secret = body->value("secret", "");
  std::optional<std::string> credentials;
  if (!secret.empty()) {
    // The user's own secret, "user:password"; never echoed.
    auto values = daemon_.secrets().SecretEnv(call.caller.uid, call.caller.user, {secret});
    if (!values.ok()) return call.Reply(values.status());
    credentials = values->at(secret);
  }
  const bool insecure = body->value("insecure", false);
  const uid_t uid = call.caller.uid;
  AnswerImage(call, [this, uid, ref = *ref, name, credentials, insecure](const LineSink& on_line) {
    return daemon_.images().Pull(uid, ref, name, credentials, insecure, on_line);
  });
}

// {"name": "NAME[:TAG]", "dir": "/abs/context", "file": "/abs/Containerfile"}:
// builds as the caller (daemon/images.h Images::Build), answered as
// AnswerImage says.
void ApiServer::PostImageBuild(ApiCall& call) {
  auto body = ImageBody(call, {"name", "dir", "file"});
  if (!body.ok()) return call.Reply(body.status());
  daemon::Images::BuildRequest req;
  for (auto [key, into] : {std::pair{"name", &req.name}, {"dir", &req.dir}}) {
    auto v = GetString(*body, key);
    if (!v.ok()) return call.Reply(v.status());
    *into = *v;
  }
  if (body->contains("file")) {
    auto v = GetString(*body, "file");
    if (!v.ok()) return call.Reply(v.status());
    req.file = *v;
  }
  const os::FsIdentity who = os::IdentityOf(call.caller.uid, call.caller.uid);
  AnswerImage(call, [this, who, req](const LineSink& on_line) {
    return daemon_.images().Build(who, req, on_line);
  });
}

// {"unused_for": "30d", "all_users": false, "dry_run": false}: the names not
// used for that long go (daemon/images.h Images::Prune).
void ApiServer::PostImagePrune(ApiCall& call) {
  auto body = ImageBody(call, {"unused_for", "all_users", "dry_run"});
  if (!body.ok()) return call.Reply(body.status());
  const Json& u = (*body)["unused_for"];
  auto unused = u.is_string() ? ParseDuration(u.get<std::string>())
                              : Result<std::chrono::milliseconds>(Status::InvalidArgument(""));
  if (!unused.ok()) {
    return call.Reply(Status::Msg(Code::kInvalidArgument, "image.prune_bad_unused_for",
                                  {{"value", u.is_null() ? "" : u.dump()}}));
  }
  const bool everyone = body->value("all_users", false);
  if (everyone && !call.caller.admin) {
    return call.Reply(Status::Msg(Code::kPermissionDenied, "image.prune_others"));
  }
  auto gone = daemon_.images().Prune(call.caller.uid, everyone, unused->count(),
                                     daemon_.PinnedImageIds(), body->value("dry_run", false));
  if (!gone.ok()) return call.Reply(gone.status());
  Json arr = Json::array();
  for (const auto& p : *gone) {
    arr.push_back(
        {{"uid", p.uid}, {"name", p.name}, {"id", p.id}, {"last_used_at_ms", p.last_used_at_ms}});
  }
  const std::vector<uid_t> caches = daemon_.images().PruneBuildCaches(
      call.caller.uid, everyone, unused->count(), body->value("dry_run", false));
  call.Reply(
      Json{{"removed", arr}, {"build_caches", caches}, {"dry_run", body->value("dry_run", false)}});
}

void ApiServer::ListImages(ApiCall& call) {
  auto images = daemon_.images().List(call.caller.uid);
  if (!images.ok()) return call.Reply(images.status());
  Json arr = Json::array();
  const auto runs = daemon_.ImageRuns(call.caller.uid);
  for (const auto& v : *images) arr.push_back(ImageToJson(v, runs));
  call.Reply(
      Json{{"images", arr},
           {"available", daemon_.images().available()},
           {"note", daemon_.images().note()},
           {"store",
            {{"bytes", daemon_.images().StoreBytes()}, {"max_bytes", daemon_.images().cap()}}}});
}

void ApiServer::GetImage(ApiCall& call) {
  auto v = daemon_.images().Inspect(call.caller.uid, NameParam(call));
  if (!v.ok()) return call.Reply(v.status());
  call.Reply(ImageToJson(*v, daemon_.ImageRuns(call.caller.uid)));
}

void ApiServer::DeleteImage(ApiCall& call) {
  const std::string name = NameParam(call);
  Status s = daemon_.images().Remove(call.caller.uid, name);
  if (!s.ok()) return call.Reply(s);
  call.Reply(Json{{"name", name}, {"removed", true}});
}

}  // namespace lathe::api
