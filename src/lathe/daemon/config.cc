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

}  // namespace lathe::daemon
