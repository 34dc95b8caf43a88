// lathe daemon | up | down | status | __monitor
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "cmd/commands.h"
#include "cmd/output.h"
#include "lathe/api/client.h"
#include "lathe/api/server.h"
#include "lathe/common/log.h"
#include "lathe/common/units.h"
#include "lathe/daemon/config.h"
#include "lathe/daemon/daemon.h"
#include "lathe/deploy/gateway_control.h"
#include "lathe/exec/monitor.h"
#include "lathe/node/node.h"
#include "lathe/os/clock.h"
#include "lathe/os/files.h"
#include "lathe/os/process.h"
#include "lathe/run/event_text.h"
#include "lathe/run/spec.h"

namespace lathe::cmd {
namespace {

struct DaemonFlags {
  CLI::App* app = nullptr;  // to tell which flags were given
  std::string home;
  std::string gpus = "auto";
  std::string host = "127.0.0.1";
  int port = 0;
  bool port_fixed = false;  // --port or config.yaml's port: given, never the previous start's
  bool json = false;        // lathe up --json: {"started", "pid", "socket", "url"}
  std::string grace = "10s";
  std::string tls_cert, tls_key;                // --tls-cert/--tls-key, else config.yaml's tls
  std::vector<std::string> allowed_hosts;       // config.yaml only
  daemon::NotebookSettings notebooks;           // config.yaml only
  std::string deployments_listen;               // --deployments-listen, else config.yaml's
  std::string gateway_user;                     // config.yaml only
  std::optional<int> deployments_max_per_user;  // config.yaml only
  bool metrics_open_on_loopback = false;        // config.yaml only
  std::string telemetry_interval;               // --telemetry-interval, else config.yaml's
  daemon::TelemetrySettings telemetry;          // config.yaml
  // config.yaml: retry_backoff*, run_log_max, pools, default_pool, profiles
  daemon::DaemonConfig runs;
};

std::atomic<bool> g_shutdown{false};

// Fills the flags that were not given from <home>/config.yaml.
Status ApplyConfig(DaemonFlags& f) {
  daemon::HomePaths paths = daemon::DaemonHome(f.home);
  ASSIGN_OR_RETURN(daemon::DaemonConfig c, daemon::LoadDaemonConfig(paths.home + "/config.yaml"));
  auto given = [&](const char* name) { return f.app != nullptr && f.app->count(name) > 0; };
  if (c.gpus && !given("--gpus")) f.gpus = *c.gpus;
  if (c.host && !given("--host")) f.host = *c.host;
  if (c.port && !given("--port")) f.port = *c.port;
  f.port_fixed = given("--port") || c.port.has_value();
  if (c.grace && !given("--grace")) f.grace = *c.grace;
  if (c.allowed_hosts) f.allowed_hosts = *c.allowed_hosts;
  if (c.notebooks) f.notebooks = *c.notebooks;
  if (c.deployments && c.deployments->listen && !given("--deployments-listen")) {
    f.deployments_listen = *c.deployments->listen;
  }
  if (c.deployments && c.deployments->gateway_user) f.gateway_user = *c.deployments->gateway_user;
  if (c.deployments && c.deployments->max_per_user) {
    f.deployments_max_per_user = *c.deployments->max_per_user;
  }
  if (c.metrics && c.metrics->open_on_loopback) {
    f.metrics_open_on_loopback = *c.metrics->open_on_loopback;
  }
  if (c.telemetry) f.telemetry = *c.telemetry;
  f.runs.retention = c.retention;
  f.runs.quotas = c.quotas;
  f.runs.retry_backoff_ms = c.retry_backoff_ms;
  f.runs.retry_backoff_max_ms = c.retry_backoff_max_ms;
  f.runs.run_log_max_bytes = c.run_log_max_bytes;
  f.runs.images_max_bytes = c.images_max_bytes;
  f.runs.pools = c.pools;
  f.runs.default_pool = c.default_pool;
  f.runs.profiles = c.profiles;
  if (given("--telemetry-interval")) {
    auto d = ParseDuration(f.telemetry_interval);
    if (!d.ok() || d->count() < telemetry::kMinIntervalMs) {
      return Status::Msg(Code::kInvalidArgument, "config.bad_key",
                         {{"file", "--telemetry-interval"},
                          {"key", "telemetry.interval"},
                          {"allowed", "a duration of at least 100ms, such as 5s"}});
    }
    f.telemetry.interval_ms = d->count();
  }
  if (!f.deployments_listen.empty()) {
    RETURN_IF_ERROR(
        daemon::CheckListen(f.deployments_listen, "--deployments-listen", "deployments.listen"));
  }
  // A relative flag means the caller's directory (`lathe up` starts the daemon elsewhere).
  auto absolute = [](std::string& p) {
    if (!p.empty() && p[0] != '/') p = std::filesystem::absolute(p).lexically_normal().string();
  };
  absolute(f.tls_cert);
  absolute(f.tls_key);
  if (c.tls && !given("--tls-cert")) f.tls_cert = c.tls->cert;
  if (c.tls && !given("--tls-key")) f.tls_key = c.tls->key;
  return Status::OK();
}

// Blocks the stop signals and SIGCHLD in every thread (threads inherit the
// mask, so call this before any starts); the main thread waits for them.
// (Monitors are started with an empty signal mask.)
sigset_t BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGCHLD);  // a monitor ended: look at its run now, not at the next poll
  sigaddset(&set, SIGHUP);   // config.yaml read again (lathe reload)
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return set;
}

void ApplyRunAndNotebookFlags(const DaemonFlags& f, daemon::DaemonOptions& o) {
  daemon::ApplyReloadableConfig(f.runs, o);
  if (f.notebooks.idle_ms) o.notebooks.default_idle_ms = *f.notebooks.idle_ms;
  if (f.notebooks.poll_ms) o.notebooks.poll_ms = static_cast<int>(*f.notebooks.poll_ms);
  if (f.notebooks.gpu_busy_pct) o.notebooks.gpu_busy_pct = *f.notebooks.gpu_busy_pct;
}

void ApplyTelemetryFlags(const DaemonFlags& f, daemon::DaemonOptions& o) {
  telemetry::SamplerOptions& s = o.telemetry.sampler;
  if (f.telemetry.enabled) o.telemetry.enabled = *f.telemetry.enabled;
  if (f.telemetry.interval_ms) s.interval_ms = *f.telemetry.interval_ms;
  if (f.telemetry.max_bytes) o.telemetry.max_bytes = *f.telemetry.max_bytes;
  if (f.telemetry.idle_pct) s.warnings.idle_pct = *f.telemetry.idle_pct;
  if (f.telemetry.idle_ms) s.warnings.idle_ms = *f.telemetry.idle_ms;
  if (f.telemetry.throttle_pct) s.warnings.throttle_share_pct = *f.telemetry.throttle_pct;
  if (f.telemetry.throttle_ms) s.warnings.throttle_min_ms = *f.telemetry.throttle_ms;
}

// The deployments' front; it speaks TLS where the API would have to: off loopback.
Status ApplyDeploymentFlags(const DaemonFlags& f, deploy::DeploymentOptions& d) {
  if (!f.deployments_listen.empty()) d.listen = f.deployments_listen;
  if (!f.gateway_user.empty()) d.gateway_user = f.gateway_user;
  if (f.deployments_max_per_user) d.max_per_user = *f.deployments_max_per_user;
  std::string host = d.listen.substr(0, d.listen.rfind(':'));
  bool loopback = host == "127.0.0.1" || host == "localhost" || host == "[::1]" || host == "::1";
  if (loopback) return Status::OK();
  if (f.tls_cert.empty() || f.tls_key.empty()) {
    return Status::Msg(Code::kInvalidArgument, "deploy.listen_needs_tls", {{"listen", d.listen}});
  }
  d.tls_cert = f.tls_cert;
  d.tls_key = f.tls_key;
  return Status::OK();
}

// config.yaml `pools:` as the node builds them (every type is slurm today).
void ApplyPools(const DaemonFlags& f, node::NodeOptions& no) {
  if (f.runs.default_pool) no.daemon.default_pool = *f.runs.default_pool;
  if (f.runs.profiles) no.daemon.profiles = *f.runs.profiles;
  if (!f.runs.pools) return;
  for (const auto& [name, p] : *f.runs.pools) no.slurm_pools.push_back(p.slurm);
}

// What the node is built from: the flags after ApplyConfig.
Result<node::NodeOptions> NodeOptionsFrom(const DaemonFlags& f) {
  auto grace = ParseDuration(f.grace);
  if (!grace.ok()) return grace.status();
  node::NodeOptions no;
  daemon::DaemonOptions& o = no.daemon;
  o.home = f.home;
  o.gpus = f.gpus;
  o.kill_grace_ms = static_cast<int>(grace->count());
  o.self_exe = os::SelfExe();
  ApplyRunAndNotebookFlags(f, o);
  ApplyTelemetryFlags(f, o);
  RETURN_IF_ERROR(ApplyDeploymentFlags(f, no.deployments));
  ApplyPools(f, no);
  return no;
}

void PrintReady(const daemon::Daemon& d, const api::ApiServer& server) {
  Lang lang = DetectLang();
  std::printf("%s\n",
              Tr("daemon.ready", lang,
                 {{"version", LATHE_VERSION},
                  {"mode", Tr(d.paths().system ? "status.mode.system" : "status.mode.user", lang)},
                  {"socket", d.paths().socket},
                  {"url", server.url()},
                  {"token", d.paths().token}})
                  .c_str());
  std::fflush(stdout);
}

// Until SIGINT, SIGTERM or `POST /shutdown`; a SIGCHLD wakes the supervisor.
void WaitForStop(const sigset_t& set, daemon::Daemon& d) {
  timespec ts{0, 200'000'000};
  while (!g_shutdown) {
    int sig = sigtimedwait(&set, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM) break;
    if (sig == SIGCHLD) d.Kick();
    if (sig == SIGHUP) {
      auto r = d.ReloadConfig();  // it logs what it put in force
      if (!r.ok())
        spdlog::error("config: not read again, the settings stay: {}", r.status().ToString());
    }
  }
}

Status RunDaemon(DaemonFlags& f) {
  InitLogging("info");
  RETURN_IF_ERROR(ApplyConfig(f));
  ASSIGN_OR_RETURN(node::NodeOptions no, NodeOptionsFrom(f));
  sigset_t set = BlockStopSignals();
  ASSIGN_OR_RETURN(auto node, node::Node::Create(std::move(no), os::RealClock()));
  api::ApiOptions ao;
  ao.host = f.host;
  ao.port = f.port;
  ao.keep_port = !f.port_fixed;  // a port chosen once is kept across restarts
  ao.tls = {f.tls_cert, f.tls_key};
  ao.on_shutdown = [] { g_shutdown = true; };
  ao.allowed_hosts = f.allowed_hosts;
  ao.metrics_open_on_loopback = f.metrics_open_on_loopback;
  ASSIGN_OR_RETURN(auto server, api::ApiServer::Create(node->services(), ao));
  RETURN_IF_ERROR(node->Start());
  PrintReady(node->daemon(), *server);
  WaitForStop(set, node->daemon());
  spdlog::info("shutting down; runs keep running and are re-adopted at the next start");
  server->Stop();
  node->Stop();
  return Status::OK();
}

// The flags given to `lathe up`, as the daemon would take them.
std::vector<std::string> GivenFlags(const DaemonFlags& f) {
  std::vector<std::string> args;
  auto pass = [&](const char* name, const std::string& value) {
    if (f.app != nullptr && f.app->count(name) > 0) args.insert(args.end(), {name, value});
  };
  pass("--gpus", f.gpus);
  pass("--port", std::to_string(f.port));
  pass("--host", f.host);
  pass("--grace", f.grace);
  pass("--tls-cert", f.tls_cert);
  pass("--tls-key", f.tls_key);
  pass("--deployments-listen", f.deployments_listen);
  pass("--telemetry-interval", f.telemetry_interval);
  if (!f.home.empty()) args.insert(args.end(), {"--home", f.home});
  return args;
}

// `lathe up` found a daemon: says which of the flags given it does not have
// (it keeps the settings it started with) and how to restart it with them.
Status CheckRunningSettings(api::ApiClient& c, const DaemonFlags& f) {
  auto given = [&](const char* name) { return f.app != nullptr && f.app->count(name) > 0; };
  daemon::DaemonConfig asked;
  if (given("--gpus")) asked.gpus = f.gpus;
  if (given("--host")) asked.host = f.host;
  if (given("--port")) asked.port = f.port;
  if (given("--grace")) asked.grace = f.grace;
  if (!asked.gpus && !asked.host && !asked.port && !asked.grace) return Status::OK();
  ASSIGN_OR_RETURN(Json s, c.Get("/api/v1/status"));
  std::vector<daemon::SettingMismatch> diffs = daemon::CompareWithRunning(asked, s);
  if (diffs.empty()) return Status::OK();
  Lang lang = DetectLang();
  for (const auto& d : diffs) {
    std::fprintf(stderr, "%s\n",
                 Tr("daemon.up_setting_differs", lang,
                    {{"flag", d.flag}, {"asked", d.asked}, {"running", d.running}})
                     .c_str());
  }
  std::string up = "lathe up";
  for (const auto& a : GivenFlags(f)) up += " " + a;
  return Status::Msg(Code::kFailedPrecondition, "daemon.up_restart",
                     {{"command", "lathe down && " + up}});
}

// The daemon's API URL from its GET /status answer ("" when there is none).
std::string UrlOf(const Result<Json>& status) {
  if (!status.ok()) return "";
  return status->contains("url") ? status->value("url", "") : "http://" + status->value("tcp", "");
}

Status RunUp(const DaemonFlags& f) {
  // With --home, that daemon is the one to look for and to start.
  if (!f.home.empty()) ::setenv("LATHE_HOME", f.home.c_str(), 1);
  if (auto c = api::ApiClient::ConnectLocal(); c.ok()) {
    Status same = CheckRunningSettings(**c, f);
    if (f.json) {
      // The running daemon's pid, as its status says; a setting it does not
      // have: the error object's fields in the same answer.
      auto s = (*c)->Get("/api/v1/status");
      Json j = same.ok() ? Json::object() : StatusToJson(same);
      j.update(Json{{"started", false}, {"socket", (*c)->where()}, {"url", UrlOf(s)}});
      if (s.ok() && s->contains("pid")) j["pid"] = (*s)["pid"];
      PrintJson(j);
    } else {
      std::printf("%s\n", Tr("daemon.already_up", DetectLang(),
                             {{"why", (*c)->why()}, {"socket", (*c)->where()}})
                              .c_str());
    }
    return same;
  }
  daemon::HomePaths paths = daemon::DaemonHome(f.home);
  RETURN_IF_ERROR(os::MakeDirs(paths.home, 0700));
  std::string exe = os::SelfExe();
  // Only the flags given here are passed on, so <home>/config.yaml still applies.
  std::vector<std::string> args = {exe, "daemon"};
  for (auto& a : GivenFlags(f)) args.push_back(std::move(a));
  auto spawned = os::SpawnDetached(args, paths.log, 0600);
  if (!spawned.ok()) {
    return Status::Msg(Code::kInternal, "daemon.spawn_failed",
                       {{"exe", exe}, {"error", spawned.status().message()}});
  }
  pid_t pid = *spawned;
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (auto c = api::ApiClient::ConnectLocal(); c.ok()) {
      auto s = (*c)->Get("/api/v1/status");
      if (f.json) {
        PrintJson(
            Json{{"started", true}, {"pid", pid}, {"socket", (*c)->where()}, {"url", UrlOf(s)}});
        return Status::OK();
      }
      std::printf("%s\n", Tr("daemon.started", DetectLang(),
                             {{"pid", std::to_string(pid)},
                              {"socket", (*c)->where()},
                              {"url", s.ok() ? UrlOf(s) : "?"}})
                              .c_str());
      return Status::OK();
    }
    if (os::TryReap(pid)) break;  // it exited: its log says why
  }
  return Status::Msg(Code::kInternal, "daemon.start_failed", {{"log", paths.log}});
}

// With `all`, the deployments' front too, once the daemon is down (it
// would otherwise go on serving: it outlives the daemon on purpose).
// `stopped`: whether a front was running and is stopped now; said on stdout unless `quiet`.
Status StopFront(const std::string& home, bool quiet = false, bool* was_stopped = nullptr) {
  deploy::GatewayConfig gc;
  gc.dir = home + "/deployments/gateway";
  deploy::GatewayControl front(gc);
  bool stopped = false;
  constexpr int kFrontStopMs = 15'000;  // its drain takes up to 10 s
  Status st = front.Stop(kFrontStopMs, &stopped);
  if (!st.ok()) {
    return Status::Msg(Code::kPermissionDenied, "daemon.front_not_stopped",
                       {{"dir", gc.dir}, {"detail", st.message()}});
  }
  if (stopped && !quiet) std::printf("%s\n", Tr("daemon.front_stopped", DetectLang()).c_str());
  if (was_stopped) *was_stopped = stopped;
  return Status::OK();
}

Status RunDown(bool all, bool json) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  std::string home;
  if (all) {
    ASSIGN_OR_RETURN(Json s, c->Get("/api/v1/status"));
    home = s.value("home", "");
  }
  ASSIGN_OR_RETURN(Json r, c->Post("/api/v1/shutdown", Json::object()));
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!api::ApiClient::Connect().ok()) {
      if (json) {
        bool front = false;
        if (all && !home.empty()) RETURN_IF_ERROR(StopFront(home, true, &front));
        PrintJson(Json{{"stopped", true}, {"front_stopped", front}});
        return Status::OK();
      }
      std::printf("%s\n", Tr("daemon.stopped", DetectLang()).c_str());
      return all && !home.empty() ? StopFront(home) : Status::OK();
    }
  }
  return Status::Internal("the daemon did not stop within 10 s");
}

// `lathe reload`: config.yaml read again by the running daemon.
Status RunReload(bool json, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Post("/api/v1/reload", Json::object()));
  if (json) {
    PrintJson(r);
    return Status::OK();
  }
  auto joined = [](const Json& a) {
    std::string s;
    for (const auto& k : a) s += (s.empty() ? "" : ", ") + k.get<std::string>();
    return s;
  };
  std::printf("%s\n", Tr("daemon.reloaded", lang,
                         {{"config", r.value("config", "")},
                          {"applied", joined(r.value("applied", Json::array()))},
                          {"later", joined(r.value("at_next_start", Json::array()))}})
                          .c_str());
  return Status::OK();
}

// "2 of 4", or "2 (no limit)".
std::string UsageOf(const Json& used, const Json& limit, Lang lang) {
  return QuotaUsageOf(used, limit, lang);
}

// Each user's usage against their limits (the caller's; everyone's for root).
void PrintQuotas(const Json& q, Lang lang) {
  int64_t half_life = q["fair_share"].value("half_life_ms", int64_t{0});
  std::printf("  %s\n",
              half_life > 0
                  ? Tr("status.quotas", lang,
                       {{"half_life", FormatDuration(std::chrono::milliseconds(half_life))}})
                        .c_str()
                  : Tr("status.quotas_no_fair_share", lang).c_str());
  for (const Json& u : q.value("users", Json::array())) {
    const Json& l = u["limits"];
    const Json& used = u["usage"];
    std::string hours = UsageOf(used["gpu_hours"], l["gpu_hours"], lang);
    if (!l["gpu_hours"].is_null()) {
      hours = Tr("status.quota_hours_of", lang,
                 {{"used", fmt::format("{:.1f}", used.value("gpu_hours", 0.0))},
                  {"limit", fmt::format("{:g}", l["gpu_hours"].get<double>())},
                  {"period",
                   FormatDuration(std::chrono::milliseconds(l.value("period_ms", int64_t{0})))}});
    }
    std::string disk;  // only where a disk quota applies: the share is on its own line
    if (l.contains("disk_bytes") && !l["disk_bytes"].is_null()) {
      disk = (lang == Lang::kZh ? "，" : ", ") +
             Tr("status.quota_disk", lang,
                {{"disk", Tr("status.quota_of", lang,
                             {{"used", FormatBytes(used.value("disk_bytes", uint64_t{0}))},
                              {"limit", FormatBytes(l["disk_bytes"].get<uint64_t>())}})}});
    }
    std::printf("    %s%s\n",
                Tr("status.quota_user", lang,
                   {{"user", u.value("user", "")},
                    {"gpus", UsageOf(used["gpus"], l["gpus"], lang)},
                    {"runs", UsageOf(used["runs"], l["runs"], lang)},
                    {"notebooks", UsageOf(used["notebooks"], l["notebooks"], lang)},
                    {"gpu_hours", hours},
                    {"share", fmt::format("{:.1f}", used.value("fair_share_gpu_hours", 0.0))}})
                    .c_str(),
                disk.c_str());
  }
}

// The home's filesystem, and what the runs' directories take of it per user
// (the caller's; everyone's for root).
void PrintDisk(const Json& d, Lang lang) {
  if (d.contains("size_bytes")) {
    std::printf("  %s\n", Tr("status.disk", lang,
                             {{"available", FormatBytes(d.value("available_bytes", uint64_t{0}))},
                              {"size", FormatBytes(d.value("size_bytes", uint64_t{0}))},
                              {"home", d.value("home", "")}})
                              .c_str());
  }
  if (d.value("counted_at_ms", int64_t{0}) == 0) {
    std::printf("    %s\n", Tr("status.disk_counting", lang).c_str());
    return;
  }
  for (const Json& u : d.value("users", Json::array())) {
    std::printf("    %s\n", Tr("status.disk_user", lang,
                               {{"user", u.value("user", "")},
                                {"bytes", FormatBytes(u.value("bytes", uint64_t{0}))}})
                                .c_str());
  }
}

// What a backend can honour, as `lathe status` lists it.
std::string CapabilityList(const Json& caps, Lang lang) {
  std::string can;
  for (const char* k : {"memory_limit", "cpu_limit", "private_shm", "isolated_network", "images",
                        "ports", "multi_node"}) {
    if (!caps.value(k, false)) continue;
    can += (can.empty()         ? ""
            : lang == Lang::kZh ? "、"
                                : ", ") +
           Tr(std::string("status.cap.") + k, lang);
  }
  return can.empty() ? Tr("status.cap.none", lang) : can;
}

// The configured pools (GET /status lists this node first), the default one marked.
void PrintPools(const Json& s, Lang lang) {
  if (!s.contains("pools")) return;
  const std::string def = s.value("default_pool", "local");
  for (const Json& p : s["pools"]) {
    const std::string name = p.value("name", "");
    if (name == run::kLocalPool) continue;
    std::printf("  %s\n", Tr(name == def ? "status.pool_default" : "status.pool", lang,
                             {{"name", name},
                              {"backend", p.value("backend", "")},
                              {"caps", CapabilityList(p["capabilities"], lang)}})
                              .c_str());
  }
}

Status RunStatus(bool json, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json s, c->Get("/api/v1/status"));
  s["found_by"] = c->why();
  if (json) {
    PrintJson(s);
    return Status::OK();
  }
  const Json& g = s["gpus"];
  const Json& cg = s["cgroups"];
  auto known = [&](const std::string& id, const std::string& value) {
    return Catalog::Default().Has(id) ? Tr(id, lang) : value;
  };
  std::string why = c->why();
  std::string why_id = "status.why." + why;
  std::replace(why_id.begin(), why_id.end(), ' ', '_');
  std::string found =
      Tr("status.found_by", lang,
         {{"mode", known("status.mode." + s.value("mode", ""), s.value("mode", ""))},
          {"why", known(why_id, why)}});
  std::printf("%s\n",
              Tr("status.daemon_line", lang, {{"socket", s.value("socket", "")}, {"found", found}})
                  .c_str());
  std::printf("  %s\n", Tr("status.version_line", lang,
                           {{"version", s.value("version", "")},
                            {"pid", std::to_string(s.value("pid", 0))},
                            {"home", s.value("home", "")},
                            {"url", s.value("url", "http://" + s.value("tcp", "")) + "/api/v1"}})
                            .c_str());
  std::string gnote = g.value("note", "");
  std::string gpus_id = g.value("simulated", false) ? "status.gpus_simulated" : "status.gpus";
  std::string gpus = Tr(gnote.empty() ? gpus_id : gpus_id + "_note", lang,
                        {{"count", std::to_string(g.value("count", 0))},
                         {"source", g.value("source", "")},
                         {"note", run::ReasonText(gnote, lang)}});
  std::printf("  %s\n", gpus.c_str());
  auto yes_no = [&](const char* k) {
    return Tr(cg.value(k, false) ? "common.yes" : "common.no", lang);
  };
  std::string cgnote = cg.value("note", "");
  std::printf("  %s%s%s\n",
              Tr("status.cgroups", lang,
                 {{"mode", cg.value("mode", "")},
                  {"memory", yes_no("memory")},
                  {"cpu", yes_no("cpu")},
                  {"pids", yes_no("pids")}})
                  .c_str(),
              cgnote.empty() ? "" : " — ", run::ReasonText(cgnote, lang).c_str());
  if (cg.value("mode", "") == "none") std::printf("  %s\n", Tr("status.no_limits", lang).c_str());
  if (s.contains("backend")) {  // what executes runs, and what it can honour
    std::printf("  %s\n", Tr("status.backend", lang,
                             {{"name", s["backend"].value("name", "")},
                              {"caps", CapabilityList(s["backend"]["capabilities"], lang)}})
                              .c_str());
  }
  PrintPools(s, lang);
  std::string runs;
  for (const auto& [state, n] : s["runs"].items()) {
    runs += (runs.empty()        ? ""
             : lang == Lang::kZh ? "，"
                                 : ", ") +
            Tr("status.run_count", lang,
               {{"n", std::to_string(n.get<int64_t>())}, {"state", run::StateLabel(state, lang)}});
  }
  std::printf("  %s\n", Tr("status.runs", lang,
                           {{"runs", runs.empty() ? Tr("status.runs_none", lang) : runs}})
                            .c_str());
  if (s.contains("disk")) PrintDisk(s["disk"], lang);
  if (s.contains("quotas")) PrintQuotas(s["quotas"], lang);
  for (const Json& p : s.value("projects", Json::array())) {
    const Json& u = p["usage"];
    std::printf("  %s\n", ProjectUsageLine("status.project", p, lang).c_str());
    std::string limits = ProjectLimitsLine(p.value("limits", Json()), u, lang);
    if (!limits.empty()) std::printf("    %s\n", limits.c_str());
  }
  return Status::OK();
}

}  // namespace

void SetupDaemon(CLI::App& app, Globals& g, Status& status) {
  static DaemonFlags flags;
  auto add_flags = [](CLI::App* sub) {
    sub->add_option("--home", flags.home);
    sub->add_option("--gpus", flags.gpus);
    sub->add_option("--host", flags.host);
    sub->add_option("--port", flags.port);
    sub->add_option("--grace", flags.grace);
    sub->add_option("--tls-cert", flags.tls_cert);
    sub->add_option("--tls-key", flags.tls_key);
    sub->add_option("--deployments-listen", flags.deployments_listen);
    sub->add_option("--telemetry-interval", flags.telemetry_interval);
  };
  auto* d = app.add_subcommand("daemon");
  add_flags(d);
  d->callback([&status, d] {
    flags.app = d;
    status = RunDaemon(flags);
  });
  auto* up = app.add_subcommand("up");
  add_flags(up);
  up->add_flag("--json", flags.json);
  up->callback([&status, up] {
    flags.app = up;
    status = RunUp(flags);
  });
  static bool down_all = false, down_json = false;
  auto* down = app.add_subcommand("down");
  down->add_flag("--all", down_all);
  down->add_flag("--json", down_json);
  down->callback([&status] { status = RunDown(down_all, down_json); });
  static bool reload_json = false;
  auto* reload = app.add_subcommand("reload");
  reload->add_flag("--json", reload_json);
  reload->callback([&status, &g] { status = RunReload(reload_json, g.Language()); });
  static bool json = false;
  auto* st = app.add_subcommand("status");
  st->add_flag("--json", json);
  st->callback([&status, &g] { status = RunStatus(json, g.Language()); });
  // Internal: the per-run monitor process (exec/monitor.h).
  static std::string launch;
  static std::string fd = "3";
  auto* mon = app.add_subcommand("__monitor")->group("");
  mon->add_option("launch", launch)->required();
  mon->add_option("fd", fd)->required();  // a descriptor number, or "-" for none
  mon->callback([] { std::exit(exec::MonitorMain(launch, exec::ParseHandshakeFd(fd.c_str()))); });
}

}  // namespace lathe::cmd
