// lathe notebook start | ls | open | stop | restart | logs (docs/notebooks.md):
// a notebook is a run of type notebook; these are the run commands in a
// notebook's words, plus --wait (ready means Jupyter answers through the
// proxy) and restart.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "cmd/commands.h"
#include "cmd/output.h"
#include "lathe/api/client.h"
#include "lathe/api/credentials.h"
#include "lathe/common/units.h"
#include "lathe/net/http.h"
#include "lathe/net/http_client.h"
#include "lathe/run/event_text.h"
#include "lathe/run/spec.h"

namespace lathe::cmd {
namespace {

struct StartFlags {
  std::optional<int> gpus;
  std::optional<double> cpus;
  std::string memory, shm, priority, name, workspace, idle, max_duration, checkpoint_dir, network;
  std::string profile;  // a profile of the daemon's config; flags win over it
  std::string image;    // one of the user's images: its own Jupyter serves the notebook
  std::string project;  // "" = the user's default (api::DefaultProject)
  std::string timeout;  // --wait at most this long ("": no limit)
  std::vector<std::string> kernels, ports, env;
  bool wait = false, browser = false, json = false;
};

std::string Cwd() { return ShellCwd(); }

std::string Absolute(const std::string& p) {
  return p.empty() || p[0] == '/' ? p : Cwd() + "/" + p;
}

Result<Json> NotebookSpec(const StartFlags& f) {
  Json spec = {{"type", "notebook"}, {"env", Json::object()}};
  if (!f.workspace.empty()) {  // Jupyter's root is then the workspace's
    spec["workspace"] = f.workspace;
    RETURN_IF_ERROR(ResolveWorkspaceFlag(spec["workspace"], Cwd()));
  } else {
    spec["workdir"] = Cwd();
  }
  if (f.gpus) spec["gpus"] = *f.gpus;
  if (f.cpus) spec["cpus"] = *f.cpus;
  for (auto [key, value] :
       {std::pair{"memory", &f.memory}, std::pair{"shm", &f.shm},
        std::pair{"priority", &f.priority}, std::pair{"name", &f.name},
        std::pair{"max_duration", &f.max_duration}, std::pair{"network", &f.network},
        std::pair{"profile", &f.profile}, std::pair{"image", &f.image}}) {
    if (!value->empty()) spec[key] = *value;
  }
  if (std::string p = f.project.empty() ? api::DefaultProject() : f.project; !p.empty()) {
    spec["project"] = p;
  }
  if (!f.idle.empty()) spec["idle"] = f.idle == "0" ? Json(0) : Json(f.idle);
  if (!f.kernels.empty()) spec["kernels"] = f.kernels;
  if (!f.checkpoint_dir.empty()) spec["checkpoints"] = {{"dir", Absolute(f.checkpoint_dir)}};
  for (const auto& p : f.ports) {
    if (!spec.contains("ports")) spec["ports"] = Json::array();
    spec["ports"].push_back(PortFlagJson(p));
  }
  RETURN_IF_ERROR(AddShellDefaults(spec, f.env));
  return spec;
}

// Jupyter answers /api/status through the proxy, as a browser would reach
// it: a one-time code of its own (POST /open), redeemed for the run
// origin's cookie. Over https (a CA of the user's own) the daemon's word is
// taken instead.
Status CheckThroughProxy(api::ApiClient& c, const std::string& id) {
  ASSIGN_OR_RETURN(Json open, c.Post("/api/v1/runs/" + id + "/open", Json::object()));
  const std::string login = open.value("login_url", "");
  if (!login.starts_with("http://")) return Status::OK();
  const std::string host = login.substr(7, login.find('/', 7) - 7);  // <run>.localhost:PORT
  const std::string port = host.substr(host.rfind(':') + 1);
  net::ClientOptions o;
  o.base_url = "http://127.0.0.1:" + port;
  net::HttpClient http(o);
  ASSIGN_OR_RETURN(auto signed_in,
                   http.Request("GET", login.substr(7 + host.size()), "", {{"Host", host}}));
  std::string cookie(net::FindHeader(signed_in.headers, "Set-Cookie"));
  cookie = cookie.substr(0, cookie.find(';'));
  ASSIGN_OR_RETURN(auto status,
                   http.Request("GET", "/api/status", "", {{"Host", host}, {"Cookie", cookie}}));
  if (status.status != 200) {
    return Status::Unavailable(fmt::format("GET /api/status through the proxy: HTTP {}: {}",
                                           status.status, status.body.substr(0, 200)));
  }
  return Status::OK();
}

// Why a queued notebook waits, in `lang` ("" when the daemon gives no reason).
std::string WaitingText(const Json& r, Lang lang) {
  const Json t = r.value("waiting_text", Json());
  if (t.is_object()) return PickText(t.value("en", ""), t.value("zh", ""), lang);
  return r.value("waiting", "");
}

// --timeout: how long --wait waits at most; 0 for no limit ("" or "0").
Result<std::chrono::milliseconds> WaitLimit(const std::string& timeout) {
  if (timeout.empty() || timeout == "0") return std::chrono::milliseconds{0};
  auto t = ParseDuration(timeout);
  if (!t.ok()) {
    return Status::Msg(Code::kInvalidArgument, "notebook.bad_timeout", {{"value", timeout}});
  }
  return *t;
}

// Until the notebook is ready (or has ended, which is an error saying why),
// at most `timeout` ("" or "0": no limit). While it is queued, the
// scheduler's reason is printed each time it changes, so a wait behind a
// quota or busy GPUs is never silent.
Status WaitReady(api::ApiClient& c, const std::string& id, const std::string& timeout, Lang lang) {
  ASSIGN_OR_RETURN(const std::chrono::milliseconds limit, WaitLimit(timeout));
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::string said;
  for (;;) {
    ASSIGN_OR_RETURN(Json r, c.Get("/api/v1/runs/" + id));
    const std::string state = r.value("state", "");
    const std::string why = state == "queued" ? WaitingText(r, lang) : "";
    if (!why.empty() && why != said) {
      std::fprintf(stderr, "%s\n",
                   Tr("notebook.waiting", lang, {{"run", id}, {"why", why}}).c_str());
    }
    if (!why.empty()) said = why;
    if (state == "succeeded" || state == "failed" || state == "stopped" || state == "lost" ||
        state == "preempted") {
      return Status::Msg(Code::kFailedPrecondition, "notebook.wait_failed",
                         {{"run", id},
                          {"state", run::StateLabel(state, lang)},
                          {"reason", run::ReasonText(r.value("reason", ""), lang)}});
    }
    const Json nb = r.value("notebook", Json::object());
    if (state == "running" && nb.is_object() && nb.value("ready", false)) {
      return CheckThroughProxy(c, id);
    }
    if (limit.count() > 0 && std::chrono::steady_clock::now() > deadline) {
      return Status::Msg(Code::kDeadlineExceeded, "notebook.wait_timeout",
                         {{"run", id},
                          {"timeout", FormatDuration(limit)},
                          {"state", run::StateLabel(state, lang)},
                          {"why", said.empty() ? run::StateLabel(state, lang) : said}});
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// The one-time link, printed (and opened with --browser).
Status PrintOpen(api::ApiClient& c, const std::string& id, bool browser, bool json, Lang lang) {
  ASSIGN_OR_RETURN(Json open, c.Post("/api/v1/runs/" + id + "/open", Json::object()));
  if (json) {
    PrintJson(open);
    return Status::OK();
  }
  const std::string url = open.value("login_url", open.value("url", ""));
  std::printf("%s\n", url.c_str());
  std::fprintf(stderr, "%s\n",
               Tr("notebook.url", lang,
                  {{"secs", std::to_string(open.value("code_expires_in_s", 60))}, {"url", url}})
                   .c_str());
  const size_t colon = url.rfind(':');
  const std::string port = url.substr(colon + 1, url.find('/', colon) - colon - 1);
  std::fprintf(stderr, "%s\n", Tr("notebook.tunnel_hint", lang, {{"port", port}}).c_str());
  if (browser && !OpenInBrowser(url).empty()) {
    std::fprintf(stderr, "%s\n", Tr("open.no_browser", lang).c_str());
  }
  return Status::OK();
}

// --timeout limits --wait: alone it would limit nothing, and is refused.
Status CheckTimeoutFlag(bool wait, const std::string& timeout) {
  if (!wait && !timeout.empty()) {
    return Status::Msg(Code::kInvalidArgument, "notebook.timeout_needs_wait", {{"value", timeout}});
  }
  return WaitLimit(timeout).status();
}

Status RunStart(const StartFlags& f, Lang lang) {
  // A bad --timeout is refused before anything is queued.
  RETURN_IF_ERROR(CheckTimeoutFlag(f.wait, f.timeout));
  ASSIGN_OR_RETURN(Json spec, NotebookSpec(f));
  RETURN_IF_ERROR(run::SpecFromJson(spec).status());
  ASSIGN_OR_RETURN(auto c, ConnectToSubmit(lang));
  ASSIGN_OR_RETURN(Json r, c->SubmitRun(spec, [lang](const Status& why) {
    std::fprintf(stderr, "%s\n", Tr("cli.submit_retry", lang, {{"reason", why.message()}}).c_str());
  }));
  const std::string id = r.value("id", "");
  if (!f.wait && f.json) {
    PrintJson(Json{{"id", id}, {"name", r.value("name", "")}, {"state", r.value("state", "")}});
    return Status::OK();
  }
  if (!f.wait) {
    std::printf("%s\n", id.c_str());
    return Status::OK();
  }
  std::fprintf(stderr, "%s\n", Tr("notebook.submitted", lang, {{"run", id}}).c_str());
  if (Status ready = WaitReady(*c, id, f.timeout, lang); !ready.ok()) {
    // --json: the notebook is queued all the same; its id goes with the error.
    if (f.json) PrintJsonError(ready, Json{{"id", id}, {"name", r.value("name", "")}});
    return ready;
  }
  return PrintOpen(*c, id, f.browser, f.json, lang);
}

Status RunRestart(const std::string& ref, bool wait, const std::string& timeout, Lang lang) {
  RETURN_IF_ERROR(CheckTimeoutFlag(wait, timeout));
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r,
                   c->Post("/api/v1/runs/" + net::PercentEncode(ref) + "/restart", Json::object()));
  const std::string id = r.value("id", ref);
  if (!wait) {
    std::printf("%s\n", id.c_str());
    return Status::OK();
  }
  RETURN_IF_ERROR(WaitReady(*c, id, timeout, lang));
  return PrintOpen(*c, id, false, false, lang);
}

std::string IdleText(const Json& nb, Lang lang) {
  if (!nb.is_object()) return "-";
  const int64_t limit = nb.value("idle_limit_ms", int64_t{0});
  if (!nb.contains("idle_for_ms")) return limit > 0 ? "-" : Tr("notebook.ls.never", lang);
  std::string idle = FormatDuration(std::chrono::milliseconds(nb.value("idle_for_ms", int64_t{0})));
  if (limit <= 0) return idle;
  return idle + "/" + FormatDuration(std::chrono::milliseconds(limit));
}

Status RunList(bool all, bool json, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  // Without --all: the active ones and those that ended in the last hour, so
  // that a notebook the idle stop just ended is still there, saying so.
  ASSIGN_OR_RETURN(Json list, c->Get(std::string("/api/v1/runs?limit=1000&kind=notebook") +
                                     (all ? "&all=1" : "&recent=3600")));
  Json mine = Json::array();
  for (const auto& r : list.value("runs", Json::array())) {
    if (r.value("kind", "") == "notebook" && r.contains("spec")) mine.push_back(r);
  }
  if (json) {
    // `stopped_by`: who stopped an ended notebook, as the table says it
    // ("idle": the idle stop; "user", "timeout", ...).
    for (auto& r : mine) {
      if (r.value("state", "") == "stopped" && r.contains("stop_intent")) {
        r["stopped_by"] = r["stop_intent"];
      }
    }
    PrintJson(Json{{"notebooks", mine}});
    return Status::OK();
  }
  // The run origins' scheme and port: the daemon's own (`lathe notebook open` adds the sign-in
  // code).
  std::string scheme = "http", port;
  if (auto st = c->Get("/api/v1/status"); st.ok()) {
    const std::string url = st->value("url", "");
    if (url.starts_with("https://")) scheme = "https";
    if (url.rfind(':') != std::string::npos) port = url.substr(url.rfind(':') + 1);
  }
  std::vector<std::vector<std::string>> rows = {
      {Tr("ps.col.id", lang), Tr("ps.col.name", lang), Tr("ps.col.state", lang),
       Tr("notebook.ls.col.ready", lang), Tr("notebook.ls.col.kernels", lang),
       Tr("notebook.ls.col.idle", lang), Tr("ps.col.gpus", lang), Tr("notebook.ls.col.url", lang)}};
  std::vector<std::string> idle_stopped;
  for (const auto& r : mine) {
    const Json nb = r.value("notebook", Json());
    std::string gpus;
    for (const auto& g : r.value("gpus", Json::array())) {
      gpus += (gpus.empty() ? "" : ",") + std::to_string(g.get<int>());
    }
    std::string kernels;
    for (const auto& k : r["spec"].value("kernels", Json::array())) {
      kernels += (kernels.empty() ? "" : ",") + k.get<std::string>();
    }
    const bool ready = nb.is_object() && nb.value("ready", false);
    const bool idle_stop =
        r.value("stop_intent", "") == "idle" && r.value("state", "") == "stopped";
    if (idle_stop) idle_stopped.push_back(r.value("id", ""));
    rows.push_back({r.value("id", ""), r.value("name", ""),
                    idle_stop ? Tr("notebook.ls.stopped_idle", lang)
                              : run::StateLabel(r.value("state", ""), lang),
                    Tr(ready ? "notebook.ls.yes" : "notebook.ls.no", lang), kernels,
                    IdleText(nb, lang), gpus.empty() ? "-" : gpus,
                    ready && !port.empty()
                        ? fmt::format("{}://{}.localhost:{}/", scheme, r.value("id", ""), port)
                        : "-"});
  }
  // Another user's notebook (shared, through a project, or root's view of
  // everyone's) says whose it is, and how it came.
  AddSharedColumn(rows, Json(mine), 2, lang);
  const bool others = std::any_of(mine.begin(), mine.end(), [&](const Json& r) {
    return r.contains("shared") || r.value("user", "") != mine[0].value("user", "");
  });
  if (others) {
    rows[0].insert(rows[0].begin() + 2, Tr("ps.col.user", lang));
    for (size_t i = 0; i < mine.size(); ++i) {
      rows[i + 1].insert(rows[i + 1].begin() + 2, mine[i].value("user", ""));
    }
  }
  PrintTable(rows);
  for (const auto& id : idle_stopped) {
    std::fprintf(stderr, "%s\n", Tr("notebook.ls.restart_hint", lang, {{"run", id}}).c_str());
  }
  if (mine.empty()) std::fprintf(stderr, "%s\n", Tr("notebook.ls.none", lang).c_str());
  return Status::OK();
}

}  // namespace

void SetupNotebook(CLI::App& app, Globals& g, Status& status) {
  auto* nb = app.add_subcommand("notebook");
  nb->require_subcommand(1);

  static StartFlags f;
  auto* start = nb->add_subcommand("start");
  start->add_option("--gpus", f.gpus);
  start->add_option("--project", f.project);
  start->add_option("--cpus", f.cpus);
  start->add_option("--memory", f.memory);
  start->add_option("--shm", f.shm);
  start->add_option("--profile", f.profile);
  start->add_option("--priority", f.priority);
  start->add_option("--name", f.name);
  start->add_option("--workspace", f.workspace);
  start->add_option("--kernel", f.kernels)->allow_extra_args(false);
  start->add_option("--idle", f.idle);
  start->add_option("--max-duration", f.max_duration);
  start->add_option("--checkpoint-dir", f.checkpoint_dir);
  start->add_option("--port", f.ports)->allow_extra_args(false);
  start->add_option("--env", f.env)->allow_extra_args(false);
  start->add_option("--network", f.network);
  start->add_option("--image", f.image);
  start->add_flag("--wait", f.wait);
  start->add_option("--timeout", f.timeout);
  start->add_flag("--browser", f.browser);
  start->add_flag("--json", f.json);
  start->callback([&status, &g] { status = RunStart(f, g.Language()); });

  static bool all = false, json = false;
  auto* ls = nb->add_subcommand("ls");
  ls->add_flag("-a,--all", all);
  ls->add_flag("--json", json);
  ls->callback([&status, &g] { status = RunList(all, json, g.Language()); });

  static std::string ref;
  static bool browser = false, ojson = false, wait = false, follow = false;
  static std::string restart_timeout;
  auto* open = nb->add_subcommand("open");
  open->add_option("run", ref)->required();
  open->add_flag("--browser", browser);
  open->add_flag("--json", ojson);
  open->callback([&status, &g] {
    auto c = api::ApiClient::Connect();
    status = c.ok() ? PrintOpen(**c, ref, browser, ojson, g.Language()) : c.status();
  });

  static bool stop_json = false;
  auto* stop = nb->add_subcommand("stop");
  stop->add_option("run", ref)->required();
  stop->add_flag("--json", stop_json);
  stop->callback([&status, &g] { status = StopOfRun(ref, stop_json, g.Language()); });

  auto* restart = nb->add_subcommand("restart");
  restart->add_option("run", ref)->required();
  restart->add_flag("--wait", wait);
  restart->add_option("--timeout", restart_timeout);
  restart->callback(
      [&status, &g] { status = RunRestart(ref, wait, restart_timeout, g.Language()); });

  auto* logs = nb->add_subcommand("logs");
  logs->add_option("run", ref)->required();
  logs->add_flag("-f,--follow", follow);
  logs->callback([&status, &g] { status = LogsOfRun(ref, follow, g.Language()); });
}

}  // namespace lathe::cmd
