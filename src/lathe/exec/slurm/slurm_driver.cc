// A test driver for SlurmBackend against a real Slurm (tests/integ/test_slurm.py): it makes
// one backend from the pool options given as JSON in argv[1], then answers one JSON request
// per line on stdin with one JSON line on stdout, until stdin ends:
//   {"op": "launch", "request": {...}}               -> {"ok", "error", "handle", "start_error",
//   "what"}
//   {"op": "poll", "attempts": [{...}, ...]}          -> {"statuses": [{"phase", "exit", "why",
//   "note"}]}
//   {"op": "signal", "attempt": {...}, "kill": bool}  -> {"ok", "error"}
//   {"op": "release", "attempt": {...}}               -> {"ok"}
//   {"op": "readopt", "attempt": {...}}               -> {"found", "handle", "exit", "why"}
//   {"op": "check", "spec": {...}, "user": {...}}     -> {"ok", "error", "msg_id"}
//   {"op": "log_path", "run_dir": "..."}              -> {"path"}
// An attempt is {"run_id", "attempt", "attempt_dir", "user": {"uid", "name"}, "handle"}; a
// request is LaunchRequest's fields by name, "user" with uid, gid, groups, name, home, shell.
#include <iostream>
#include <string>

#include "lathe/exec/slurm/slurm_backend.h"
#include "lathe/os/clock.h"

namespace lathe::exec {
namespace {

RunUser UserFromJson(const Json& j) {
  RunUser u;
  u.uid = j.value("uid", 0u);
  u.gid = j.value("gid", 0u);
  u.groups = j.value("groups", std::vector<gid_t>{});
  u.name = j.value("name", "");
  u.home = j.value("home", "");
  u.shell = j.value("shell", "");
  return u;
}

LaunchRequest RequestFromJson(const Json& j) {
  LaunchRequest q;
  q.run_id = j.value("run_id", "");
  q.run_name = j.value("run_name", q.run_id);
  q.attempt = j.value("attempt", 1);
  q.user = UserFromJson(j.value("user", Json::object()));
  q.argv = j.value("argv", std::vector<std::string>{});
  q.env = j.value("env", std::map<std::string, std::string>{});
  q.workdir = j.value("workdir", "");
  q.gpu_count = j.value("gpu_count", 0);
  q.gpu_type = j.value("gpu_type", "");
  q.partition = j.value("partition", "");
  q.time_limit_ms = j.value("time_limit_ms", int64_t{0});
  q.cpus = j.value("cpus", 0.0);
  q.memory_bytes = j.value("memory_bytes", uint64_t{0});
  q.attempt_dir = j.value("attempt_dir", "");
  return q;
}

AttemptRef RefFromJson(const Json& j) {
  AttemptRef a;
  a.run_id = j.value("run_id", "");
  a.attempt = j.value("attempt", 1);
  a.attempt_dir = j.value("attempt_dir", "");
  a.user = UserFromJson(j.value("user", Json::object()));
  a.handle = j.value("handle", Json::object());
  return a;
}

const char* PhaseName(AttemptPhase p) {
  switch (p) {
    case AttemptPhase::kStarting:
      return "starting";
    case AttemptPhase::kRunning:
      return "running";
    case AttemptPhase::kExited:
      return "exited";
    case AttemptPhase::kGone:
      return "gone";
  }
  return "?";
}

const char* FoundName(Found f) {
  switch (f) {
    case Found::kAlive:
      return "alive";
    case Found::kExited:
      return "exited";
    case Found::kNeverStarted:
      return "never_started";
    case Found::kGone:
      return "gone";
  }
  return "?";
}

Json Answer(SlurmBackend& b, const Json& req) {
  const std::string op = req.value("op", "");
  if (op == "launch") {
    LaunchRequest q = RequestFromJson(req.at("request"));
    auto prepared = b.Prepare(q);
    if (!prepared.ok()) return {{"ok", false}, {"error", prepared.status().ToString()}};
    auto l = b.Launch(q, *prepared);
    if (!l.ok()) return {{"ok", false}, {"error", l.status().ToString()}};
    return {
        {"ok", true}, {"handle", l->handle}, {"start_error", l->start_error}, {"what", l->what}};
  }
  if (op == "poll") {
    std::vector<AttemptRef> refs;
    for (const Json& a : req.at("attempts")) refs.push_back(RefFromJson(a));
    Json statuses = Json::array();
    for (const AttemptStatus& s : b.Poll(refs)) {
      statuses.push_back({{"phase", PhaseName(s.phase)},
                          {"exit", ExitToJson(s.exit)},
                          {"why", s.why},
                          {"note", s.note}});
    }
    return {{"statuses", statuses}};
  }
  if (op == "signal") {
    Status st = b.Signal(RefFromJson(req.at("attempt")),
                         req.value("kill", false) ? StopSignal::kKill : StopSignal::kGraceful);
    return {{"ok", st.ok()}, {"error", st.ok() ? "" : st.ToString()}};
  }
  if (op == "release") {
    b.Release(RefFromJson(req.at("attempt")));
    return {{"ok", true}};
  }
  if (op == "readopt") {
    Readoption r = b.Readopt(RefFromJson(req.at("attempt")));
    return {{"found", FoundName(r.what)},
            {"handle", r.handle},
            {"exit", ExitToJson(r.exit)},
            {"why", r.why}};
  }
  if (op == "check") {
    auto spec = run::SpecFromJson(req.at("spec"));
    if (!spec.ok()) return {{"ok", false}, {"error", spec.status().ToString()}};
    Status st = b.Check(*spec, UserFromJson(req.value("user", Json::object())));
    return {{"ok", st.ok()}, {"error", st.message()}, {"msg_id", st.msg_id()}};
  }
  if (op == "log_path") return {{"path", b.LogPath(req.value("run_dir", ""))}};
  return {{"error", "unknown op '" + op + "'"}};
}

int Main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: slurm_driver '<pool options as JSON>'\n";
    return 2;
  }
  auto opts_json = ParseJson(argv[1]);
  if (!opts_json.ok()) {
    std::cerr << opts_json.status().ToString() << "\n";
    return 2;
  }
  const Json& j = *opts_json;
  SlurmPoolOptions o;
  o.name = j.value("name", "cluster");
  o.partition = j.value("partition", "");
  o.account = j.value("account", "");
  o.qos = j.value("qos", "");
  o.shared_dir = j.value("shared_dir", "");
  o.signal_grace_ms = j.value("signal_grace_ms", o.signal_grace_ms);
  o.slurm_conf = j.value("slurm_conf", "");
  o.lathe_path = j.value("lathe_path", "");
  o.bin_dir = j.value("bin_dir", "");
  auto backend = SlurmBackend::Create(o, j.value("self_exe", ""), os::RealClock());
  if (!backend.ok()) {
    std::cerr << backend.status().ToString() << "\n";
    return 1;
  }
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    auto req = ParseJson(line);
    Json answer;
    try {
      answer = req.ok() ? Answer(**backend, *req) : Json{{"error", req.status().ToString()}};
    } catch (const Json::exception& e) {
      answer = {{"error", std::string("bad request: ") + e.what()}};
    }
    std::cout << answer.dump() << std::endl;
  }
  return 0;
}

}  // namespace
}  // namespace lathe::exec

int main(int argc, char** argv) { return lathe::exec::Main(argc, argv); }
