// Runs: GET and POST /runs, GET and DELETE /runs/{run}, POST /runs/{run}/stop,
// POST /runs/prune, GET /runs/{run}/events. The log is routes_logs.cc.
#include <algorithm>
#include <array>

#include "lathe/api/routes.h"
#include "lathe/api/server.h"
#include "lathe/common/units.h"
#include "lathe/os/users.h"
#include "lathe/run/spec.h"

namespace lathe::api {
namespace {

// The Idempotency-Key header of a request: "" when absent; the IETF draft's
// quoted form ("…") and Stripe's bare one are the same key.
Result<std::string> IdempotencyKeyOf(const net::HttpRequest& req) {
  constexpr size_t kMaxKey = 255;
  constexpr std::string_view kAllowed =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.:~+/=";
  constexpr size_t kShown = 64;
  auto it = std::find_if(req.headers.begin(), req.headers.end(), [](const auto& h) {
    return net::EqualsIgnoreCase(h.first, "Idempotency-Key");
  });
  if (it == req.headers.end()) return std::string();
  std::string_view key = it->second;
  if (key.size() >= 2 && key.front() == '"' && key.back() == '"')
    key = key.substr(1, key.size() - 2);
  if (key.empty() || key.size() > kMaxKey ||
      key.find_first_not_of(kAllowed) != std::string_view::npos) {
    std::string shown;
    for (char c : it->second.substr(0, kShown)) shown += c >= 0x20 && c < 0x7f ? c : '?';
    if (it->second.size() > kShown) shown += "...";
    return Status::Msg(Code::kInvalidArgument, "api.bad_idempotency_key",
                       {{"value", shown},
                        {"length", std::to_string(it->second.size())},
                        {"max", std::to_string(kMaxKey)}});
  }
  return std::string(key);
}

// Where a run executes, as its owner sees it: `backend` (the pool's name, or
// "local") and, for a pool run its cluster accepted, `handle.job_id` (the
// cluster's job id) and `handle.submitted_with` ("sbatch" or "slurmrestd");
// nothing else of the handle (its paths and ids are the daemon's).
void AddWhereItRuns(const state::RunRecord& r, Json& j) {
  j["backend"] = r.backend;
  if (!r.handle.is_object()) return;
  auto it = r.handle.find("job_id");
  if (it == r.handle.end() || !it->is_string() || it->get<std::string>().empty()) return;
  j["handle"] = Json{{"job_id", *it}};
  auto with = r.handle.find("submitted_with");
  if (with != r.handle.end() && with->is_string()) j["handle"]["submitted_with"] = *with;
}

constexpr std::array<std::string_view, 5> kPruneFields = {"older_than", "user", "all_users",
                                                          "dry_run", "snapshots"};

// `older_than`: a duration ("30d", "0s") or whole seconds.
Result<int64_t> OlderThanMs(const Json& body) {
  auto bad = [&] {
    return Status::Msg(Code::kInvalidArgument, "run.prune_bad_older_than",
                       {{"value", body.contains("older_than") ? body["older_than"].dump() : ""}});
  };
  if (!body.contains("older_than")) return bad();
  const Json& v = body["older_than"];
  constexpr int64_t kMaxSeconds = int64_t{100} * 365 * 24 * 3600;
  if (v.is_number_unsigned() && v.get<uint64_t>() <= static_cast<uint64_t>(kMaxSeconds))
    return static_cast<int64_t>(v.get<uint64_t>()) * 1000;
  if (!v.is_string()) return bad();
  auto d = ParseDuration(v.get<std::string>());
  if (!d.ok() || d->count() < 0) return bad();
  return static_cast<int64_t>(d->count());
}

// The body of POST /runs/prune, as the daemon takes it; whose runs follows
// from `user` and `all_users` (neither: the caller's).
Result<daemon::PruneRequest> ParsePruneRequest(const Json& body, const daemon::Caller& caller) {
  if (!body.is_object()) return Status::Msg(Code::kInvalidArgument, "json.not_object");
  std::string allowed;
  for (auto f : kPruneFields) allowed += (allowed.empty() ? "" : ", ") + std::string(f);
  for (const auto& [key, value] : body.items()) {
    if (std::find(kPruneFields.begin(), kPruneFields.end(), key) == kPruneFields.end()) {
      return Status::Msg(Code::kInvalidArgument, "run.prune_unknown_field",
                         {{"field", key}, {"allowed", allowed}});
    }
  }
  daemon::PruneRequest req;
  ASSIGN_OR_RETURN(req.older_than_ms, OlderThanMs(body));
  auto flag = [&](std::string_view field) -> Result<bool> {
    auto b = GetBool(body, field);
    if (b.status().IsNotFound()) return false;
    return b;
  };
  ASSIGN_OR_RETURN(req.dry_run, flag("dry_run"));
  ASSIGN_OR_RETURN(req.snapshots, flag("snapshots"));
  ASSIGN_OR_RETURN(bool all_users, flag("all_users"));
  std::string user;
  if (auto u = GetString(body, "user"); u.ok()) {
    user = *u;
  } else if (!u.status().IsNotFound()) {
    return u.status();
  }
  if (all_users && !user.empty()) {
    return Status::Msg(Code::kInvalidArgument, "run.prune_user_and_all_users");
  }
  if (all_users) return req;  // uid nullopt: everyone's
  req.uid = caller.uid;
  if (!user.empty() && user != caller.user) {
    auto info = os::LookupUserByName(user);
    if (!info.ok()) {
      return Status::Msg(Code::kInvalidArgument, "run.prune_no_such_user", {{"user", user}});
    }
    req.uid = info->uid;
  }
  return req;
}

Json EventsJson(const std::vector<state::EventRecord>& events) {
  Json ev = Json::array();
  for (const auto& e : events) ev.push_back(EventJson(e));
  return ev;
}

std::vector<std::string> SplitCommas(std::string_view v) {
  std::vector<std::string> out;
  while (!v.empty()) {
    size_t comma = v.find(',');
    std::string_view part = v.substr(0, comma);
    if (!part.empty()) out.emplace_back(part);
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return out;
}

// One value of a list filter that is not allowed: InvalidArgument naming the
// parameter, the value and what it takes.
Status BadFilter(std::string_view param, std::string_view value, std::string_view allowed) {
  return Status::Msg(Code::kInvalidArgument, "api.bad_filter",
                     {{"param", std::string(param)},
                      {"value", std::string(value.substr(0, 100))},
                      {"allowed", std::string(allowed)}});
}

// state=a,b  user=NAME  kind=K  q=TEXT  sort=[-]KEY  offset=K
Result<state::RunFilter> RunFilterOf(const net::HttpRequest& req) {
  state::RunFilter f;
  if (auto v = req.QueryParam("state")) {
    std::string allowed;
    for (int i = 0; i <= static_cast<int>(run::RunState::kLost); ++i) {
      allowed += (allowed.empty() ? "" : ", ") +
                 std::string(run::StateName(static_cast<run::RunState>(i)));
    }
    // Given, the filter names at least one state, and every part is one:
    // "state=" or "state=,," would otherwise list everything unfiltered.
    std::vector<std::string> names = SplitCommas(*v);
    if (names.empty() || v->front() == ',' || v->back() == ',' || v->find(",,") != v->npos) {
      return BadFilter("state", *v, allowed);
    }
    for (const auto& name : names) {
      auto st = run::StateFromName(name);
      if (!st) return BadFilter("state", name, allowed);
      f.states.push_back(*st);
    }
  }
  f.user = req.QueryParam("user").value_or("");
  if (auto v = req.QueryParam("kind"); v && !v->empty()) {
    f.kind = run::RunKindFromName(*v);
    if (!f.kind) return BadFilter("kind", *v, "job, notebook, service");
  }
  f.text = req.QueryParam("q").value_or("");
  if (f.text.size() > 200) return BadFilter("q", f.text, "at most 200 bytes");
  if (auto v = req.QueryParam("sort"); v && !v->empty()) {
    std::string_view key = *v;
    if (key[0] == '-') key.remove_prefix(1);
    bool known = false;
    for (const char* k : state::kRunSorts) known = known || key == k;
    if (!known)
      return BadFilter("sort", *v, "created, name, state, user, priority (- before: descending)");
    f.sort = *v;
  }
  ASSIGN_OR_RETURN(f.offset, QueryNumber(req, "offset", 0, 10'000'000));
  return f;
}

// A run shared with the caller: "shared" {role, by}, and its environment's
// values hidden (the owner's alone, whatever the role).
void MarkShared(Json& j, const daemon::Reach& reach, const state::RunRecord& r) {
  const daemon::SharedObject o = daemon::RunObjectOf(r);
  j["shared"] = {{"role", std::string(daemon::RoleName(reach.RoleOf(o)))}, {"by", reach.How(o)}};
  daemon::HideEnvValues(j);
}

}  // namespace

// Newest first, at most `limit` (default 1000; 0 is the default too).
void ApiServer::ListRuns(ApiCall& call) {
  constexpr int64_t kDefaultLimit = 1000;
  constexpr int64_t kMaxLimit = 10'000'000;
  const daemon::Caller& caller = call.caller;
  auto limit = QueryNumber(call.req, "limit", kDefaultLimit, kMaxLimit);
  if (!limit.ok()) return call.Reply(limit.status());
  if (*limit == 0) *limit = kDefaultLimit;
  constexpr int64_t kMaxRecentS = 7 * 24 * 3600;
  auto recent_s = QueryNumber(call.req, "recent", 0, kMaxRecentS);
  if (!recent_s.ok()) return call.Reply(recent_s.status());
  auto recent_limit = QueryNumber(call.req, "recent_limit", 0, kMaxLimit);
  if (!recent_limit.ok()) return call.Reply(recent_limit.status());
  if (Truthy(call.req.QueryParam("follow"))) {
    std::shared_ptr<net::ResponseStream> s = net::StartEventStream(*call.res);
    call.res.reset();
    StartStreamThread([this, s, auth = call.auth] { FollowRunChanges(auth, *s); });
    return;
  }
  auto filter = RunFilterOf(call.req);
  if (!filter.ok()) return call.Reply(filter.status());
  int64_t total = 0, total_all = 0;
  auto runs = daemon_.List(Truthy(call.req.QueryParam("all")), static_cast<int>(*limit), &total,
                           *recent_s * 1000, &total_all, static_cast<int>(*recent_limit), *filter);
  if (!runs.ok()) return call.Reply(runs.status());
  auto reach = daemon_.sharing().ReachOf(caller);
  if (!reach.ok()) return call.Reply(reach.status());
  Json arr = Json::array();
  for (const auto& r : *runs) {
    // Another user's run shows who, what state and which GPUs, never its
    // spec — unless it is shared with the caller (or in a project of theirs).
    const daemon::Role role = reach->RoleOf(daemon::RunObjectOf(r));
    bool whole = role >= daemon::Role::kView;
    Json j = whole ? state::RunToJson(r) : state::RunToPublicJson(r);
    if (whole && role < daemon::Role::kOwner) MarkShared(j, *reach, r);
    if (whole) AddWhereItRuns(r, j);
    if (whole && run::IsActive(r.state) && !r.spec.ports.empty()) j["url"] = MainPortUrl(r);
    // Queued here, or handed to a pool whose cluster has not started it yet.
    const bool held = r.state == run::RunState::kStarting && !daemon_.WaitingWhy(r.id).empty();
    if (whole && (r.state == run::RunState::kQueued || held)) {
      j["waiting"] = daemon_.WaitingWhy(r.id);
      j["waiting_text"] = BothLanguages(j["waiting"].get<std::string>());
      j["waiting_on"] = daemon_.WaitingOn(r.id);
    }
    if (whole && r.kind == run::RunKind::kNotebook) j["notebook"] = daemon_.NotebookJson(r);
    arr.push_back(std::move(j));
  }
  call.Reply(Json{{"runs", arr}, {"total", total}, {"total_all", total_all}});
}

// 201 with the run; a replay of an earlier request with the same
// Idempotency-Key is 201 too, with the run as it is now and
// "Idempotent-Replayed: true".
void ApiServer::PostRun(ApiCall& call) {
  auto key = IdempotencyKeyOf(call.req);
  if (!key.ok()) return call.Reply(key.status());
  auto body = run::ParseSpecJson(call.req.body);  // a number out of range names its field
  if (!body.ok()) return call.Reply(body.status());
  auto r = daemon_.Submit(call.caller, *body, *key);
  if (!r.ok()) return call.Reply(r.status());
  net::HttpResponse out = JsonResponse(201, state::RunToJson(r->run));
  if (r->replayed) out.headers.emplace_back("Idempotent-Replayed", "true");
  call.Send(std::move(out));
}

void ApiServer::GetRun(ApiCall& call) {
  auto r = daemon_.Access(call.caller, call.Param("run"), daemon::AccessAction::kRead);
  if (!r.ok()) return call.Reply(r.status());
  Json j = state::RunToJson(*r);
  if (!call.caller.admin && call.caller.uid != r->uid) {
    if (auto reach = daemon_.sharing().ReachOf(call.caller); reach.ok()) MarkShared(j, *reach, *r);
  }
  // Queued here, or handed to a pool whose cluster has not started it yet.
  const bool held = r->state == run::RunState::kStarting && !daemon_.WaitingWhy(r->id).empty();
  if (r->state == run::RunState::kQueued || held) {
    j["waiting"] = daemon_.WaitingWhy(r->id);
    j["waiting_text"] = BothLanguages(j["waiting"].get<std::string>());
    j["waiting_on"] = daemon_.WaitingOn(r->id);
  }
  if (!r->reason.empty()) j["reason_text"] = BothLanguages(r->reason);
  AddWhereItRuns(*r, j);
  j["endpoints"] = daemon_.EndpointsJson(*r);
  if (r->kind == run::RunKind::kNotebook) j["notebook"] = daemon_.NotebookJson(*r);
  if (!r->spec.ports.empty()) j["ports"] = PortsJson(*r);
  auto events = daemon_.Events(r->id, 0);
  if (events.ok()) j["events"] = EventsJson(*events);
  call.Reply(j);
}

void ApiServer::StopRun(ApiCall& call) {
  auto r = daemon_.StopRun(call.caller, call.Param("run"));
  if (!r.ok()) return call.Reply(r.status());
  Json j = state::RunToJson(*r);
  if (!call.caller.admin && call.caller.uid != r->uid) daemon::HideEnvValues(j);
  call.Reply(j, 202);
}

// POST /runs/{run}/restart: an ended notebook is queued again.
void ApiServer::RestartRun(ApiCall& call) {
  auto r = daemon_.RestartRun(call.caller, call.Param("run"));
  if (!r.ok()) return call.Reply(r.status());
  Json j = state::RunToJson(*r);
  if (!call.caller.admin && call.caller.uid != r->uid) daemon::HideEnvValues(j);
  call.Reply(j, 202);
}

// A finished run goes; ?snapshots=1 takes its snapshots with it.
void ApiServer::DeleteRun(ApiCall& call) {
  call.Reply(
      daemon_.DeleteRun(call.caller, call.Param("run"), Truthy(call.req.QueryParam("snapshots"))));
}

// Body {older_than, user, all_users, dry_run, snapshots}: the finished runs
// that ended at least `older_than` ago go (the caller's; an admin's choice of
// user or everyone's).
void ApiServer::PruneRuns(ApiCall& call) {
  auto body = ParseJson(call.req.body.empty() ? "{}" : call.req.body);
  if (!body.ok()) return call.Reply(body.status());
  auto req = ParsePruneRequest(*body, call.caller);
  if (!req.ok()) return call.Reply(req.status());
  call.Reply(daemon_.PruneRuns(call.caller, *req));
}

// ?after=ID: the events after that one; ?follow=1: server-sent events until
// the run has finished.
void ApiServer::GetRunEvents(ApiCall& call) {
  auto r = daemon_.Access(call.caller, call.Param("run"), daemon::AccessAction::kRead);
  if (!r.ok()) return call.Reply(r.status());
  auto after = QueryNumber(call.req, "after", 0, INT64_MAX);
  if (!after.ok()) return call.Reply(after.status());
  if (!Truthy(call.req.QueryParam("follow"))) {
    auto events = daemon_.Events(r->id, *after);
    if (!events.ok()) return call.Reply(events.status());
    return call.Reply(Json{{"events", EventsJson(*events)}});
  }
  std::shared_ptr<net::ResponseStream> s = net::StartEventStream(*call.res);
  call.res.reset();
  StartStreamThread([this, id = r->id, after = *after, s, auth = call.auth] {
    FollowEvents(id, after, auth, *s);
  });
}

}  // namespace lathe::api
