#include "lathe/daemon/profile_config.h"

#include <yaml-cpp/yaml.h>

#include "lathe/common/yaml_json.h"

namespace lathe::daemon {
namespace {

Status BadKey(std::string_view file, const std::string& key, const std::string& allowed) {
  return Status::Msg(Code::kInvalidArgument, "config.bad_key",
                     {{"file", std::string(file)}, {"key", key}, {"allowed", allowed}});
}

std::string ArgOf(const Status& s, std::string_view key) {
  for (const auto& a : s.args()) {
    if (a.key == key) return a.value;
  }
  return "";
}

}  // namespace

Result<std::map<std::string, run::Profile>> ParseProfiles(const YAML::Node& node,
                                                          std::string_view file) {
  if (!node.IsMap()) {
    return BadKey(file, "profiles", "a mapping of profile names to their fields");
  }
  std::map<std::string, run::Profile> profiles;
  for (const auto& kv : node) {
    const std::string name = kv.first.Scalar();
    const std::string prefix = "profiles." + name;
    if (!kv.second.IsMap()) return BadKey(file, prefix, "a mapping of gpus, gpu_type, cpus, ...");
    ASSIGN_OR_RETURN(Json fields, YamlToJson(kv.second, file));
    auto p = run::ProfileFromJson(name, fields);
    if (!p.ok() && p.status().msg_id() == "profile.bad_name") {
      return BadKey(file, prefix, "a profile name: 1-32 of a-z, 0-9 and -, starting with a letter");
    }
    if (!p.ok()) {
      std::string field = ArgOf(p.status(), "field");
      return BadKey(file, field == "(fields)" ? prefix : prefix + "." + field,
                    ArgOf(p.status(), "allowed"));
    }
    profiles[name] = std::move(*p);
  }
  return profiles;
}

}  // namespace lathe::daemon
