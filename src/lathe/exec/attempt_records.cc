#include "lathe/exec/attempt_records.h"

namespace lathe::exec {

Json LaunchToJson(const LaunchConfig& c) {
  Json j{{"run_id", c.run_id},
         {"attempt", c.attempt},
         {"argv", c.argv},
         {"env", c.env},
         {"inherit_env", c.inherit_env},
         {"workdir", c.workdir},
         {"uid", c.uid},
         {"gid", c.gid},
         {"groups", c.groups},
         {"log_path", c.log_path},
         {"shm_bytes", c.shm_bytes},
         {"isolated_network", c.isolated_network},
         {"cgroup_dirs", c.cgroup_dirs},
         {"monitor_path", c.monitor_path},
         {"exit_path", c.exit_path},
         {"kill_grace_ms", c.kill_grace_ms},
         {"umask", c.umask},
         {"log_hold_bytes", c.log_hold_bytes},
         {"log_stall_ms", c.log_stall_ms},
         {"log_max_bytes", c.log_max_bytes},
         {"setup_argv", c.setup_argv},
         {"readonly_paths", c.readonly_paths},
         {"checkpoint_dir", c.checkpoint_dir},
         {"checkpoint_records", c.checkpoint_records}};
  if (c.warn_after_ms > 0) j["warn_after_ms"] = c.warn_after_ms;
  if (!c.container.empty()) {
    Json mounts = Json::array();
    for (const auto& m : c.container.mounts) {
      mounts.push_back({{"source", m.source}, {"stage", m.stage}, {"readonly", m.readonly}});
    }
    j["container"] = {{"argv", c.container.argv},
                      {"env", c.container.env},
                      {"mounts", std::move(mounts)},
                      {"cleanup_argv", c.container.cleanup_argv}};
    if (!c.container.sidecar_argv.empty())
      j["container"]["sidecar_argv"] = c.container.sidecar_argv;
  }
  return j;
}

Result<LaunchConfig> LaunchFromJson(const Json& j) {
  try {
    LaunchConfig c;
    c.run_id = j.at("run_id").get<std::string>();
    c.attempt = j.at("attempt").get<int>();
    c.argv = j.at("argv").get<std::vector<std::string>>();
    c.env = j.at("env").get<std::map<std::string, std::string>>();
    c.inherit_env = j.value("inherit_env", std::vector<std::string>{});
    c.workdir = j.at("workdir").get<std::string>();
    c.uid = j.at("uid").get<uid_t>();
    c.gid = j.at("gid").get<gid_t>();
    c.groups = j.at("groups").get<std::vector<gid_t>>();
    c.log_path = j.at("log_path").get<std::string>();
    c.shm_bytes = j.at("shm_bytes").get<uint64_t>();
    c.isolated_network = j.value("isolated_network", false);
    c.cgroup_dirs = j.at("cgroup_dirs").get<std::vector<std::string>>();
    c.monitor_path = j.at("monitor_path").get<std::string>();
    c.exit_path = j.at("exit_path").get<std::string>();
    c.kill_grace_ms = j.at("kill_grace_ms").get<int>();
    c.umask = j.value("umask", 022u) & 0777u;
    c.log_hold_bytes = j.value("log_hold_bytes", c.log_hold_bytes);
    c.log_stall_ms = j.value("log_stall_ms", c.log_stall_ms);
    c.log_max_bytes = j.value("log_max_bytes", c.log_max_bytes);
    c.setup_argv = j.value("setup_argv", std::vector<std::string>{});
    c.readonly_paths = j.value("readonly_paths", std::vector<std::string>{});
    c.checkpoint_dir = j.value("checkpoint_dir", std::string());
    c.checkpoint_records = j.value("checkpoint_records", std::string());
    c.warn_after_ms = j.value("warn_after_ms", int64_t{0});
    if (auto it = j.find("container"); it != j.end() && it->is_object()) {
      c.container.argv = it->at("argv").get<std::vector<std::string>>();
      c.container.env = it->at("env").get<std::map<std::string, std::string>>();
      c.container.cleanup_argv = it->value("cleanup_argv", std::vector<std::string>{});
      c.container.sidecar_argv = it->value("sidecar_argv", std::vector<std::string>{});
      for (const auto& m : it->value("mounts", Json::array())) {
        c.container.mounts.push_back({m.at("source").get<std::string>(),
                                      m.at("stage").get<std::string>(),
                                      m.value("readonly", false)});
      }
    }
    if (c.argv.empty()) return Status::InvalidArgument("launch config has an empty argv");
    return c;
  } catch (const Json::exception& e) {
    return Status::InvalidArgument(std::string("bad launch config: ") + e.what());
  }
}

Status CheckUnprivilegedLaunch(const LaunchConfig& c) {
  auto refuse = [](const char* field, const char* what) {
    return Status::FailedPrecondition(std::string("launch config field '") + field + "': " + what +
                                      " needs a monitor running as root");
  };
  if (c.shm_bytes > 0) return refuse("shm_bytes", "a private /dev/shm");
  if (c.isolated_network) return refuse("isolated_network", "a network namespace");
  if (!c.readonly_paths.empty()) return refuse("readonly_paths", "a read-only mount");
  if (!c.container.empty()) return refuse("container", "a run in an image");
  return Status::OK();
}

std::map<std::string, std::string> InheritEnvironment(std::map<std::string, std::string> env,
                                                      const std::vector<std::string>& inherit,
                                                      const std::vector<std::string>& from) {
  for (const std::string& entry : from) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    const std::string_view name(entry.data(), eq);
    for (const std::string& want : inherit) {
      const bool prefix = !want.empty() && want.back() == '*';
      const std::string_view stem(want.data(), want.size() - (prefix ? 1 : 0));
      if (prefix ? name.substr(0, stem.size()) == stem : name == stem) {
        env[std::string(name)] = entry.substr(eq + 1);
        break;
      }
    }
  }
  return env;
}

Result<MonitorRecord> ReadMonitorRecord(const std::string& path, os::Env& env) {
  ASSIGN_OR_RETURN(std::string text, env.ReadFile(path));
  ASSIGN_OR_RETURN(Json j, ParseJson(text));
  MonitorRecord r;
  r.monitor_pid = j.value("monitor_pid", 0);
  r.monitor_start = j.value("monitor_start", uint64_t{0});
  r.child_pid = j.value("child_pid", 0);
  r.child_start = j.value("child_start", uint64_t{0});
  r.started_at_ms = j.value("started_at_ms", int64_t{0});
  return r;
}

Json ExitToJson(const ExitRecord& e) {
  Json j = {{"oom_killed", e.oom_killed}, {"finished_at_ms", e.finished_at_ms}};
  j["exit_code"] = e.exit_code ? Json(*e.exit_code) : Json(nullptr);
  j["signal"] = e.signal ? Json(*e.signal) : Json(nullptr);
  if (!e.start_error.empty()) j["start_error"] = e.start_error;
  if (e.log_lost_bytes > 0) {
    j["log_lost_bytes"] = e.log_lost_bytes;
    j["log_lost_reason"] = e.log_lost_reason;
  }
  if (e.log_trimmed_bytes > 0) j["log_trimmed_bytes"] = e.log_trimmed_bytes;
  if (e.stop_signal > 0) j["stop_signal"] = e.stop_signal;
  return j;
}

Result<ExitRecord> ReadExitRecord(const std::string& path, os::Env& env) {
  ASSIGN_OR_RETURN(std::string text, env.ReadFile(path));
  ASSIGN_OR_RETURN(Json j, ParseJson(text));
  ExitRecord e;
  if (j.contains("exit_code") && j["exit_code"].is_number_integer())
    e.exit_code = j["exit_code"].get<int>();
  if (j.contains("signal") && j["signal"].is_number_integer()) e.signal = j["signal"].get<int>();
  e.oom_killed = j.value("oom_killed", false);
  e.start_error = j.value("start_error", "");
  e.finished_at_ms = j.value("finished_at_ms", int64_t{0});
  e.log_lost_bytes = j.value("log_lost_bytes", uint64_t{0});
  e.log_lost_reason = j.value("log_lost_reason", "");
  e.log_trimmed_bytes = j.value("log_trimmed_bytes", uint64_t{0});
  e.stop_signal = j.value("stop_signal", 0);
  return e;
}

}  // namespace lathe::exec
