#include "lathe/run/profile.h"

#include <algorithm>

#include "lathe/run/spec.h"

namespace lathe::run {
namespace {

// What each field allows, as errors say it.
std::string Allowed(std::string_view field) {
  if (field == "gpus") return "a whole number from 0 to 1024";
  if (field == "cpus") return "a number of cores greater than 0, at most 4096";
  if (field == "memory" || field == "shm") return "a size such as 24GB or 512Mi";
  if (field == "pool") return "a pool's name (config.yaml pools:) or local";
  if (field == "gpu_type") return "a GPU type such as A100: 1-64 of letters, digits, _ - .";
  if (field == "partition") return "a Slurm partition: 1-64 of letters, digits, _ - .";
  if (field == "image") return "an image's name, such as pytorch:2.1";
  if (field == "nodes") return "a whole number of nodes from 1 to " + std::to_string(kMaxNodes);
  std::string all;
  for (std::string_view f : kProfileFields) all += (all.empty() ? "" : ", ") + std::string(f);
  return all;
}

Status BadField(const std::string& name, std::string_view field) {
  return Status::Msg(
      Code::kInvalidArgument, "profile.bad_field",
      {{"profile", name}, {"field", std::string(field)}, {"allowed", Allowed(field)}});
}

}  // namespace

Result<Profile> ProfileFromJson(const std::string& name, const Json& j) {
  if (!ValidProfileName(name)) {
    return Status::Msg(Code::kInvalidArgument, "profile.bad_name", {{"profile", name}});
  }
  if (!j.is_object()) return BadField(name, "(fields)");
  Profile p;
  p.name = name;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    if (std::find(std::begin(kProfileFields), std::end(kProfileFields), key) ==
        std::end(kProfileFields)) {
      return BadField(name, "(fields)");
    }
    if (it->is_structured() || it->is_null()) return BadField(name, key);
    // Each value is checked by the spec's own parser, alone in a spec.
    auto s = SpecFromJson(Json{{key, *it}, {"command", Json::array({"true"})}});
    if (!s.ok()) return BadField(name, key);
    if (key == "gpus") p.gpus = s->gpus;
    if (key == "cpus") p.cpus = s->cpus;
    if (key == "memory") p.memory_bytes = s->memory_bytes;
    if (key == "shm") p.shm_bytes = s->shm_bytes;
    if (key == "pool") p.pool = s->pool;
    if (key == "gpu_type") p.gpu_type = s->gpu_type;
    if (key == "partition") p.partition = s->partition;
    if (key == "nodes") p.nodes = s->nodes;
    if (key == "image") p.image = s->image;
  }
  return p;
}

Json ProfileFieldsJson(const Profile& p) {
  Json j = Json::object();
  if (p.gpus) j["gpus"] = *p.gpus;
  if (!p.gpu_type.empty()) j["gpu_type"] = p.gpu_type;
  if (p.cpus) j["cpus"] = *p.cpus;
  if (p.memory_bytes) j["memory"] = *p.memory_bytes;
  if (p.shm_bytes) j["shm"] = *p.shm_bytes;
  if (!p.pool.empty()) j["pool"] = p.pool;
  if (!p.partition.empty()) j["partition"] = p.partition;
  if (p.nodes) j["nodes"] = *p.nodes;
  if (!p.image.empty()) j["image"] = p.image;
  return j;
}

void ApplyProfile(const Profile& p, Json& spec) {
  const Json fields = ProfileFieldsJson(p);
  for (auto it = fields.begin(); it != fields.end(); ++it) {
    if (!spec.contains(it.key()) || spec[it.key()].is_null()) spec[it.key()] = *it;
  }
  spec["profile"] = p.name;
}

Result<Json> ResolveProfile(const std::map<std::string, Profile>& profiles, const Json& spec,
                            std::vector<std::string>& filled) {
  if (!spec.is_object() || !spec.contains("profile") || !spec["profile"].is_string()) return spec;
  const std::string name = spec["profile"].get<std::string>();
  auto it = profiles.find(name);
  if (it == profiles.end()) {
    if (!ValidProfileName(name)) return spec;
    std::string allowed;
    for (const auto& [n, p] : profiles) allowed += (allowed.empty() ? "" : ", ") + n;
    return Status::Msg(Code::kInvalidArgument, "profile.unknown",
                       {{"profile", name}, {"allowed", allowed.empty() ? "-" : allowed}});
  }
  Json out = spec;
  const Json fields = ProfileFieldsJson(it->second);
  for (auto f = fields.begin(); f != fields.end(); ++f) {
    if (!out.contains(f.key()) || out[f.key()].is_null()) filled.push_back(f.key());
  }
  ApplyProfile(it->second, out);
  return out;
}

}  // namespace lathe::run
