#include "lathe/daemon/config.h"

#include <yaml-cpp/yaml.h>

#include "lathe/common/units.h"
#include "lathe/os/files.h"

namespace lathe::daemon {

Result<DaemonConfig> ParseDaemonConfig(std::string_view yaml, std::string_view file) {
  DaemonConfig c;
  auto bad = [&](const std::string& key, const std::string& allowed) {
    return Status::Msg(Code::kInvalidArgument, "config.bad_key",
                       {{"file", std::string(file)}, {"key", key}, {"allowed", allowed}});
  };
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    if (root.IsNull()) return c;
    if (!root.IsMap()) return bad("(top level)", "a mapping of gpus, host, port, grace");
    for (const auto& kv : root) {
      std::string key = kv.first.Scalar();
      if (!kv.second.IsScalar()) return bad(key, "a single value");
      std::string v = kv.second.Scalar();
      if (key == "gpus") {
        c.gpus = v;
      } else if (key == "host") {
        c.host = v;
      } else if (key == "port") {
        int port = -1;
        try {
          port = std::stoi(v);
        } catch (...) {
        }
        if (port < 0 || port > 65535) return bad(key, "a port number 0-65535");
        c.port = port;
      } else if (key == "grace") {
        if (!ParseDuration(v).ok()) return bad(key, "a duration such as 10s");
        c.grace = v;
      } else {
        return bad(key, "gpus, host, port, grace");
      }
    }
  } catch (const YAML::Exception& e) {
    return Status::Msg(Code::kInvalidArgument, "spec.yaml_error",
                       {{"file", std::string(file)}, {"detail", e.what()}});
  }
  return c;
}

Result<DaemonConfig> LoadDaemonConfig(const std::string& path) {
  auto text = os::ReadFile(path);
  if (!text.ok()) {
    if (text.status().IsNotFound()) return DaemonConfig{};
    return text.status();
  }
  return ParseDaemonConfig(*text, path);
}

namespace {

// "127.0.0.1:7731" / "[::1]:7731" -> host, port.
std::pair<std::string, std::string> SplitEndpoint(const std::string& tcp) {
  size_t colon = tcp.rfind(':');
  if (colon == std::string::npos) return {tcp, ""};
  std::string host = tcp.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return {host, tcp.substr(colon + 1)};
}

}  // namespace

std::vector<SettingMismatch> CompareWithRunning(const DaemonConfig& asked, const Json& status) {
  std::vector<SettingMismatch> out;
  const Json gpus = status.value("gpus", Json::object());
  if (asked.gpus && gpus.is_object() && gpus.contains("spec") && gpus["spec"].is_string()) {
    std::string running = gpus["spec"].get<std::string>();
    if (running != *asked.gpus) out.push_back({"--gpus", *asked.gpus, running});
  }
  if (status.contains("tcp") && status["tcp"].is_string()) {
    auto [host, port] = SplitEndpoint(status["tcp"].get<std::string>());
    if (asked.host && *asked.host != host) out.push_back({"--host", *asked.host, host});
    if (asked.port && *asked.port != 0 && std::to_string(*asked.port) != port) {
      out.push_back({"--port", std::to_string(*asked.port), port});
    }
  }
  if (asked.grace && status.contains("grace_ms") && status["grace_ms"].is_number_integer()) {
    int64_t running_ms = status["grace_ms"].get<int64_t>();
    auto ms = ParseDuration(*asked.grace);
    if (!ms.ok() || ms->count() != running_ms) {
      out.push_back(
          {"--grace", *asked.grace, FormatDuration(std::chrono::milliseconds(running_ms))});
    }
  }
  return out;
}

}  // namespace lathe::daemon
