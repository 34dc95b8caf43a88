// lathe run | ps | logs | stop | inspect
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "cmd/commands.h"
#include "cmd/output.h"
#include "lathe/api/client.h"
#include "lathe/api/credentials.h"
#include "lathe/common/units.h"
#include "lathe/doctor/checks_network.h"
#include "lathe/doctor/probes.h"
#include "lathe/doctor/real_system.h"
#include "lathe/net/http.h"
#include "lathe/os/files.h"
#include "lathe/os/process.h"
#include "lathe/run/event_text.h"
#include "lathe/run/ports.h"
#include "lathe/run/spec.h"
#include "lathe/run/workspace_spec.h"

namespace lathe::cmd {
namespace {

struct RunFlags {
  std::string file;
  std::optional<int> gpus;
  std::optional<double> cpus;
  std::string memory, shm, priority, name, workdir, max_duration, network, pool, project;
  std::string profile, gpu_type;  // a profile of the daemon's config; flags win over it
  std::string image;              // one of the user's images (lathe image ls)
  std::string image_secret;       // the registry's user:password, for a pull while queued
  std::string like;               // a run whose spec is the base (its image id included)
  std::string workspace;          // a git URL or repository path (#ref), or a directory
  std::vector<std::string> env;
  std::vector<std::string> secrets;       // names; the daemon puts in the values
  std::vector<std::string> secret_files;  // names given as files
  std::vector<std::string> ports;         // "8888", "tb=6006", "web=/abs/web.sock"
  std::optional<int> retry;
  std::string checkpoint_dir, resume_from;
  std::optional<int> keep_checkpoints;
  std::optional<int> nodes;
  bool torchrun = false;
  std::optional<bool> nccl_ib;
  std::string nccl_socket_ifname;
  bool follow = false;
  bool json = false;  // the run as {"id", "name", "state"}; with --follow, its log as JSON lines
  std::vector<std::string> command;
};

std::string Cwd() { return ShellCwd(); }

// One --port value as a spec ports entry: "8888" -> 8888, "tb=6006" ->
// {name, port}, "web=/abs/web.sock" -> {name, socket}. The daemon checks
// the values (a port out of range, a bad name), naming the field.
Json PortFlag(const std::string& v) {
  size_t eq = v.find('=');
  std::string name = eq == std::string::npos ? "" : v.substr(0, eq);
  std::string what = eq == std::string::npos ? v : v.substr(eq + 1);
  Json e = Json::object();
  if (!name.empty()) e["name"] = name;
  if (!what.empty() && what[0] == '/') {
    e["socket"] = what;
  } else if (!what.empty() && what.find_first_not_of("0123456789") == std::string::npos &&
             what.size() <= 5) {
    e["port"] = std::stoi(what);
  } else {
    e["port"] = what;  // refused by the daemon as "must be a whole number from 1 to 65535"
  }
  return name.empty() && e.contains("port") && e["port"].is_number() ? e["port"] : e;
}

// Builds the spec JSON: the file (if any), then flags on top. Relative paths
// are resolved against this shell's working directory now.
// Appends the flags' names to the spec's list `key`, each once.
void AddNames(Json& spec, const char* key, const std::vector<std::string>& names) {
  if (names.empty()) return;
  if (!spec.contains(key) || !spec[key].is_array()) spec[key] = Json::array();
  for (const auto& name : names) {
    if (std::find(spec[key].begin(), spec[key].end(), name) == spec[key].end())
      spec[key].push_back(name);
  }
}

// A bare git repository (nothing to work in): cloned, where a directory
// with a work tree is used in place.
bool IsBareRepository(const std::string& path) {
  return os::Exists(path + "/HEAD") && os::Exists(path + "/objects") &&
         os::Exists(path + "/refs") && !os::Exists(path + "/.git");
}

// The spec's workspace as the daemon gets it: a relative path made absolute
// against `base`, a local path looked at here (as the submitting user) to
// tell a repository to clone from a directory to work in, and the object
// form sent. The daemon checks the rest, naming the field.
Status ResolveWorkspace(Json& ws, const std::string& base) {
  auto absolute = [&](const std::string& p) {
    std::filesystem::path path = p;
    return (path.is_relative() ? std::filesystem::path(base) / path : path)
        .lexically_normal()
        .string();
  };
  if (ws.is_object() && ws.contains("dir") && ws["dir"].is_string()) {
    ws["dir"] = absolute(ws["dir"].get<std::string>());
  }
  if (!ws.is_string()) return Status::OK();
  std::string text = ws.get<std::string>();
  if (!text.empty() && text[0] != '/' && text.find("://") == std::string::npos &&
      !run::ParseWorkspaceString(text, "workspace").ok()) {
    text = absolute(text);  // a relative path (a URL or user@host:path parses as it is)
  }
  if (!text.empty() && text[0] == '/') {
    std::string path = text.substr(0, text.find('#'));
    if (!os::Exists(path)) {
      return Status::Msg(Code::kInvalidArgument, "workspace.missing_dir", {{"value", path}});
    }
  }
  ASSIGN_OR_RETURN(run::WorkspaceSpec w,
                   run::ParseWorkspaceString(text, "workspace", IsBareRepository));
  ws = run::WorkspaceToJson(w);
  return Status::OK();
}

// `base` (--like: another run's spec, as stored) under the file's fields
// and the flags.
Result<Json> BuildSpec(const RunFlags& f, const Json& like = Json::object()) {
  Json spec = like.is_object() ? like : Json::object();
  if (!f.file.empty()) {
    // At most one byte more than a spec may have: /dev/zero must not fill memory.
    ASSIGN_OR_RETURN(std::string text, os::ReadFileUpTo(f.file, run::kMaxSpecFileBytes));
    ASSIGN_OR_RETURN(Json file, run::YamlSpecToJson(text, f.file));
    if (file.contains("image")) spec.erase("image_id");  // the base's id was for its image
    spec.update(file);
  }
  if (f.gpus) spec["gpus"] = *f.gpus;
  if (f.cpus) spec["cpus"] = *f.cpus;
  if (!f.memory.empty()) spec["memory"] = f.memory;
  if (!f.shm.empty()) spec["shm"] = f.shm;
  if (!f.network.empty()) spec["network"] = f.network;
  if (!f.pool.empty()) spec["pool"] = f.pool;
  if (!f.project.empty()) {
    spec["project"] = f.project;
  } else if (!spec.contains("project")) {
    if (std::string p = api::DefaultProject(); !p.empty()) spec["project"] = p;
  }
  if (!f.profile.empty()) spec["profile"] = f.profile;
  if (!f.image.empty()) {
    spec["image"] = f.image;
    spec.erase("image_id");  // a spec file's recorded id was for its own image
  }
  if (!f.image_secret.empty()) spec["image_secret"] = f.image_secret;
  if (!f.gpu_type.empty()) spec["gpu_type"] = f.gpu_type;
  if (f.nodes) spec["nodes"] = *f.nodes;
  if (f.torchrun) spec["torchrun"] = true;
  if (f.nccl_ib || !f.nccl_socket_ifname.empty()) {
    if (!spec.contains("nccl") || !spec["nccl"].is_object()) spec["nccl"] = Json::object();
    if (f.nccl_ib) spec["nccl"]["ib"] = *f.nccl_ib;
    if (!f.nccl_socket_ifname.empty()) spec["nccl"]["socket_ifname"] = f.nccl_socket_ifname;
  }
  if (!f.priority.empty()) spec["priority"] = f.priority;
  if (!f.name.empty()) spec["name"] = f.name;
  if (!f.max_duration.empty()) spec["max_duration"] = f.max_duration;
  if (f.retry) spec["retry"] = *f.retry;
  if (!f.command.empty()) spec["command"] = f.command;
  if (!f.workdir.empty()) spec["workdir"] = f.workdir;
  std::string base =
      f.file.empty() ? Cwd() : std::filesystem::absolute(f.file).parent_path().string();
  if (!f.workspace.empty()) spec["workspace"] = f.workspace;
  // With a workspace, a relative workdir is inside it, and none means its root.
  const bool workspace = spec.contains("workspace") && !spec["workspace"].is_null();
  if (workspace)
    RETURN_IF_ERROR(ResolveWorkspace(spec["workspace"], f.workspace.empty() ? base : Cwd()));
  if (spec.contains("workdir") && spec["workdir"].is_string()) {
    std::filesystem::path w = spec["workdir"].get<std::string>();
    if (w.is_relative() && !workspace)
      spec["workdir"] =
          (std::filesystem::path(f.workdir.empty() ? base : Cwd()) / w).lexically_normal().string();
  } else if (!workspace) {
    spec["workdir"] = Cwd();
  }
  if (!f.checkpoint_dir.empty()) {
    std::filesystem::path d = f.checkpoint_dir;  // a flag is relative to this shell
    if (!spec.contains("checkpoints") || !spec["checkpoints"].is_object())
      spec["checkpoints"] = Json::object();
    spec["checkpoints"]["dir"] =
        (d.is_relative() ? std::filesystem::path(Cwd()) / d : d).lexically_normal().string();
  }
  if (f.keep_checkpoints) {
    if (!spec.contains("checkpoints") || !spec["checkpoints"].is_object())
      spec["checkpoints"] = Json::object();
    spec["checkpoints"]["keep"] = *f.keep_checkpoints;
  }
  if (!f.resume_from.empty()) spec["resume_from"] = f.resume_from;
  AddNames(spec, "secrets", f.secrets);
  AddNames(spec, "secret_files", f.secret_files);
  for (const auto& p : f.ports) {
    if (!spec.contains("ports") || !spec["ports"].is_array()) spec["ports"] = Json::array();
    spec["ports"].push_back(PortFlag(p));
  }
  RETURN_IF_ERROR(AddShellDefaults(spec, f.env));
  return spec;
}

struct LogsFlags {
  std::string ref;
  bool follow = false, timestamps = false;
  bool json = false;  // JSON lines: {"line"} ({"time", "line"} with --timestamps)
  std::optional<std::string> tail, grep, offset, limit;
};

// "&tail=10&grep=..." for the flags given; the daemon checks the values.
std::string LogsQuery(const LogsFlags& f) {
  std::string q;
  for (const auto& [name, value] : {std::pair{"tail", &f.tail}, std::pair{"grep", &f.grep},
                                    std::pair{"offset", &f.offset}, std::pair{"limit", &f.limit}}) {
    if (*value) q += std::string("&") + name + "=" + net::PercentEncode(**value);
  }
  return q;
}

// One line of a run's log as a JSON line: {"line"}, or {"time", "line"}
// when it starts with its time (--timestamps).
void PrintJsonLine(std::string_view line, bool timestamps) {
  Json j = Json::object();
  if (timestamps) {
    const size_t space = line.find(' ');
    j["time"] = std::string(line.substr(0, space));
    line = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
  }
  j["line"] = std::string(line);
  std::printf("%s\n", j.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
}

Status FollowLogs(api::ApiClient& c, const std::string& id, bool timestamps,
                  const std::string& query = "", bool json = false) {
  std::string path =
      "/api/v1/runs/" + id + "/logs?follow=1" + (timestamps ? "&timestamps=1" : "") + query;
  Status ended = Status::OK();  // an `error` event: the daemon ended the stream
  Status s = c.Stream(path, [&ended, json, timestamps](const std::string& event, const Json& data) {
    if (event == "log") {
      std::string line = data.value("line", "");
      if (json) {
        PrintJsonLine(line, timestamps);
      } else {
        std::fwrite(line.data(), 1, line.size(), stdout);
        std::fputc('\n', stdout);
      }
      std::fflush(stdout);
    }
    if (event == "error") ended = StatusFromJson(data, Code::kPermissionDenied);
    return event != "end" && event != "error";
  });
  return s.ok() ? ended : s;
}

// What the knowledge base recognised in a failed run's log (its diagnosis
// events); false when there is none.
bool PrintDiagnosis(const Json& run, Lang lang, FILE* out = stdout) {
  bool any = false;
  for (const auto& e : run["events"]) {
    if (e.value("type", "") != "diagnosis") continue;
    for (const auto& m : e["data"]["matches"]) {
      auto text = [&](const char* k) {
        if (!m.contains(k) || !m[k].is_object()) return std::string();
        return PickText(m[k].value("en", ""), m[k].value("zh", ""), lang);
      };
      any = true;
      std::fprintf(out, "%s %s\n", Tr("inspect.diagnosis", lang).c_str(), text("title").c_str());
      std::fprintf(out, "  %s\n",
                   Tr("inspect.diagnosis_line", lang,
                      {{"n", std::to_string(m.value("line_no", 0))},
                       {"line", m.value("line", "").substr(0, 200)}})
                       .c_str());
      std::fprintf(out, "  %s\n  %s\n  $ %s\n  %s\n", text("scenario").c_str(),
                   text("cause").c_str(), m.value("verify", "").c_str(), text("fix").c_str());
    }
  }
  return any;
}

// The spec of run `ref` as a new run's base: the same command, resources,
// environment and image id (the same bytes, wherever the image's name points
// now); not its name, which may still be in use.
Result<Json> LikeSpec(const std::string& ref) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Get("/api/v1/runs/" + net::PercentEncode(ref)));
  Json spec = r.value("spec", Json::object());
  for (const char* drop : {"name", "deployment"}) spec.erase(drop);
  return spec;
}

Status RunRun(const RunFlags& f, Lang lang) {
  Json like = Json::object();
  if (!f.like.empty()) {
    ASSIGN_OR_RETURN(like, LikeSpec(f.like));
  }
  ASSIGN_OR_RETURN(Json spec, BuildSpec(f, like));
  // Validate here too, so bad input fails fast even without a daemon.
  RETURN_IF_ERROR(run::SpecFromJson(spec).status());
  ASSIGN_OR_RETURN(auto c, ConnectToSubmit(lang));
  ASSIGN_OR_RETURN(Json r, c->SubmitRun(spec, [lang](const Status& why) {
    std::fprintf(stderr, "%s\n", Tr("cli.submit_retry", lang, {{"reason", why.message()}}).c_str());
  }));
  std::string id = r.value("id", "");
  if (!f.follow && f.json) {
    PrintJson(Json{{"id", id}, {"name", r.value("name", "")}, {"state", r.value("state", "")}});
    return Status::OK();
  }
  if (!f.follow) {
    std::printf("%s\n", id.c_str());
    return Status::OK();
  }
  std::fprintf(stderr, "%s\n", Tr("run.submitted", lang, {{"run", id}}).c_str());
  RETURN_IF_ERROR(FollowLogs(*c, id, false, "", f.json));
  ASSIGN_OR_RETURN(Json fin, c->Get("/api/v1/runs/" + id));
  std::string state = fin.value("state", "");
  std::string reason = fin.value("reason", "");
  std::fprintf(stderr, "%s\n",
               Tr(reason.empty() ? "run.ended_plain" : "run.ended", lang,
                  {{"run", id},
                   {"state", run::StateLabel(state, lang)},
                   {"reason", run::ReasonText(reason, lang)}})
                   .c_str());
  if (state != "succeeded") {
    PrintDiagnosis(fin, lang, stderr);
    std::fprintf(stderr, "%s\n", Tr("run.see_inspect", lang, {{"run", id}}).c_str());
  }
  if (state == "succeeded") return Status::OK();
  return Status::Msg(Code::kInternal, "run.not_succeeded", {{"run", id}, {"state", state}});
}

// A notebook's command is Jupyter with its kernels: "jupyter (python, r)".
std::string NotebookCommandText(const Json& spec, Lang lang) {
  std::string kernels;
  for (const auto& k : spec.value("kernels", Json::array()))
    kernels += (kernels.empty() ? "" : ", ") + k.get<std::string>();
  return Tr("ps.notebook_command", lang, {{"kernels", kernels}});
}

std::string GpuList(const Json& r, Lang lang) {
  std::string s;
  for (const auto& g : r["gpus"]) s += (s.empty() ? "" : ",") + std::to_string(g.get<int>());
  const Json& asked = r.contains("spec") ? r["spec"] : r["resources"];
  if (!s.empty()) return "[" + s + "]";
  std::string n = std::to_string(asked.value("gpus", 0));
  return r["state"] == "queued" ? Tr("ps.gpus_waiting", lang, {{"n", n}}) : n;
}

// "normal" → "普通"; a value the catalog does not know as it is.
std::string PriorityLabel(const std::string& p, Lang lang) {
  return Catalog::Default().Has("priority." + p) ? Tr("priority." + p, lang) : p;
}

Status RunPs(bool all, int limit, bool json, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  // Without --all, runs that ended a moment ago are shown too: a run that
  // failed at once would otherwise leave an empty table.
  // At most the ten newest of them: after a burst of short runs the table
  // stays a table, and the line below counts the rest.
  constexpr int kRecentS = 300, kRecentLimit = 10;
  ASSIGN_OR_RETURN(Json r, c->Get("/api/v1/runs?limit=" + std::to_string(limit) +
                                  (all ? "&all=1"
                                       : "&recent=" + std::to_string(kRecentS) +
                                             "&recent_limit=" + std::to_string(kRecentLimit))));
  if (json) {
    PrintJson(r["runs"]);
    return Status::OK();
  }
  std::vector<std::vector<std::string>> rows(1);
  for (const char* col : {"id", "name", "user", "state", "gpus", "priority", "age", "command"}) {
    rows[0].push_back(Tr(std::string("ps.col.") + col, lang));
  }
  // The main port's URL, in a column of its own when a listed run serves one.
  const bool urls = std::any_of(r["runs"].begin(), r["runs"].end(),
                                [](const Json& run) { return run.contains("url"); });
  if (urls) rows[0].insert(rows[0].end() - 1, Tr("ps.col.url", lang));
  // A thousand rows name a handful of states and priorities: each label is
  // looked up in the catalog once.
  std::map<std::string, std::string> states, priorities;
  auto memo = [](std::map<std::string, std::string>& m, const std::string& key, auto&& make) {
    auto it = m.find(key);
    return it != m.end() ? it->second : m.emplace(key, make(key)).first->second;
  };
  for (const auto& run : r["runs"]) {
    std::string cmd;
    if (run.value("redacted", false)) cmd = "-";  // another user's: the daemon does not say
    if (run.contains("spec")) {
      for (const auto& a : run["spec"]["command"])
        cmd += (cmd.empty() ? "" : " ") + a.get<std::string>();
      if (run.value("kind", "") == "notebook") cmd = NotebookCommandText(run["spec"], lang);
    }
    if (cmd.size() > 40) cmd = cmd.substr(0, 37) + "...";
    std::string state = memo(states, run.value("state", ""),
                             [&](const std::string& k) { return run::StateLabel(k, lang); });
    if (run.contains("exit_code") && run["exit_code"].is_number() &&
        run.value("state", "") == "failed") {
      state = Tr("ps.state_exit", lang,
                 {{"state", state}, {"code", std::to_string(run["exit_code"].get<int>())}});
    }
    if (run.value("waiting_on", "") == "quota") {  // `lathe inspect` says which limit
      state = Tr("ps.state_quota", lang, {{"state", state}});
    }
    rows.push_back({run.value("id", ""), run.value("name", ""), run.value("user", ""), state,
                    GpuList(run, lang),
                    memo(priorities, run.value("priority", ""),
                         [&](const std::string& k) { return PriorityLabel(k, lang); }),
                    Age(run.value("created_at_ms", int64_t{0}), lang), cmd});
    if (urls) rows.back().insert(rows.back().end() - 1, run.value("url", "-"));
  }
  // Who shared a run with the caller (or which project), when a listed run is shared.
  AddSharedColumn(rows, r["runs"], 3, lang);
  PrintTable(rows);
  int64_t total = r.value("total", int64_t{0});
  if (total > static_cast<int64_t>(r["runs"].size())) {
    std::fprintf(stderr, "%s\n",
                 Tr("ps.truncated", lang,
                    {{"shown", std::to_string(r["runs"].size())}, {"total", std::to_string(total)}})
                     .c_str());
  }
  int64_t hidden = r.value("total_all", total) - total;
  if (!all && hidden > 0) {
    std::fprintf(
        stderr, "%s\n",
        Tr("ps.ended_hidden", lang,
           {{"hidden", std::to_string(hidden)}, {"minutes", std::to_string(kRecentS / 60)}})
            .c_str());
  }
  return Status::OK();
}

Status RunLogs(const LogsFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Get("/api/v1/runs/" + f.ref));
  std::string id = r.value("id", f.ref);
  if (f.follow) return FollowLogs(*c, id, f.timestamps, LogsQuery(f), f.json);
  net::Headers headers;
  std::string partial;  // --json: a line split across chunks
  RETURN_IF_ERROR(c->GetStream(
      "/api/v1/runs/" + id + "/logs?timestamps=" + (f.timestamps ? "1" : "0") + LogsQuery(f),
      [&f, &partial](std::string_view chunk) {
        if (!f.json) return std::fwrite(chunk.data(), 1, chunk.size(), stdout) == chunk.size();
        partial.append(chunk);
        size_t from = 0, nl;
        while ((nl = partial.find('\n', from)) != std::string::npos) {
          PrintJsonLine(std::string_view(partial).substr(from, nl - from), f.timestamps);
          from = nl + 1;
        }
        partial.erase(0, from);
        return true;
      },
      &headers));
  if (f.json && !partial.empty()) PrintJsonLine(partial, f.timestamps);
  std::fflush(stdout);
  std::string_view next = net::FindHeader(headers, "X-Lathe-Next-Offset");
  if (!next.empty())
    std::fprintf(stderr, "%s\n",
                 Tr("logs.next_offset", lang, {{"next", std::string(next)}}).c_str());
  return Status::OK();
}

Status RunStop(const std::string& ref, bool json, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Post("/api/v1/runs/" + ref + "/stop", Json::object()));
  if (json) {
    PrintJson(Json{{"id", r.value("id", ref)}, {"state", r.value("state", "")}});
    return Status::OK();
  }
  std::printf("%s\n", Tr("run.stopping", lang,
                         {{"run", r.value("id", ref)}, {"state", r.value("state", "")}})
                          .c_str());
  return Status::OK();
}

// The spec, one field per line: the command as a shell would show it, the
// environment by name (a long PATH by its number of entries).
void PrintSpec(const Json& spec, Lang lang) {
  constexpr size_t kWidth = 14;  // "max_duration: " and the labels of the other languages
  auto label = [&](const std::string& key) {
    std::string id = "inspect.spec." + key;
    return "  " + Label(Catalog::Default().Has(id) ? Tr(id, lang) : key + ":", kWidth);
  };
  const Json command = spec.value("command", Json::array());
  const Json environment = spec.value("env", Json::object());
  std::string cmd;
  for (const auto& a : command) {
    std::string arg = a.get<std::string>();
    bool plain = !arg.empty() && arg.find_first_of(" \t\n'\"\\$`*?;&|<>()") == std::string::npos;
    cmd += (cmd.empty() ? "" : " ") + (plain ? arg : "'" + arg + "'");
  }
  std::printf("%s\n%s%s\n", Tr("inspect.spec", lang).c_str(), label("command").c_str(),
              cmd.c_str());
  std::string env;
  for (const auto& [k, v] : environment.items()) {
    std::string val = v.get<std::string>();
    if (k == "PATH" && val.size() > 40) {
      val = Tr("inspect.path_entries", lang,
               {{"n", std::to_string(std::count(val.begin(), val.end(), ':') + 1)}});
    }
    env += (env.empty() ? "" : " ") + k + "=" + val;
  }
  if (!env.empty()) std::printf("%s%s\n", label("env").c_str(), env.c_str());
  for (const auto& [k, v] : spec.items()) {
    if (k == "command" || k == "env" || k == "name") continue;
    std::string text = v.is_string() ? v.get<std::string>() : v.dump();
    if (k == "umask" && v.is_number_unsigned()) text = fmt::format("{:03o}", v.get<unsigned>());
    if (k == "priority" && v.is_string()) text = PriorityLabel(text, lang);
    std::printf("%s%s\n", label(k).c_str(), text.c_str());
  }
}

std::string Join(const Json& list) {
  std::string s;
  for (const auto& x : list) {
    if (x.is_string()) s += (s.empty() ? "" : ", ") + x.get<std::string>();
  }
  return s.empty() ? "-" : s;
}

// The run's ports (GET /runs/{run} "ports"): each with its URL, address
// and whether something answers there; the layer that keeps one from
// answering in full (docs/ports.md); once, what a loopback port means.
void PrintPorts(const Json& r, Lang lang) {
  const Json ports = r.value("ports", Json::array());
  if (ports.empty()) return;
  std::printf("%s\n", Tr("inspect.ports", lang).c_str());
  bool loopback = false;
  for (const auto& p : ports) {
    const std::string state = p.value("state", "");
    const std::string address = p.value("address", "");
    std::string label =
        Tr("ports.state." + state, lang,
           {{"listening", Join(p.value("listening", Json::array()))},
            {"uid", p.contains("error") ? p["error"].value("args", Json::object()).value("uid", "")
                                        : std::string()}});
    std::printf("%s\n", Tr("inspect.port_line", lang,
                           {{"name", p.value("name", "")},
                            {"url", p.value("url", "")},
                            {"address", address.empty() ? "-" : address},
                            {"env", p.value("env", "")},
                            {"state", label}})
                            .c_str());
    if (p.contains("error") && state != "not_running") {
      std::printf("    %s\n",
                  Localize(StatusFromJson(p["error"], Code::kUnavailable), lang).c_str());
    }
    loopback = loopback || (p.value("kind", "") == "tcp" && address.starts_with("127.0.0.1:"));
  }
  if (loopback && r["spec"].value("network", "host") != "isolated") {
    std::printf("  %s\n", Tr("ports.loopback_note", lang).c_str());
  }
  auto view = doctor::NewRealSystemView({});
  doctor::Finding proxy = doctor::CheckProxy(*view, doctor::Facts{});
  if (proxy.outcome == "net.proxy.captures_localhost") {
    MsgArgs args = proxy.args;
    args.push_back({"doctor", std::string(run::kProxyCheckCommand)});
    std::printf("  %s\n", Tr("ports.client_proxy", lang, args).c_str());
  }
}

// A notebook's readiness and idleness, and how to open it.
std::string NotebookLine(const Json& r, Lang lang) {
  const Json& nb = r["notebook"];
  auto dur = [](int64_t ms) { return FormatDuration(std::chrono::milliseconds(ms)); };
  const int64_t limit = nb.value("idle_limit_ms", int64_t{0});
  std::string idle = nb.contains("idle_for_ms") ? dur(nb.value("idle_for_ms", int64_t{0})) : "-";
  return Tr("inspect.notebook_value", lang,
            {{"ready", Tr(nb.value("ready", false) ? "notebook.ls.yes" : "notebook.ls.no", lang)},
             {"idle", idle},
             {"limit", limit > 0 ? Tr("inspect.notebook_limit", lang, {{"limit", dur(limit)}})
                                 : Tr("notebook.ls.never", lang)},
             {"run", r.value("id", "")}});
}

// The run's workspace: where it came from, what was checked out, where.
std::string WorkspaceLine(const Json& w, Lang lang) {
  std::string ref = w.value("ref", "");
  if (ref.empty()) ref = Tr("workspace.default_branch", lang);
  std::string commit = w.value("commit", "");
  std::string text;
  if (w.value("in_place", false)) {
    text = Tr("inspect.workspace_in_place", lang, {{"dir", w.value("dir", "")}});
    if (!commit.empty()) text += " (" + commit + ")";
  } else if (!commit.empty()) {
    text = Tr("inspect.workspace_value", lang,
              {{"source", w.value("source", "")},
               {"ref", ref},
               {"commit", commit},
               {"dir", w.value("dir", "")}});
  } else {
    text = Tr(w.contains("error") ? "inspect.workspace_failed" : "inspect.workspace_pending", lang,
              {{"source", w.value("source", "")}, {"ref", ref}});
  }
  if (w.value("readonly", false)) text += ", " + Tr("inspect.readonly", lang);
  return text;
}

Status RunInspect(const std::string& ref, bool json, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Get("/api/v1/runs/" + ref));
  if (json) {
    PrintJson(r);
    return Status::OK();
  }
  constexpr size_t kWidth = 11;  // "exit code: "
  auto field = [&](const char* id, const std::string& value) {
    std::printf("%s%s\n", Label(Tr(id, lang), kWidth).c_str(), value.c_str());
  };
  field("inspect.id", r.value("id", ""));
  field("inspect.name", r.value("name", ""));
  field("inspect.user", r.value("user", ""));
  field("inspect.state", run::StateLabel(r.value("state", ""), lang));
  if (!r.value("reason", "").empty())
    field("inspect.reason", run::ReasonText(r.value("reason", ""), lang));
  if (!r.value("waiting", "").empty())
    field("inspect.waiting", run::ReasonText(r.value("waiting", ""), lang));
  field("inspect.gpus", GpuList(r, lang));
  if (const std::string pool = r.value("backend", ""); !pool.empty() && pool != "local") {
    const std::string job = r.contains("handle") ? r["handle"].value("job_id", "") : "";
    field("inspect.pool",
          job.empty() ? pool : Tr("inspect.pool_job", lang, {{"pool", pool}, {"job", job}}));
  }
  if (r["exit_code"].is_number())
    field("inspect.exit_code", std::to_string(r["exit_code"].get<int>()));
  if (r["signal"].is_number()) field("inspect.signal", std::to_string(r["signal"].get<int>()));
  if (r.value("oom_killed", false)) field("inspect.oom", Tr("run.oom_killed", lang));
  field("inspect.attempts", Tr("inspect.attempts_value", lang,
                               {{"attempt", std::to_string(r.value("attempt", 0))},
                                {"restarts", std::to_string(r.value("restarts", 0))},
                                {"preemptions", std::to_string(r.value("preemptions", 0))}}));
  field("inspect.created", AgeAgo(r.value("created_at_ms", int64_t{0}), lang));
  if (r.contains("workspace") && r["workspace"].is_object())
    field("inspect.workspace", WorkspaceLine(r["workspace"], lang));
  if (r.contains("notebook") && r["notebook"].is_object())
    field("inspect.notebook", NotebookLine(r, lang));
  PrintSpec(r["spec"], lang);
  field("inspect.run_dir", r.value("run_dir", ""));
  PrintPorts(r, lang);
  PrintDiagnosis(r, lang);
  std::printf("%s\n", Tr("inspect.events", lang).c_str());
  constexpr size_t kTypeWidth = 8;  // "warning "
  for (const auto& e : r["events"]) {
    std::printf("  %s  %s%s\n", AgeAgo(e.value("ts_ms", int64_t{0}), lang).c_str(),
                Label(run::EventTypeLabel(e.value("type", ""), lang), kTypeWidth).c_str(),
                run::EventText(e, lang).c_str());
  }
  return Status::OK();
}

}  // namespace

std::string ShellCwd() { return os::CurrentDir().value_or("/"); }

Json PortFlagJson(const std::string& value) { return PortFlag(value); }

Result<std::unique_ptr<api::ApiClient>> ConnectToSubmit(Lang lang) {
  return api::ApiClient::ConnectWaiting([lang](const Status& why) {
    MsgArgs args = why.args();  // cli.daemon_unreachable's: where, reason
    args.push_back({"seconds", std::to_string(api::ApiClient::kRestartWaitMs / 1000)});
    std::fprintf(stderr, "%s\n", Tr("cli.daemon_wait", lang, args).c_str());
  });
}

Status AddShellDefaults(Json& spec, const std::vector<std::string>& env_flags) {
  if (!spec.contains("env") || !spec["env"].is_object()) {
    if (!spec.contains("env")) spec["env"] = Json::object();
  }
  for (const auto& kv : env_flags) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::Msg(Code::kInvalidArgument, "cli.bad_env", {{"value", kv}});
    }
    spec["env"][kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  // Like a command started from this shell, the run creates files with its umask.
  if (!spec.contains("umask")) {
    spec["umask"] = os::CurrentUmask();
  }
  // Like sbatch, the run sees the submitting shell's PATH unless told
  // otherwise; a run in an image gets the image's (this shell's names paths
  // of the host).
  const bool in_image = spec.contains("image") && spec["image"].is_string();
  if (spec["env"].is_object() && !spec["env"].contains("PATH") && std::getenv("PATH") &&
      !in_image) {
    spec["env"]["PATH"] = std::getenv("PATH");
  }
  return Status::OK();
}

Status LogsOfRun(const std::string& ref, bool follow, Lang lang) {
  LogsFlags f;
  f.ref = ref;
  f.follow = follow;
  return RunLogs(f, lang);
}

Status StopOfRun(const std::string& ref, bool json, Lang lang) { return RunStop(ref, json, lang); }

Status ResolveWorkspaceFlag(Json& ws, const std::string& base) {
  return ResolveWorkspace(ws, base);
}

void SetupRun(CLI::App& app, Globals& g, Status& status) {
  static RunFlags f;
  auto* run = app.add_subcommand("run");
  run->add_option("-f,--file", f.file);
  run->add_option("--gpus", f.gpus);
  run->add_option("--cpus", f.cpus);
  run->add_option("--memory", f.memory);
  run->add_option("--shm", f.shm);
  run->add_option("--priority", f.priority);
  run->add_option("--name", f.name);
  // One value per --env: a vector option would take every following word,
  // and CLI11 ends such a list at `--` by consuming it, so `--env A=1 -- sh -c x`
  // handed `-c` to the option parser.
  run->add_option("--env", f.env)->allow_extra_args(false);
  run->add_option("--secret", f.secrets)->allow_extra_args(false);
  run->add_option("--secret-file", f.secret_files)->allow_extra_args(false);
  run->add_option("--port", f.ports)->allow_extra_args(false);
  run->add_option("--network", f.network);  // host | isolated; the daemon checks it
  run->add_option("--pool", f.pool);        // a pool of the daemon's config, or local
  run->add_option("--project", f.project);  // lathe project ls
  run->add_option("--profile", f.profile);  // a profile of the daemon's config
  run->add_option("--image", f.image);
  run->add_option("--image-secret", f.image_secret);
  run->add_option("--like", f.like);
  run->add_option("--gpu-type", f.gpu_type);
  run->add_option("--nodes", f.nodes);  // nodes per attempt; --gpus is per node
  run->add_flag("--torchrun", f.torchrun);
  run->add_option("--nccl-ib", f.nccl_ib);  // true | false
  run->add_option("--nccl-socket-ifname", f.nccl_socket_ifname);
  run->add_option("--workdir", f.workdir);
  run->add_option("--workspace", f.workspace);
  run->add_option("--retry", f.retry);
  run->add_option("--max-duration", f.max_duration);
  run->add_option("--checkpoint-dir", f.checkpoint_dir);
  run->add_option("--keep-checkpoints", f.keep_checkpoints);
  run->add_option("--resume-from", f.resume_from);
  run->add_flag("--follow", f.follow);
  run->add_flag("--json", f.json);
  run->add_option("command", f.command);
  run->callback([&status, &g] { status = RunRun(f, g.Language()); });

  static bool all = false, json = false;
  static int limit = 1000;
  auto* ps = app.add_subcommand("ps");
  ps->add_flag("-a,--all", all);
  ps->add_option("-n,--limit", limit);
  ps->add_flag("--json", json);
  ps->callback([&status, &g] { status = RunPs(all, limit, json, g.Language()); });

  static std::string ref;
  static LogsFlags lf;
  auto* logs = app.add_subcommand("logs");
  logs->add_option("run", lf.ref)->required();
  logs->add_flag("-f,--follow", lf.follow);
  logs->add_flag("-t,--timestamps", lf.timestamps);
  logs->add_option("--tail", lf.tail);
  logs->add_option("--grep", lf.grep);
  logs->add_option("--offset", lf.offset);
  logs->add_option("--limit", lf.limit);
  logs->add_flag("--json", lf.json);
  logs->callback([&status, &g] { status = RunLogs(lf, g.Language()); });

  static bool stop_json = false;
  auto* stop = app.add_subcommand("stop");
  stop->add_option("run", ref)->required();
  stop->add_flag("--json", stop_json);
  stop->callback([&status, &g] { status = RunStop(ref, stop_json, g.Language()); });

  static bool ijson = false, imetrics = false;
  auto* inspect = app.add_subcommand("inspect");
  inspect->add_option("run", ref)->required();
  inspect->add_flag("--json", ijson);
  inspect->add_flag("--metrics", imetrics);
  inspect->callback([&status, &g] {
    status =
        imetrics ? InspectMetrics(ref, ijson, g.Language()) : RunInspect(ref, ijson, g.Language());
  });
}

}  // namespace lathe::cmd
