// lathe deploy create | ls | show | update | promote | scale | logs | rm |
// key: deployments (docs/deployments.md). The rules are the daemon's
// (daemon/deployments.h); this file parses, calls and prints.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "cmd/commands.h"
#include "cmd/output.h"
#include "lathe/api/client.h"
#include "lathe/api/credentials.h"
#include "lathe/common/units.h"
#include "lathe/net/http.h"
#include "lathe/os/files.h"
#include "lathe/run/event_text.h"
#include "lathe/run/spec.h"

namespace lathe::cmd {
namespace {

struct DeployFlags {
  std::string name, file, model, autoscale, gpus, cpus, memory, priority, canary, timeout = "5m";
  std::string key_name, expires, key_id, replica, ready, workdir, batching, device;
  std::string image;                      // a command deployment's: one of the owner's images
  std::string profile;                    // a profile of the daemon's config; flags win over it
  std::string project;                    // create: the project it belongs to (docs/sharing.md)
  std::vector<std::string> command, env;  // a command deployment's
  int replicas = -1;                      // -1: not given
  int port = -1;                          // -1: not given
  bool is_public = false, json = false, wait = false, follow = false;
};

std::string Path(const std::string& name) {
  return "/api/v1/deployments/" + net::PercentEncode(name);
}

// Who made a change the daemon answered (`changed_by`): the caller, who may
// be another than the owner (a share, a project).
std::string ChangedBy(const Json& d) { return d.value("changed_by", d.value("owner", "")); }

// An error of the daemon's whose English `detail` (another error's text)
// has its Chinese beside it (`detail_zh`): in the reader's language.
Status InReadersLanguage(Status s, Lang lang) {
  if (s.ok() || lang != Lang::kZh) return s;
  MsgArgs args = s.args();
  auto zh =
      std::find_if(args.begin(), args.end(), [](const MsgArg& a) { return a.key == "detail_zh"; });
  if (zh == args.end()) return s;
  for (MsgArg& a : args) {
    if (a.key == "detail") a.value = zh->value;
  }
  return Status::Msg(s.code(), s.msg_id(), std::move(args));
}

// "1..4" or "0..3": {min, max}.
Result<Json> AutoscaleFlag(const std::string& v) {
  auto dots = v.find("..");
  auto bad = [&] {
    return Status::Msg(Code::kInvalidArgument, "deploy.bad_autoscale_flag", {{"value", v}});
  };
  if (dots == std::string::npos) return bad();
  std::string lo = v.substr(0, dots), hi = v.substr(dots + 2);
  auto digits = [](const std::string& s) {
    return !s.empty() && s.size() <= 3 && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (!digits(lo) || !digits(hi)) return bad();
  return Json{{"min", std::stoi(lo)}, {"max", std::stoi(hi)}};
}

// The command line as a person reads it.
std::string CommandLine(const Json& command) {
  std::string line;
  for (const auto& a : command) {
    std::string w = a.is_string() ? a.get<std::string>() : a.dump();
    if (w.empty() || w.find_first_of(" \t'\"$") != std::string::npos) w = "'" + w + "'";
    line += (line.empty() ? "" : " ") + w;
  }
  return line;
}

// What a deployment serves, from its JSON: its model, or its command.
std::string Serves(const Json& d) {
  const Json command = d.value("command", Json::array());
  return command.empty() ? d.value("model", "") : CommandLine(command);
}

// "max_batch_size=8,max_queue_delay=2ms" as the spec's batching object (the
// daemon checks the values).
Result<Json> BatchingFlag(const std::string& v) {
  Json b = Json::object();
  size_t start = 0;
  while (start <= v.size()) {
    size_t comma = v.find(',', start);
    std::string part =
        v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t eq = part.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::Msg(Code::kInvalidArgument, "deploy.bad_batching_flag", {{"value", v}});
    }
    std::string key = part.substr(0, eq), value = part.substr(eq + 1);
    bool number = !value.empty() && value.size() <= 9 &&
                  value.find_first_not_of("0123456789") == std::string::npos;
    if (number) {
      b[key] = std::stoi(value);
    } else {
      b[key] = value;
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return b;
}

Status AddFlags(const DeployFlags& f, Json& body) {
  if (!f.model.empty()) body["model"] = f.model;
  if (!f.command.empty()) body["command"] = f.command;
  if (f.port >= 0) body["port"] = f.port;
  if (!f.ready.empty()) body["ready"] = f.ready;
  if (!f.image.empty()) body["image"] = f.image;
  if (!f.workdir.empty()) {
    std::filesystem::path w = f.workdir;
    body["workdir"] = w.is_absolute()
                          ? f.workdir
                          : (std::filesystem::path(ShellCwd()) / w).lexically_normal().string();
  }
  if (!f.env.empty()) {
    Json env = Json::object();
    for (const auto& e : f.env) {
      const size_t eq = e.find('=');
      if (eq == std::string::npos || eq == 0) {
        return Status::Msg(Code::kInvalidArgument, "cli.bad_env", {{"value", e}});
      }
      env[e.substr(0, eq)] = e.substr(eq + 1);
    }
    body["env"] = env;
  }
  if (f.replicas >= 0) body["replicas"] = f.replicas;
  if (!f.autoscale.empty()) {
    ASSIGN_OR_RETURN(body["autoscale"], AutoscaleFlag(f.autoscale));
  }
  if (!f.gpus.empty()) {
    if (f.gpus.find_first_not_of("0123456789") != std::string::npos || f.gpus.size() > 4) {
      return Status::Msg(Code::kInvalidArgument, "spec.wrong_type",
                         {{"field", "gpus"}, {"type", "whole number"}});
    }
    body["gpus"] = std::stoi(f.gpus);
  }
  if (!f.cpus.empty()) {
    char* end = nullptr;
    double c = std::strtod(f.cpus.c_str(), &end);
    if (end == f.cpus.c_str() || *end != '\0') {
      return Status::Msg(Code::kInvalidArgument, "spec.bad_cpus", {{"value", f.cpus}});
    }
    body["cpus"] = c;
  }
  if (!f.memory.empty()) body["memory"] = f.memory;
  if (!f.profile.empty()) body["profile"] = f.profile;
  if (!f.priority.empty()) body["priority"] = f.priority;
  if (!f.canary.empty()) body["canary"] = f.canary;
  if (!f.batching.empty()) {
    ASSIGN_OR_RETURN(body["batching"], BatchingFlag(f.batching));
  }
  if (!f.device.empty()) body["device"] = f.device;
  if (f.is_public) body["public"] = true;
  return Status::OK();
}

// The catalog text of id with the args of a JSON object {name: value}.
std::string TrJson(const std::string& id, const Json& args, Lang lang) {
  return Tr(id, lang, run::ArgsWithReasons(args, lang));
}

// "healthy (2 of 2 replica(s) … ready)", in the reader's language.
std::string HealthText(const Json& d, Lang lang) {
  const std::string health = d.value("health", "");
  std::string word = health.empty() ? "" : Tr("deploy.state." + health, lang);
  std::string reason = d.value("reason", "");
  if (d.contains("reason_id") && d["reason_id"].is_string() &&
      !d["reason_id"].get<std::string>().empty()) {
    reason =
        TrJson(d["reason_id"].get<std::string>(), d.value("reason_args", Json::object()), lang);
  }
  return reason.empty() ? word : word + " (" + reason + ")";
}

void PrintSummary(const Json& d, Lang lang) {
  auto field = [&](const char* id, const std::string& value) {
    std::printf("%s%s\n", Label(Tr(id, lang), 12).c_str(), value.empty() ? "-" : value.c_str());
  };
  field("deploy.field_name", d.value("name", ""));
  field(d.value("command", Json::array()).empty() ? "deploy.field_model" : "deploy.field_command",
        Serves(d));
  // What serves, and what the spec (an alias) says when that differs.
  const std::string serving = d.value("version", ""), wanted = d.value("wanted", serving);
  if (!serving.empty()) field("deploy.field_serving", serving);
  if (!wanted.empty() && wanted != serving) {
    const Json rb = d.value("rolled_back", Json());
    field("deploy.field_wanted", rb.is_object()
                                     ? Tr("deploy.wanted_rolled_back", lang,
                                          {{"wanted", wanted},
                                           {"serving", serving},
                                           {"model", d.value("model", "")},
                                           {"reason", rb.value("reason", "")}})
                                     : Tr("deploy.wanted_rolling", lang, {{"wanted", wanted}}));
  }
  field("deploy.field_health", HealthText(d, lang));
  const Json& r = d["replicas"];
  std::string replicas = std::to_string(r.value("ready", 0)) + "/" +
                         std::to_string(r.value("wanted", 0)) + " " + Tr("deploy.ready", lang);
  const Json spec = d.value("spec", Json::object());
  if (const Json a = spec.value("autoscale", Json()); a.is_object()) {
    replicas += " (" +
                Tr("deploy.autoscale_bounds", lang,
                   {{"min", a.value("min", Json(0)).dump()},
                    {"max", a.value("max", Json(0)).dump()},
                    {"target", a.value("target", Json(0)).dump()}}) +
                ")";
  }
  field("deploy.field_replicas", replicas);
  if (!spec.value("image", "").empty()) {
    field("deploy.field_image",
          spec.value("image", "") + " (" + spec.value("image_id", "").substr(0, 12) + ")");
  }
  const std::string url = d.value("url", "");
  field("deploy.field_url",
        url.empty() ? Tr("deploy.url_pending", lang, {{"name", d.value("name", "")}}) : url);
  field("deploy.field_access",
        Tr(d.value("public", false) ? "deploy.public" : "deploy.keyed", lang));
  if (!d.value("curl", "").empty()) std::printf("\n  %s\n", d.value("curl", "").c_str());
}

Status RunCreate(const DeployFlags& f, Lang lang);

Status WaitReady(api::ApiClient& c, const std::string& name, const std::string& timeout, Lang lang,
                 Json& last) {
  ASSIGN_OR_RETURN(auto t, ParseDuration(timeout));
  auto deadline = std::chrono::steady_clock::now() + t;
  while (true) {
    ASSIGN_OR_RETURN(last, c.Get(Path(name)));
    const Json& r = last["replicas"];
    const bool routed = last.value("routed", false);
    if (routed && r.value("ready", 0) >= r.value("wanted", 0) &&
        (r.value("wanted", 0) > 0 || last.value("health", "") == "scaled_to_zero")) {
      return Status::OK();
    }
    if (last.value("health", "") == "failed") {
      return Status::Msg(Code::kFailedPrecondition, "deploy.failed_to_start",
                         {{"name", name}, {"reason", last.value("reason", "")}});
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Status::Msg(Code::kDeadlineExceeded, "deploy.wait_timeout",
                         {{"name", name},
                          {"timeout", timeout},
                          {"ready", std::to_string(r.value("ready", 0))},
                          {"wanted", std::to_string(r.value("wanted", 0))}});
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  (void)lang;  // the wait prints nothing of its own; the caller says the outcome
}

Status RunCreate(const DeployFlags& f, Lang lang) {
  Json body = Json::object();
  if (!f.file.empty()) {
    ASSIGN_OR_RETURN(std::string text, os::ReadFileUpTo(f.file, run::kMaxSpecFileBytes));
    ASSIGN_OR_RETURN(body, run::YamlSpecToJson(text, f.file));
  }
  if (!f.name.empty()) body["name"] = f.name;
  RETURN_IF_ERROR(AddFlags(f, body));
  // The project as `lathe run` takes it: the flag, the file's, else the default.
  if (!f.project.empty()) {
    body["project"] = f.project;
  } else if (!body.contains("project")) {
    if (std::string p = api::DefaultProject(); !p.empty()) body["project"] = p;
  }
  ASSIGN_OR_RETURN(auto c, ConnectToSubmit(lang));
  auto created = c->Post("/api/v1/deployments", body);
  if (!created.ok()) return InReadersLanguage(created.status(), lang);
  Json d = *std::move(created);
  if (f.wait) RETURN_IF_ERROR(WaitReady(*c, d.value("name", ""), f.timeout, lang, d));
  if (f.json) {
    PrintJson(d);
    return Status::OK();
  }
  std::printf("%s\n", Tr("deploy.created", lang,
                         {{"name", d.value("name", "")},
                          {"model", Serves(d)},
                          {"version", d.value("version", "")},
                          {"user", ChangedBy(d)}})
                          .c_str());
  PrintSummary(d, lang);
  if (!d.value("public", false))
    std::printf("  %s\n", Tr("deploy.key_hint", lang, {{"name", d.value("name", "")}}).c_str());
  return Status::OK();
}

Status RunList(const DeployFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Get("/api/v1/deployments"));
  if (f.json) {
    PrintJson(r["deployments"]);
    return Status::OK();
  }
  if (r["deployments"].empty()) {
    std::printf("%s\n", Tr("deploy.none", lang).c_str());
    return Status::OK();
  }
  std::vector<std::vector<std::string>> rows = {
      {Tr("deploy.col_name", lang), Tr("deploy.col_owner", lang), Tr("deploy.col_version", lang),
       Tr("deploy.col_replicas", lang), Tr("deploy.col_health", lang), Tr("deploy.col_rps", lang),
       Tr("deploy.col_p99", lang), Tr("deploy.col_url", lang)}};
  for (const auto& d : r["deployments"]) {
    const Json& rep = d["replicas"];
    char rps[32] = "-", p99[32] = "-";
    if (d.contains("rps")) std::snprintf(rps, sizeof rps, "%.1f", d["rps"].get<double>());
    if (d.contains("p99_ms")) std::snprintf(p99, sizeof p99, "%.1f ms", d["p99_ms"].get<double>());
    rows.push_back(
        {d.value("name", ""), d.value("owner", ""),
         d.value("version", "").empty() ? "-" : d.value("version", ""),
         std::to_string(rep.value("ready", 0)) + "/" + std::to_string(rep.value("wanted", 0)),
         d.value("health", "").empty() ? "-" : Tr("deploy.state." + d.value("health", ""), lang),
         rps, p99, d.value("url", "")});
  }
  // Who shared a listed deployment with the caller (or which project), when one is.
  AddSharedColumn(rows, r["deployments"], 2, lang);
  PrintTable(rows);
  return Status::OK();
}

Status RunShow(const DeployFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json d, c->Get(Path(f.name)));
  ASSIGN_OR_RETURN(Json ev, c->Get(Path(f.name) + "/events"));
  if (f.json) {
    d["events"] = ev["events"];
    PrintJson(d);
    return Status::OK();
  }
  PrintSummary(d, lang);
  std::printf("\n");
  std::vector<std::vector<std::string>> rows = {
      {Tr("deploy.col_replica", lang), Tr("deploy.col_version", lang), Tr("deploy.col_state", lang),
       Tr("deploy.col_healthy", lang), Tr("deploy.col_gpus", lang),
       Tr("deploy.col_in_flight", lang), Tr("deploy.col_queued", lang),
       Tr("deploy.col_requests", lang)}};
  // The live replicas; those that ended (a rollout's, a crash's) are counted.
  int ended = 0;
  for (const auto& r : d["replicas"]["list"]) {
    if (run::IsTerminal(
            run::StateFromName(r.value("state", "")).value_or(run::RunState::kQueued))) {
      ++ended;
      continue;
    }
    std::string gpus;
    for (const auto& g : r["gpus"]) gpus += (gpus.empty() ? "" : ",") + g.dump();
    rows.push_back(
        {r.value("run", ""), r.value("version", ""), run::StateLabel(r.value("state", ""), lang),
         Tr(r.value("healthy", false) ? "model.yes" : "model.no", lang), gpus.empty() ? "-" : gpus,
         std::to_string(r.value("in_flight", 0)),
         // The replica's own queue depth; "-" when it reports none (a command's program).
         r.contains("queued") ? std::to_string(r.value("queued", 0)) : "-",
         std::to_string(r.value("requests", 0))});
  }
  PrintTable(rows);
  if (ended > 0) {
    std::printf("%s\n", Tr("deploy.replicas_ended", lang,
                           {{"n", std::to_string(ended)}, {"name", d.value("name", "")}})
                            .c_str());
  }
  if (d.contains("requests")) {
    std::printf("\n%s\n", Tr("deploy.stats", lang,
                             {{"requests", d["requests"].dump()},
                              {"errors", d.value("errors", Json(0)).dump()},
                              {"rps", d.value("rps", Json(0)).dump()},
                              {"p50", d.value("p50_ms", Json(0)).dump()},
                              {"p99", d.value("p99_ms", Json(0)).dump()}})
                              .c_str());
  }
  std::printf("\n%s\n", Tr("deploy.events", lang).c_str());
  const Json& events = ev["events"];
  size_t from = events.size() > 15 ? events.size() - 15 : 0;
  for (size_t i = from; i < events.size(); ++i) {
    const Json& e = events[i];
    std::string text = e.value("msg_id", "").empty()
                           ? e.value("message", "")
                           : TrJson(e.value("msg_id", ""), e.value("args", Json::object()), lang);
    std::printf("  %s  %s %s\n", AgeAgo(e.value("ts_ms", int64_t{0}), lang).c_str(),
                Tr("deploy.level." + e.value("level", "info"), lang).c_str(), text.c_str());
  }
  return Status::OK();
}

Status RunUpdate(const DeployFlags& f, Lang lang) {
  Json body = Json::object();
  RETURN_IF_ERROR(AddFlags(f, body));
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  auto updated = c->Patch(Path(f.name), body);
  if (!updated.ok()) return InReadersLanguage(updated.status(), lang);
  const Json d = *std::move(updated);
  if (f.json) {
    PrintJson(d);
    return Status::OK();
  }
  std::printf("%s\n", Tr("deploy.updated", lang,
                         {{"name", d.value("name", "")},
                          {"model", Serves(d)},
                          {"version", d.value("version", "")},
                          {"user", ChangedBy(d)}})
                          .c_str());
  return Status::OK();
}

Status RunPromote(const DeployFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json d, c->Patch(Path(f.name), Json{{"promote", true}}));
  std::printf("%s\n", Tr("deploy.promoted", lang, {{"user", ChangedBy(d)}}).c_str());
  return Status::OK();
}

Status RunScale(const DeployFlags& f, Lang lang) {
  if (f.replicas < 0 && f.autoscale.empty()) {
    return Status::Msg(Code::kInvalidArgument, "deploy.scale_needs_count");
  }
  return RunUpdate(f, lang);
}

Status RunLogs(const DeployFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json d, c->Get(Path(f.name)));
  const Json& list = d["replicas"]["list"];
  std::string run;
  if (!f.replica.empty()) {
    // K (1-based, in the order `lathe deploy show` lists them) or a run id.
    bool index = f.replica.find_first_not_of("0123456789") == std::string::npos;
    for (size_t i = 0; i < list.size(); ++i) {
      if ((index && std::to_string(i + 1) == f.replica) || list[i].value("run", "") == f.replica) {
        run = list[i].value("run", "");
      }
    }
    if (run.empty()) {
      return Status::Msg(Code::kNotFound, "deploy.no_replica",
                         {{"name", f.name}, {"replica", f.replica}});
    }
  } else {
    for (const auto& r : list) {
      if (run.empty() || r.value("state", "") == "running") run = r.value("run", "");
    }
    if (run.empty())
      return Status::Msg(Code::kNotFound, "deploy.no_replica",
                         {{"name", f.name}, {"replica", "-"}});
  }
  return LogsOfRun(run, f.follow, lang);
}

Status RunRemove(const DeployFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json d, c->Delete(Path(f.name)));
  if (f.json) {
    PrintJson(d);
    return Status::OK();
  }
  std::printf("%s\n", Tr("deploy.removing_now", lang, {{"name", f.name}}).c_str());
  return Status::OK();
}

Status RunKeyCreate(const DeployFlags& f, Lang lang) {
  Json body = Json::object();
  if (!f.key_name.empty()) body["name"] = f.key_name;
  if (!f.expires.empty()) body["expires"] = f.expires;
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json k, c->Post(Path(f.name) + "/keys", body));
  if (f.json) {
    PrintJson(k);
    return Status::OK();
  }
  std::printf("%s\n", k.value("key", "").c_str());
  std::fprintf(
      stderr, "%s\n",
      Tr("deploy.key_created", lang, {{"id", k.value("id", "")}, {"name", f.name}}).c_str());
  return Status::OK();
}

Status RunKeyList(const DeployFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Get(Path(f.name) + "/keys"));
  if (f.json) {
    PrintJson(r["keys"]);
    return Status::OK();
  }
  std::vector<std::vector<std::string>> rows = {
      {Tr("deploy.col_key", lang), Tr("deploy.col_name", lang), Tr("deploy.col_created", lang),
       Tr("deploy.col_expires", lang)}};
  for (const auto& k : r["keys"]) {
    rows.push_back({k.value("id", ""), k.value("name", "").empty() ? "-" : k.value("name", ""),
                    AgeAgo(k.value("created_at_ms", int64_t{0}), lang),
                    !k.contains("expires_at_ms") || !k["expires_at_ms"].is_number() ||
                            k["expires_at_ms"].get<int64_t>() == 0
                        ? "-"
                        : FormatUtc(k["expires_at_ms"].get<int64_t>())});
  }
  PrintTable(rows);
  return Status::OK();
}

Status RunKeyRemove(const DeployFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Delete(Path(f.name) + "/keys/" + net::PercentEncode(f.key_id)));
  std::printf("%s\n", Tr("deploy.key_revoked", lang, {{"id", f.key_id}, {"name", f.name}}).c_str());
  return Status::OK();
}

// Sets a subcommand's callback: fn with the parsed flags, its Status kept for main.
struct Binder {
  Globals& g;
  Status& status;
  DeployFlags& f;
  void operator()(CLI::App* sub, Status (*fn)(const DeployFlags&, Lang)) const {
    sub->callback([&s = status, &g = g, &f = f, fn] { s = fn(f, g.Language()); });
  }
};

// The flags `create` and `update` share: what runs and with what.
void AddResourceFlags(CLI::App* sub, DeployFlags& f) {
  sub->add_option("--model", f.model);
  sub->add_option("--replicas", f.replicas);
  sub->add_option("--autoscale", f.autoscale);
  sub->add_option("--gpus", f.gpus);
  sub->add_option("--cpus", f.cpus);
  sub->add_option("--memory", f.memory);
  sub->add_option("--profile", f.profile);
  sub->add_option("--priority", f.priority);
  sub->add_option("--canary", f.canary);
  sub->add_option("--batching", f.batching);
  sub->add_option("--device", f.device);
  sub->add_option("--port", f.port);
  sub->add_option("--ready", f.ready);
  // One value per --env (see lathe run's).
  sub->add_option("--env", f.env)->allow_extra_args(false);
  sub->add_option("--workdir", f.workdir);
  sub->add_option("--image", f.image);
  sub->add_flag("--public", f.is_public);
  sub->add_flag("--json", f.json);
}

// create, update, promote, scale, rm.
void AddChangeCommands(CLI::App* deploy, DeployFlags& f, const Binder& bind) {
  auto* create = deploy->add_subcommand("create");
  create->add_option("name", f.name);
  create->add_option("-f,--file", f.file);
  create->add_option("--project", f.project);  // lathe project ls
  AddResourceFlags(create, f);
  create->add_flag("--wait", f.wait);
  create->add_option("--timeout", f.timeout);
  create->add_option("command", f.command);  // after --: a command deployment's program
  bind(create, RunCreate);

  auto* update = deploy->add_subcommand("update");
  update->add_option("name", f.name)->required();
  AddResourceFlags(update, f);
  update->add_option("command", f.command);
  bind(update, RunUpdate);

  auto* promote = deploy->add_subcommand("promote");
  promote->add_option("name", f.name)->required();
  bind(promote, RunPromote);

  auto* scale = deploy->add_subcommand("scale");
  scale->add_option("name", f.name)->required();
  scale->add_option("replicas", f.replicas);
  scale->add_option("--autoscale", f.autoscale);
  scale->add_flag("--json", f.json);
  bind(scale, RunScale);

  auto* rm = deploy->add_subcommand("rm");
  rm->add_option("name", f.name)->required();
  rm->add_flag("--json", f.json);
  bind(rm, RunRemove);
}

// ls, show, logs.
void AddViewCommands(CLI::App* deploy, DeployFlags& f, const Binder& bind) {
  auto* ls = deploy->add_subcommand("ls");
  ls->add_flag("--json", f.json);
  bind(ls, RunList);

  auto* show = deploy->add_subcommand("show");
  show->add_option("name", f.name)->required();
  show->add_flag("--json", f.json);
  bind(show, RunShow);

  auto* logs = deploy->add_subcommand("logs");
  logs->add_option("name", f.name)->required();
  logs->add_option("--replica", f.replica);
  logs->add_flag("-f,--follow", f.follow);
  bind(logs, RunLogs);
}

// key create|ls|rm.
void AddKeyCommands(CLI::App* deploy, DeployFlags& f, const Binder& bind) {
  auto* key = deploy->add_subcommand("key");
  key->require_subcommand(1);
  auto* kc = key->add_subcommand("create");
  kc->add_option("name", f.name)->required();
  kc->add_option("--name", f.key_name);
  kc->add_option("--expires", f.expires);
  kc->add_flag("--json", f.json);
  bind(kc, RunKeyCreate);
  auto* kl = key->add_subcommand("ls");
  kl->add_option("name", f.name)->required();
  kl->add_flag("--json", f.json);
  bind(kl, RunKeyList);
  auto* kr = key->add_subcommand("rm");
  kr->add_option("name", f.name)->required();
  kr->add_option("id", f.key_id)->required();
  bind(kr, RunKeyRemove);
}

}  // namespace

void SetupDeploy(CLI::App& app, Globals& g, Status& status) {
  static DeployFlags f;
  auto* deploy = app.add_subcommand("deploy");
  deploy->require_subcommand(1);
  Binder bind{g, status, f};
  AddChangeCommands(deploy, f, bind);
  AddViewCommands(deploy, f, bind);
  AddKeyCommands(deploy, f, bind);
}

}  // namespace lathe::cmd
