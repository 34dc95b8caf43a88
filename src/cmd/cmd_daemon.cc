// lathe daemon | up | down | status | __monitor
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <thread>

#include "cmd/commands.h"
#include "cmd/output.h"
#include "lathe/api/client.h"
#include "lathe/api/server.h"
#include "lathe/common/log.h"
#include "lathe/common/units.h"
#include "lathe/daemon/config.h"
#include "lathe/daemon/daemon.h"
#include "lathe/exec/monitor.h"
#include "lathe/os/clock.h"
#include "lathe/os/files.h"
#include "lathe/os/process.h"

namespace lathe::cmd {
namespace {

struct DaemonFlags {
  CLI::App* app = nullptr;  // to tell which flags were given
  std::string home;
  std::string gpus = "auto";
  std::string host = "127.0.0.1";
  int port = 0;
  std::string grace = "10s";
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
  if (c.grace && !given("--grace")) f.grace = *c.grace;
  return Status::OK();
}

Status RunDaemon(DaemonFlags& f) {
  InitLogging("info");
  RETURN_IF_ERROR(ApplyConfig(f));
  auto grace = ParseDuration(f.grace);
  if (!grace.ok()) return grace.status();
  // Block the stop signals and SIGCHLD in every thread; the main thread waits
  // for them. (Monitors are started with an empty signal mask.)
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGCHLD);  // a monitor ended: look at its run now, not at the next poll
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  daemon::DaemonOptions o;
  o.home = f.home;
  o.gpus = f.gpus;
  o.kill_grace_ms = static_cast<int>(grace->count());
  o.self_exe = os::SelfExe();
  ASSIGN_OR_RETURN(auto d, daemon::Daemon::Create(o, os::RealClock()));
  api::ApiOptions ao;
  ao.host = f.host;
  ao.port = f.port;
  ao.on_shutdown = [] { g_shutdown = true; };
  ASSIGN_OR_RETURN(auto server, api::ApiServer::Create(*d, ao));
  RETURN_IF_ERROR(d->Start());
  Lang lang = DetectLang();
  std::printf("%s\n", Tr("daemon.ready", lang,
                         {{"version", LATHE_VERSION},
                          {"mode", d->paths().system ? "system" : "user"},
                          {"socket", d->paths().socket},
                          {"tcp", server->tcp_endpoint()},
                          {"token", d->paths().token}})
                          .c_str());
  std::fflush(stdout);
  timespec ts{0, 200'000'000};
  while (!g_shutdown) {
    int sig = sigtimedwait(&set, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM) break;
    if (sig == SIGCHLD) d->Kick();
  }
  spdlog::info("shutting down; runs keep running and are re-adopted at the next start");
  server->Stop();
  d->Stop();
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

Status RunUp(const DaemonFlags& f) {
  // With --home, that daemon is the one to look for and to start.
  if (!f.home.empty()) ::setenv("LATHE_HOME", f.home.c_str(), 1);
  if (auto c = api::ApiClient::ConnectLocal(); c.ok()) {
    std::printf("%s\n", Tr("daemon.already_up", DetectLang(),
                           {{"why", (*c)->why()}, {"socket", (*c)->where()}})
                            .c_str());
    return CheckRunningSettings(**c, f);
  }
  daemon::HomePaths paths = daemon::DaemonHome(f.home);
  RETURN_IF_ERROR(os::MakeDirs(paths.home, 0700));
  std::string exe = os::SelfExe();
  // Only the flags given here are passed on, so <home>/config.yaml still applies.
  std::vector<std::string> args = {exe, "daemon"};
  for (auto& a : GivenFlags(f)) args.push_back(std::move(a));
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus("fork", errno);
  if (pid == 0) {
    ::setsid();
    int log = ::open(paths.log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    int null = ::open("/dev/null", O_RDONLY);
    ::dup2(null, 0);
    ::dup2(log, 1);
    ::dup2(log, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (auto c = api::ApiClient::ConnectLocal(); c.ok()) {
      auto s = (*c)->Get("/api/v1/status");
      std::printf("%s\n", Tr("daemon.started", DetectLang(),
                             {{"pid", std::to_string(pid)},
                              {"socket", (*c)->where()},
                              {"tcp", s.ok() ? s->value("tcp", "") : "?"}})
                              .c_str());
      return Status::OK();
    }
    int ws;
    if (::waitpid(pid, &ws, WNOHANG) == pid) break;
  }
  return Status::Msg(Code::kInternal, "daemon.start_failed", {{"log", paths.log}});
}

Status RunDown() {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Post("/api/v1/shutdown", Json::object()));
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!api::ApiClient::Connect().ok()) {
      std::printf("%s\n", Tr("daemon.stopped", DetectLang()).c_str());
      return Status::OK();
    }
  }
  return Status::Internal("the daemon did not stop within 10 s");
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
  std::printf("%s: %s (%s, found by %s)\n", Tr("status.daemon", lang).c_str(),
              s.value("socket", "").c_str(), s.value("mode", "").c_str(), c->why().c_str());
  std::printf("  version %s, pid %d, home %s, API http://%s/api/v1\n",
              s.value("version", "").c_str(), s.value("pid", 0), s.value("home", "").c_str(),
              s.value("tcp", "").c_str());
  std::string gnote = g.value("note", "");
  std::printf("  GPUs: %d (%s%s%s%s)\n", g.value("count", 0), g.value("source", "").c_str(),
              g.value("simulated", false) ? ", SIMULATED" : "", gnote.empty() ? "" : ": ",
              gnote.c_str());
  std::string cgnote = cg.value("note", "");
  std::printf("  cgroups: %s (memory %s, cpu %s, pids %s)%s%s\n", cg.value("mode", "").c_str(),
              cg.value("memory", false) ? "yes" : "no", cg.value("cpu", false) ? "yes" : "no",
              cg.value("pids", false) ? "yes" : "no", cgnote.empty() ? "" : " — ", cgnote.c_str());
  if (cg.value("mode", "") == "none") std::printf("  %s\n", Tr("status.no_limits", lang).c_str());
  std::string runs;
  for (const auto& [state, n] : s["runs"].items()) {
    runs += (runs.empty() ? "" : ", ") + std::to_string(n.get<int64_t>()) + " " + state;
  }
  std::printf("  runs: %s\n", runs.empty() ? "none queued or active" : runs.c_str());
  return Status::OK();
}

}  // namespace

void SetupDaemon(CLI::App& app, Globals& g, Status& status) {
  static DaemonFlags flags;
  auto add_flags = [](CLI::App* sub) {
    sub->add_option("--home", flags.home,
                    "state directory (default: LATHE_HOME, XDG, or /var/lib/lathe as root)");
    sub->add_option("--gpus", flags.gpus, "GPU inventory: auto | none | sim:4x24GB");
    sub->add_option("--host", flags.host, "TCP address of the API (default 127.0.0.1)");
    sub->add_option("--port", flags.port, "TCP port of the API (0: any free port)");
    sub->add_option("--grace", flags.grace, "time between SIGTERM and SIGKILL when stopping a run");
  };
  auto* d = app.add_subcommand(
      "daemon", "run the daemon in the foreground (<home>/config.yaml for defaults)");
  add_flags(d);
  d->callback([&status, d] {
    flags.app = d;
    status = RunDaemon(flags);
  });
  auto* up = app.add_subcommand("up", "start the daemon in the background if it is not running");
  add_flags(up);
  up->callback([&status, up] {
    flags.app = up;
    status = RunUp(flags);
  });
  app.add_subcommand("down", "stop the daemon (runs keep running)")->callback([&status] {
    status = RunDown();
  });
  static bool json = false;
  auto* st = app.add_subcommand("status", "which daemon this CLI talks to, and its state");
  st->add_flag("--json", json, "JSON output");
  st->callback([&status, &g] { status = RunStatus(json, g.Language()); });
  // Internal: the per-run monitor process (exec/monitor.h).
  static std::string launch;
  static int fd = 3;
  auto* mon = app.add_subcommand("__monitor", "")->group("");
  mon->add_option("launch", launch)->required();
  mon->add_option("fd", fd)->required();
  mon->callback([] { std::exit(exec::MonitorMain(launch, fd)); });
}

}  // namespace lathe::cmd
