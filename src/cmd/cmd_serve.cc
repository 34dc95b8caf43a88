// lathe serve: an inference server (KServe v2 REST, /predict, /metrics) over a
// model repository or --model flags. Runs in the foreground until SIGTERM or
// SIGINT, then drains (stops accepting, answers what was admitted) and exits 0.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "cmd/commands.h"
#include "lathe/common/log.h"
#include "lathe/common/units.h"
#include "lathe/serve/server.h"

namespace lathe::cmd {
namespace {

struct ServeFlags {
  std::string repository;
  std::vector<std::string> models;
  std::string model_control = "none";
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string socket;
  int http_threads = 0;
  std::string max_body = "64Mi";
  std::string header_timeout = "10s";
  std::string idle_timeout = "60s";
  std::string body_timeout = "60s";
  int max_connections = 1024;
  std::string drain = "30s";
  std::string watch_interval = "1s";
  std::string gpus = "auto";
  std::vector<std::string> backend_dirs;
  bool port_given = false;
};

Result<int> Millis(const char* flag, const std::string& v) {
  auto d = ParseDuration(v);
  if (!d.ok() || d->count() <= 0) {
    return Status::Msg(Code::kInvalidArgument, "serve.bad_size_flag",
                       {{"flag", flag},
                        {"value", v},
                        {"detail", d.ok() ? "must be positive" : d.status().message()}});
  }
  return static_cast<int>(d->count());
}

Result<serve::ServeOptions> Options(const ServeFlags& f) {
  serve::ServeOptions o;
  o.repository = f.repository;
  o.models = f.models;
  o.model_control = f.model_control;
  o.host = f.host;
  o.port = f.port;
  o.socket = f.socket;
  // With --socket alone, no TCP listener: only the socket's group may connect.
  if (!f.socket.empty() && !f.port_given) o.port = -1;
  o.gpus = f.gpus;
  o.backend_dirs = f.backend_dirs;
  unsigned cores = std::thread::hardware_concurrency();
  o.http.io_threads =
      f.http_threads > 0 ? f.http_threads : static_cast<int>(std::clamp(cores / 2, 1u, 8u));
  auto body = ParseBytes(f.max_body);
  if (!body.ok()) {
    return Status::Msg(
        Code::kInvalidArgument, "serve.bad_size_flag",
        {{"flag", "--max-body"}, {"value", f.max_body}, {"detail", body.status().message()}});
  }
  o.http.max_body_bytes = *body;
  ASSIGN_OR_RETURN(o.http.header_timeout_ms, Millis("--header-timeout", f.header_timeout));
  ASSIGN_OR_RETURN(o.http.body_timeout_ms, Millis("--body-timeout", f.body_timeout));
  ASSIGN_OR_RETURN(o.http.idle_timeout_ms, Millis("--idle-timeout", f.idle_timeout));
  ASSIGN_OR_RETURN(o.drain_ms, Millis("--drain-timeout", f.drain));
  ASSIGN_OR_RETURN(o.watch_interval_ms, Millis("--watch-interval", f.watch_interval));
  o.http.max_connections = static_cast<size_t>(std::max(1, f.max_connections));
  o.http.server_name = "lathe-serve";
  return o;
}

Status RunServe(const ServeFlags& f, Lang lang) {
  InitLogging("info");
  ASSIGN_OR_RETURN(serve::ServeOptions o, Options(f));
  // Signals: SIGTERM/SIGINT are waited for below; SIGPIPE never kills the server.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  ASSIGN_OR_RETURN(auto server, serve::ServeServer::Create(std::move(o)));
  RETURN_IF_ERROR(server->Start());
  std::string url = f.socket.empty() || f.port_given
                        ? "http://" + f.host + ":" + std::to_string(server->port())
                        : "unix:" + f.socket;
  std::printf("%s\n", Tr("serve.ready", lang, {{"url", url}}).c_str());
  for (const auto& m : server->Describe()) std::printf("  %s\n", m.c_str());
  std::fflush(stdout);
  for (;;) {
    int sig = sigwaitinfo(&set, nullptr);
    if (sig == SIGINT || sig == SIGTERM) break;
  }
  server->Stop();
  return Status::OK();
}

}  // namespace

void SetupServe(CLI::App& app, Globals& g, Status& status) {
  static ServeFlags f;
  auto* s = app.add_subcommand("serve");
  s->add_option("--repository", f.repository);
  s->add_option("--model", f.models);
  s->add_option("--model-control", f.model_control);
  s->add_option("--watch-interval", f.watch_interval);
  s->add_option("--host", f.host);
  auto* port = s->add_option("--port", f.port);
  s->add_option("--socket", f.socket);
  s->add_option("--http-threads", f.http_threads);
  s->add_option("--max-body", f.max_body);
  s->add_option("--header-timeout", f.header_timeout);
  s->add_option("--body-timeout", f.body_timeout);
  s->add_option("--idle-timeout", f.idle_timeout);
  s->add_option("--max-connections", f.max_connections);
  s->add_option("--drain-timeout", f.drain);
  s->add_option("--gpus", f.gpus);
  s->add_option("--backend-dir", f.backend_dirs);
  s->callback([&status, &g, port] {
    f.port_given = port->count() > 0;
    status = RunServe(f, g.Language());
  });
}

}  // namespace lathe::cmd
