// The API side of the deployments' manager: create, list, show, update,
// remove (deployment_loop.cc has the loop that carries them out).
#include "lathe/deploy/deployments.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "lathe/common/i18n.h"
#include "lathe/common/ids.h"
#include "lathe/common/owned_name.h"
#include "lathe/deploy/models.h"
#include "lathe/run/event_text.h"
#include "lathe/serve/backend.h"

namespace lathe::deploy {

using daemon::Caller;

// Events kept per deployment: the newest; older ones are pruned as new ones come.
constexpr int64_t kMaxEventsPerDeployment = 1000;

Deployments::Deployments(daemon::Runs& runs, Registry& registry, DeploymentOptions options,
                         os::Clock& clock)
    : runs_(runs), registry_(registry), opts_(std::move(options)), clock_(clock) {}

Deployments::~Deployments() { Stop(); }

Status Deployments::Open() {
  {
    MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(store_, state::DeploymentStore::Open(runs_.paths().db));
    ASSIGN_OR_RETURN(keys_, state::CredentialStore::Open(runs_.paths().db));
    started_ms_ = clock_.NowMs();
  }
  ReclaimSocketDirs();
  return Status::OK();
}

Status Deployments::Start() {
  RETURN_IF_ERROR(Open());
  loop_ = std::thread([this] { Loop(); });
  return Status::OK();
}

void Deployments::Stop() {
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.SignalAll();
  if (loop_.joinable()) loop_.join();
}

void Deployments::Kick() {
  {
    MutexLock lock(&mu_);
    kicked_ = true;
    ++kicks_;
  }
  cv_.SignalAll();
}

Status Deployments::SyncFront(int64_t timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  FrontControl* gw = nullptr;
  {
    MutexLock lock(&mu_);
    kicked_ = true;
    const int64_t kick = ++kicks_;
    cv_.SignalAll();
    while (kicks_served_ < kick && !stopping_) {
      if (!cv_.WaitUntil(&mu_, deadline)) {
        return Status(Code::kDeadlineExceeded, "the deployments' loop did not pass in time");
      }
    }
    gw = gateway_.get();
  }
  if (gw == nullptr) return Status::OK();  // no front yet: it reads the routes when it starts
  return gw->Reload();                     // like Metrics(): safe beside the loop
}

std::string Deployments::UrlOf(const std::string& name) {
  std::string host = opts_.listen.substr(0, opts_.listen.rfind(':'));
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  if (host == "::") host = "[::1]";
  int port = gateway_ ? gateway_->port() : 0;
  if (port == 0) {  // the front has not started yet: the configured port, when it names one
    try {
      port = std::stoi(opts_.listen.substr(opts_.listen.rfind(':') + 1));
    } catch (...) {
    }
  }
  if (port == 0) return "";  // not known until the front has started (deploy show has it)
  std::string scheme = opts_.tls_cert.empty() ? "http" : "https";
  return scheme + "://" + host + ":" + std::to_string(port) + "/d/" + name + "/";
}

// A catalog message in both languages, {"en", "zh"}: what the web UI shows
// in the reader's language (the CLI renders msg_id and args itself).
Json BothTexts(const std::string& msg_id, const Json& args) {
  return {{"en", Tr(msg_id, Lang::kEn, run::ArgsWithReasons(args, Lang::kEn))},
          {"zh", Tr(msg_id, Lang::kZh, run::ArgsWithReasons(args, Lang::kZh))}};
}

Status Deployments::AddEvent(const std::string& name, const std::string& level,
                             const std::string& msg_id, const Json& args) {
  state::DeploymentEvent e;
  e.deployment = name;
  e.ts_ms = clock_.NowMs();
  e.level = level;
  e.msg_id = msg_id;
  e.args = args;
  e.message = Tr(msg_id, Lang::kEn, MsgArgsFromJson(args));
  spdlog::info("deployment {}: {}", name, e.message);
  return store_->AddEvent(e, kMaxEventsPerDeployment);
}

Status Deployments::CheckModel(const Caller& caller, DeploymentSpec& spec, std::string* version) {
  std::string qualified;
  auto v = registry_.ResolveVersion(caller, spec.model, &qualified);
  if (!v.ok()) {
    if (v.status().code() == Code::kNotFound || v.status().code() == Code::kInvalidArgument) {
      // The registry's reason in both languages: the CLI and the web UI
      // show the reader's ("detail_zh" beside the English "detail").
      return Status::Msg(Code::kInvalidArgument, "deploy.unknown_model",
                         {{"value", spec.model},
                          {"detail", Localize(v.status(), Lang::kEn)},
                          {"detail_zh", Localize(v.status(), Lang::kZh)}});
    }
    return v.status();
  }
  *version = v->model + "/" + std::to_string(v->version);
  // A backend that is not here (a build without LibTorch has no torchscript
  // backend) would fail every replica: refused now, naming what is here.
  const std::string backend = v->backend;
  serve::BackendRegistry backends(serve::BackendRegistry::DefaultSearchDirs());
  std::vector<std::string> have = backends.Available();
  if (!backend.empty() && std::find(have.begin(), have.end(), backend) == have.end()) {
    std::string list;
    for (const auto& b : have) list += (list.empty() ? "" : ", ") + b;
    return Status::Msg(
        Code::kInvalidArgument, "deploy.backend_missing",
        {{"version", *version}, {"backend", backend}, {"available", list.empty() ? "none" : list}});
  }
  spec.model = std::move(qualified);
  return Status::OK();
}

std::string NamespaceOfDeployment(const state::DeploymentRecord& d) {
  std::string_view ns = NamespaceOf(d.name);
  return ns.empty() ? d.user : std::string(ns);
}

std::string RefOf(const state::DeploymentRecord& d) {
  return OwnedKey(NamespaceOfDeployment(d), ShortName(d.name));
}

daemon::SharedObject DeploymentObject(const state::DeploymentRecord& d) {
  return {"deployment", d.name, d.uid, d.user, d.spec.value("project", "")};
}

daemon::Role Deployments::RoleOn(const Caller& caller, const state::DeploymentRecord& d) {
  if (caller.admin || caller.uid == d.uid) return daemon::Role::kOwner;
  auto reach = runs_.sharing().ReachOf(caller);
  return reach.ok() ? reach->RoleOf(DeploymentObject(d)) : daemon::Role::kNone;
}

Result<std::optional<state::DeploymentRecord>> Deployments::Find(
    const Caller& caller, const std::string& name, const Result<daemon::Reach>& reach) {
  if (!IsValidOwnedName(name)) return std::optional<state::DeploymentRecord>();
  ASSIGN_OR_RETURN(auto all, store_->Named(std::string(ShortName(name))));
  auto choice = ChooseByName(
      std::move(all), name, caller.user, [](const auto& d) { return d.name; },
      NamespaceOfDeployment,
      [&](const auto& d) {
        return caller.admin || d.uid == caller.uid ||
               (reach.ok() && reach->RoleOf(DeploymentObject(d)) != daemon::Role::kNone);
      });
  if (choice.several.empty()) return std::move(choice.found);
  std::string refs;
  for (const auto& d : choice.several) refs += (refs.empty() ? "" : ", ") + RefOf(d);
  return Status::Msg(Code::kFailedPrecondition, "deploy.ambiguous",
                     {{"name", name}, {"refs", refs}});
}

Result<state::DeploymentRecord> Deployments::Reached(const Caller& caller, const std::string& name,
                                                     daemon::Role needed,
                                                     const Result<daemon::Reach>& reach) {
  ASSIGN_OR_RETURN(auto d, Find(caller, name, reach));
  daemon::Role role = daemon::Role::kNone;
  if (d && (caller.admin || caller.uid == d->uid)) {
    role = daemon::Role::kOwner;
  } else if (d && reach.ok()) {
    role = reach->RoleOf(DeploymentObject(*d));
  }
  if (role == daemon::Role::kNone) {
    // Another user's deployment is not shown, nor whose it is: it answers as
    // an unknown name does (creating one with its name says the name is
    // taken, and no more).
    return Status::Msg(Code::kNotFound, "deploy.not_found", {{"name", name}});
  }
  if (role < needed) {
    return Status::Msg(Code::kPermissionDenied, "deploy.forbidden",
                       {{"name", name},
                        {"owner", d->user},
                        {"role", std::string(daemon::RoleName(role))},
                        {"needed", std::string(daemon::RoleName(needed))}});
  }
  return *d;
}

Json Deployments::ForRole(Json j, const state::DeploymentRecord& d, const Caller& caller,
                          const Result<daemon::Reach>& reach) {
  if (caller.admin || caller.uid == d.uid) return j;
  daemon::HideEnvValues(j);  // the owner's alone, whatever the role
  if (!reach.ok()) return j;
  const daemon::SharedObject o = DeploymentObject(d);
  j["shared"] = {{"role", std::string(daemon::RoleName(reach->RoleOf(o)))}, {"by", reach->How(o)}};
  return j;
}

Result<daemon::SharedObject> Deployments::ObjectOf(const Caller& caller, const std::string& name) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto d, Reached(caller, name, daemon::Role::kView));
  return DeploymentObject(d);
}

Result<KeyAccess> Deployments::KeyAccessFor(const Caller& caller, const std::string& name) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto d, Reached(caller, name, daemon::Role::kUse));
  return KeyAccess{d.name, d.uid, RoleOn(caller, d)};
}

namespace {

constexpr size_t kShownCommandBytes = 200;
// Revisions kept in the plan besides the one serving (older ones have no
// replica left to replace).
constexpr int kKeptRevisions = 10;

}  // namespace

std::string WhatItServes(const DeploymentSpec& spec) {
  if (!spec.is_command()) return spec.model;
  std::string line;
  for (const auto& a : spec.command) {
    line += (line.empty() ? "" : " ") +
            (a.find_first_of(" \t'\"") == std::string::npos ? a : "'" + a + "'");
  }
  if (line.size() > kShownCommandBytes) line = line.substr(0, kShownCommandBytes) + "...";
  return line;
}

// Records `spec`'s revision in d.plan["revisions"] and forgets those more
// than kKeptRevisions older, except the one serving.
void Deployments::KeepRevision(state::DeploymentRecord& d, const DeploymentSpec& spec) {
  Json& revs = d.plan["revisions"];
  if (!revs.is_object()) revs = Json::object();
  revs[spec.revision_version()] = RevisionToJson(spec);
  for (auto it = revs.begin(); it != revs.end();) {
    const int n = std::atoi(it.key().c_str() + std::min<size_t>(it.key().size(), 4));
    if (n <= spec.revision - kKeptRevisions && it.key() != d.version) {
      it = revs.erase(it);
    } else {
      ++it;
    }
  }
}

// A device no replica could ever have; more replicas than this machine
// could ever hold (at create, and for an update or a scale).
Status Deployments::CheckFitsMachine(const DeploymentSpec& spec) {
  const int total = runs_.FreeGpuSlots().total;
  RETURN_IF_ERROR(CheckDevice(spec, total));
  if (spec.resources.gpus > 0 && spec.resources.gpus * std::max(1, spec.min_replicas) > total) {
    return Status::Msg(Code::kInvalidArgument, "deploy.too_big",
                       {{"replicas", std::to_string(std::max(1, spec.min_replicas))},
                        {"gpus", std::to_string(spec.resources.gpus)},
                        {"total", std::to_string(total)}});
  }
  // What `lathe run` refuses for a run is refused for each replica.
  return runs_.CheckFitsNode(spec.resources);
}

Status Deployments::CheckUserLimit(const Caller& caller) {
  if (caller.admin || opts_.max_per_user <= 0) return Status::OK();
  ASSIGN_OR_RETURN(auto all, store_->List());
  const auto mine = std::count_if(all.begin(), all.end(), [&](const state::DeploymentRecord& d) {
    return d.uid == caller.uid;
  });
  if (mine < opts_.max_per_user) return Status::OK();
  return Status::Msg(Code::kResourceExhausted, "deploy.too_many",
                     {{"max", std::to_string(opts_.max_per_user)}});
}

namespace {

// `j` (a deployment's JSON, or an update's) with its `profile:` resolved as
// a run's is (Runs::ResolveProfile), keeping what a replica takes of it.
Result<Json> WithProfile(const daemon::Runs& runs, const Json& j) {
  std::vector<std::string> filled;
  ASSIGN_OR_RETURN(Json resolved, runs.ResolveProfile(j, filled));
  return TakeProfileFields(std::move(resolved), filled);
}

}  // namespace

// A command deployment's image, resolved among its owner's images to the id
// every replica of the revision runs. A registry reference must be pulled
// first (`lathe image pull`): replicas do not wait for a pull.
Status Deployments::PinImage(const Caller& owner, DeploymentSpec& spec) {
  if (spec.image.empty() && spec.image_id.empty()) return Status::OK();
  run::RunSpec r;
  r.image = spec.image;
  r.image_id = spec.image_id;
  RETURN_IF_ERROR(runs_.ResolveImage(owner, r));
  if (r.image_id.empty()) {
    return Status::Msg(Code::kNotFound, "image.not_found", {{"name", spec.image}});
  }
  spec.image = r.image;
  spec.image_id = r.image_id;
  return Status::OK();
}

Result<Json> Deployments::Create(const Caller& caller, const Json& spec_json) {
  ASSIGN_OR_RETURN(Json resolved, WithProfile(runs_, spec_json));
  ASSIGN_OR_RETURN(DeploymentSpec spec, DeploymentSpecFromJson(resolved));
  // Names are unique per owner (common/owned_name.h): NAME or OWNER/NAME,
  // OWNER being the caller.
  if (!NamespaceOf(spec.name).empty() && NamespaceOf(spec.name) != caller.user) {
    return Status::Msg(Code::kPermissionDenied, "deploy.other_namespace",
                       {{"name", spec.name}, {"user", caller.user}});
  }
  spec.name = std::string(ShortName(spec.name));
  if (!spec.project.empty()) RETURN_IF_ERROR(runs_.sharing().CheckPutInto(caller, spec.project));
  std::string version;
  if (spec.is_command()) {
    spec.image_id.clear();  // the daemon's: resolved from the image's name now
    RETURN_IF_ERROR(PinImage(caller, spec));
    spec.revision = 1;  // whatever the caller said: the daemon counts
    version = spec.revision_version();
  } else {
    RETURN_IF_ERROR(CheckModel(caller, spec, &version));
  }
  RETURN_IF_ERROR(CheckFitsMachine(spec));
  MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckUserLimit(caller));
  {
    ASSIGN_OR_RETURN(
        auto mine, Find(caller, OwnedKey(caller.user, spec.name), runs_.sharing().ReachOf(caller)));
    if (mine) return Status::Msg(Code::kAlreadyExists, "deploy.name_taken", {{"name", spec.name}});
  }
  state::DeploymentRecord d;
  d.name = OwnedKey(caller.user, spec.name);
  d.uid = caller.uid;
  d.user = caller.user;
  d.spec = DeploymentSpecToJson(spec);
  d.version = version;  // what it will serve first
  if (spec.is_command()) d.plan = {{"revisions", {{version, RevisionToJson(spec)}}}};
  d.health = "progressing";
  d.created_at_ms = d.updated_at_ms = clock_.NowMs();
  RETURN_IF_ERROR(store_->Insert(d));
  // Best effort: an event only tells; what it tells of is stored already.
  (void)AddEvent(d.name, "info", "deploy.created",
                 {{"name", RefOf(d)},
                  {"model", WhatItServes(spec)},
                  {"version", version},
                  {"user", caller.user}});
  kicked_ = true;
  cv_.SignalAll();
  ASSIGN_OR_RETURN(Json j, ToJson(d, true));
  j["changed_by"] = caller.user;
  return j;
}

Result<Json> Deployments::List(const Caller& caller) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto all, store_->List());
  auto reach = runs_.sharing().ReachOf(caller);
  Json out = Json::array();
  for (const auto& d : all) {
    const bool own = caller.admin || d.uid == caller.uid;
    if (!own && (!reach.ok() || reach->RoleOf(DeploymentObject(d)) == daemon::Role::kNone)) {
      continue;
    }
    ASSIGN_OR_RETURN(Json j, ToJson(d, false));
    out.push_back(ForRole(std::move(j), d, caller, reach));
  }
  return Json{{"deployments", out}};
}

Result<Json> Deployments::Get(const Caller& caller, const std::string& name) {
  MutexLock lock(&mu_);
  const auto reach = runs_.sharing().ReachOf(caller);  // once per request
  ASSIGN_OR_RETURN(auto d, Reached(caller, name, daemon::Role::kView, reach));
  ASSIGN_OR_RETURN(Json j, ToJson(d, true));
  return ForRole(std::move(j), d, caller, reach);
}

Result<Json> Deployments::Update(const Caller& caller, const std::string& name, const Json& given) {
  if (!given.is_object()) return Status::Msg(Code::kInvalidArgument, "json.not_object");
  // A profile named now fills what the update leaves out, over what the
  // deployment had: its fields are asked for anew.
  ASSIGN_OR_RETURN(const Json patch, WithProfile(runs_, given));
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto d, Reached(caller, name, daemon::Role::kManage));
  // Who may reach it is the owner's to say.
  if ((patch.contains("public") || patch.contains("project")) &&
      RoleOn(caller, d) < daemon::Role::kOwner) {
    return Status::Msg(Code::kPermissionDenied, "deploy.owner_only",
                       {{"name", name}, {"owner", d.user}});
  }
  if (d.removing)
    return Status::Msg(Code::kFailedPrecondition, "deploy.removing", {{"name", name}});
  Json merged = d.spec;
  bool promote = false;
  std::string back_to;  // a command deployment's earlier revision, whose program comes back
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    if (it.key() == "promote") {
      if (!it->is_boolean()) {
        return Status::Msg(Code::kInvalidArgument, "spec.wrong_type",
                           {{"field", "promote"}, {"type", "true or false"}});
      }
      promote = it->get<bool>();
      continue;
    }
    if (it.key() == "revision") {
      // "rev-N": bring that revision back; a number is the daemon's counter
      // (a spec sent back as it was read), not the caller's to set.
      if (it->is_string()) back_to = it->get<std::string>();
      if (it->is_string() || it->is_number_integer()) continue;
      return Status::Msg(Code::kInvalidArgument, "spec.wrong_type",
                         {{"field", "revision"}, {"type", "a revision such as rev-2"}});
    }
    if (it.key() == "name") {
      // The name is the deployment's identity: the same one is harmless,
      // another is a rename, which a deployment does not do.
      if (*it != Json(name) && *it != Json(std::string(ShortName(d.name))) &&
          *it != Json(RefOf(d))) {
        return Status::Msg(Code::kInvalidArgument, "deploy.no_rename", {{"name", name}});
      }
      continue;
    }
    // replicas and autoscale replace each other.
    if (it.key() == "replicas") merged.erase("autoscale");
    if (it.key() == "autoscale") merged.erase("replicas");
    if (it.key() == "image_id") continue;               // the daemon's
    if (it.key() == "image") merged.erase("image_id");  // resolved again below
    merged[it.key()] = *it;
  }
  ASSIGN_OR_RETURN(DeploymentSpec spec, DeploymentSpecFromJson(merged));
  if (!back_to.empty()) RETURN_IF_ERROR(RestoreRevision(d, back_to, spec));
  RETURN_IF_ERROR(CheckFitsMachine(spec));
  if (spec.is_command() && back_to.empty())
    RETURN_IF_ERROR(PinImage(Caller{d.uid, d.user, false}, spec));
  std::string version;
  if (!spec.is_command()) {
    lock.Unlock();  // GetModel takes the registry's lock
    RETURN_IF_ERROR(CheckModel(Caller{d.uid, d.user, false}, spec, &version));
    lock.Lock();
  }
  ASSIGN_OR_RETURN(d, Reached(caller, name, daemon::Role::kManage));
  Json before = d.spec;
  bool new_revision = false;
  if (spec.is_command()) {
    // A new revision when what the program is changes; the number is the
    // daemon's, never the caller's.
    ASSIGN_OR_RETURN(DeploymentSpec was, DeploymentSpecFromJson(d.spec));
    spec.revision = was.revision;
    if (RevisionToJson(spec) != RevisionToJson(was)) {
      spec.revision = was.revision + 1;
      new_revision = true;
    }
    version = spec.revision_version();
    if (new_revision) KeepRevision(d, spec);
  }
  d.spec = DeploymentSpecToJson(spec);
  if (promote) d.plan["promoted"] = true;
  if (patch.contains("model") || new_revision) d.plan["promoted"] = false;
  d.updated_at_ms = clock_.NowMs();
  RETURN_IF_ERROR(store_->Update(d));
  if (before != d.spec) {
    // Best effort: an event only tells; what it tells of is stored already.
    (void)AddEvent(d.name, "info", "deploy.updated",
                   {{"name", RefOf(d)},
                    {"model", WhatItServes(spec)},
                    {"version", version},
                    {"user", caller.user}});
  }
  // Best effort: an event only tells; what it tells of is stored already.
  if (promote) (void)AddEvent(d.name, "info", "deploy.promoted", {{"user", caller.user}});
  kicked_ = true;
  cv_.SignalAll();
  ASSIGN_OR_RETURN(Json j, ToJson(d, true));
  j = ForRole(std::move(j), d, caller, runs_.sharing().ReachOf(caller));
  j["changed_by"] = caller.user;  // who made the change: the owner, or one it is shared with
  return j;
}

// A command deployment's program as it was in revision `rev` (kept in the
// plan), onto `spec`: rolled out again as a new revision, since what the
// program is changed (Update).
Status Deployments::RestoreRevision(const state::DeploymentRecord& d, const std::string& rev,
                                    DeploymentSpec& spec) {
  if (!spec.is_command()) {
    return Status::Msg(Code::kInvalidArgument, "deploy.command_only", {{"field", "revision"}});
  }
  const Json revs = d.plan.value("revisions", Json::object());
  if (!revs.is_object() || !revs.contains(rev)) {
    return Status::Msg(Code::kNotFound, "deploy.no_revision",
                       {{"name", RefOf(d)}, {"version", rev}});
  }
  return RevisionFromJson(revs[rev], spec);
}

Result<Json> Deployments::Delete(const Caller& caller, const std::string& name) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto d, Reached(caller, name, daemon::Role::kOwner));
  if (!d.removing) {
    d.removing = true;
    d.updated_at_ms = clock_.NowMs();
    RETURN_IF_ERROR(store_->Update(d));
    // Best effort: an event only tells; what it tells of is stored already.
    (void)AddEvent(d.name, "info", "deploy.removing_now",
                   {{"name", RefOf(d)}, {"user", caller.user}});
  }
  kicked_ = true;
  cv_.SignalAll();
  return Json{{"name", std::string(ShortName(d.name))},
              {"ref", RefOf(d)},
              {"removing", true},
              {"changed_by", caller.user}};
}

Result<Json> Deployments::Events(const Caller& caller, const std::string& name, int64_t after_id) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto d, Reached(caller, name, daemon::Role::kView));
  ASSIGN_OR_RETURN(auto events, store_->Events(d.name, after_id, 500));
  Json out = Json::array();
  for (const auto& e : events) {
    out.push_back({{"id", e.id},
                   {"ts_ms", e.ts_ms},
                   {"level", e.level},
                   {"msg_id", e.msg_id},
                   {"args", e.args},
                   {"message", e.message},
                   {"text", e.msg_id.empty() ? Json{{"en", e.message}, {"zh", e.message}}
                                             : BothTexts(e.msg_id, e.args)}});
  }
  return Json{{"events", out}};
}

std::string Deployments::Metrics() {
  FrontControl* gw = nullptr;
  {
    MutexLock lock(&mu_);
    gw = gateway_.get();
  }
  if (gw == nullptr) return "";
  auto m = gw->Metrics();  // const of it: safe beside the loop
  return m.ok() ? *m : "";
}

}  // namespace lathe::deploy
