#include "lathe/deploy/deployment_spec.h"

#include <algorithm>
#include <cmath>

#include "lathe/common/ids.h"
#include "lathe/common/owned_name.h"
#include "lathe/common/units.h"
#include "lathe/deploy/models.h"

namespace lathe::deploy {
namespace {

constexpr const char* kFields[] = {
    "name",     "model",    "command",     "port",    "ready",  "env",           "workdir",
    "revision", "replicas", "autoscale",   "profile", "gpus",   "gpu_type",      "cpus",
    "memory",   "priority", "preemptible", "public",  "canary", "ready_timeout", "batching",
    "device",   "image",    "image_id",    "project"};
// Only a command deployment's.
constexpr const char* kCommandFields[] = {"port",     "ready", "env",     "workdir",
                                          "revision", "image", "image_id"};
constexpr const char* kAutoscaleFields[] = {
    "min", "max", "target", "upscale_delay", "downscale_delay", "zero_grace"};
// Fields handed to run::SpecFromJson as a replica's own.
constexpr const char* kRunFields[] = {"profile", "gpus",     "gpu_type",   "cpus",
                                      "memory",  "priority", "preemptible"};

template <size_t N>
std::string Joined(const char* const (&names)[N]) {
  std::string s;
  for (const char* f : names) s += (s.empty() ? "" : ", ") + std::string(f);
  return s;
}

template <size_t N>
bool OneOf(const std::string& key, const char* const (&names)[N]) {
  for (const char* f : names) {
    if (key == f) return true;
  }
  return false;
}

std::string Shown(const Json& v) {
  return v.is_string() ? v.get<std::string>()
                       : v.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Status WrongType(const std::string& field, const std::string& type) {
  return Status::Msg(Code::kInvalidArgument, "spec.wrong_type", {{"field", field}, {"type", type}});
}

Result<int> Count(const Json& v, const std::string& field, int min, int max) {
  if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > max) {
    return Status::Msg(Code::kInvalidArgument, "deploy.bad_count",
                       {{"field", field},
                        {"min", std::to_string(min)},
                        {"max", std::to_string(max)},
                        {"value", Shown(v)}});
  }
  return static_cast<int>(v.get<int64_t>());
}

Result<int64_t> Duration(const Json& v, const std::string& field) {
  auto bad = [&] {
    return Status::Msg(Code::kInvalidArgument, "spec.bad_duration",
                       {{"field", field}, {"value", Shown(v)}});
  };
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return v.get<int64_t>() * 1000;
  if (!v.is_string()) return bad();
  auto d = ParseDuration(v.get<std::string>());
  if (!d.ok()) return bad();
  return d->count();
}

// "10", 10, "10%": 1-99.
Result<int> Percent(const Json& v, const std::string& field) {
  std::string s = v.is_string() ? v.get<std::string>() : Shown(v);
  if (!s.empty() && s.back() == '%') s.pop_back();
  int p = 0;
  bool digits =
      !s.empty() && s.size() <= 2 && s.find_first_not_of("0123456789") == std::string::npos;
  if (digits) p = std::stoi(s);
  if (!digits || p < 1 || p > 99) {
    return Status::Msg(Code::kInvalidArgument, "deploy.bad_canary",
                       {{"field", field}, {"value", Shown(v)}});
  }
  return p;
}

// batching: {max_batch_size: 1-4096, max_queue_delay: 0-10s}
Status ParseBatching(const Json& v, DeploymentSpec& s) {
  constexpr const char* kShape = "object {max_batch_size, max_queue_delay}";
  if (!v.is_object()) return WrongType("batching", kShape);
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string field = "batching." + it.key();
    if (it.key() == "max_batch_size") {
      ASSIGN_OR_RETURN(s.max_batch_size, Count(*it, field, 1, 4096));
    } else if (it.key() == "max_queue_delay") {
      ASSIGN_OR_RETURN(int64_t ms, Duration(*it, field));
      if (ms > 10'000) {
        return Status::Msg(Code::kInvalidArgument, "deploy.bad_count",
                           {{"field", field}, {"min", "0"}, {"max", "10s"}, {"value", Shown(*it)}});
      }
      s.max_queue_delay_us = ms * 1000;
    } else {
      return Status::Msg(Code::kInvalidArgument, "deploy.unknown_field",
                         {{"field", field}, {"allowed", "max_batch_size, max_queue_delay"}});
    }
  }
  if (s.max_batch_size == 0)
    return WrongType("batching.max_batch_size", "whole number from 1 to 4096");
  return Status::OK();
}

// device: cpu | cuda:N (N 0-999)
Status ParseDevice(const Json& v, DeploymentSpec& s) {
  const std::string d = v.is_string() ? v.get<std::string>() : "";
  const bool cuda = d.size() > 5 && d.size() <= 8 && d.rfind("cuda:", 0) == 0 &&
                    d.find_first_not_of("0123456789", 5) == std::string::npos;
  if (d != "cpu" && !cuda) {
    return Status::Msg(Code::kInvalidArgument, "deploy.bad_device", {{"value", Shown(v)}});
  }
  s.device = cuda ? "cuda:" + std::to_string(std::stoi(d.substr(5))) : d;
  return Status::OK();
}

Status ParseAutoscale(const Json& v, DeploymentSpec& s) {
  if (!v.is_object()) return WrongType("autoscale", "object {" + Joined(kAutoscaleFields) + "}");
  bool has_max = false;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string field = "autoscale." + it.key();
    if (it.key() == "min") {
      ASSIGN_OR_RETURN(s.min_replicas, Count(*it, field, 0, kMaxReplicas));
    } else if (it.key() == "max") {
      ASSIGN_OR_RETURN(s.max_replicas, Count(*it, field, 1, kMaxReplicas));
      has_max = true;
    } else if (it.key() == "target") {
      if (!it->is_number() || !(it->get<double>() > 0) || it->get<double>() > 10000) {
        return Status::Msg(Code::kInvalidArgument, "deploy.bad_target", {{"value", Shown(*it)}});
      }
      s.target_ongoing = it->get<double>();
    } else if (it.key() == "upscale_delay") {
      ASSIGN_OR_RETURN(s.upscale_delay_ms, Duration(*it, field));
    } else if (it.key() == "downscale_delay") {
      ASSIGN_OR_RETURN(s.downscale_delay_ms, Duration(*it, field));
    } else if (it.key() == "zero_grace") {
      ASSIGN_OR_RETURN(s.zero_grace_ms, Duration(*it, field));
    } else {
      return Status::Msg(Code::kInvalidArgument, "deploy.unknown_field",
                         {{"field", field}, {"allowed", Joined(kAutoscaleFields)}});
    }
  }
  if (!has_max) return WrongType("autoscale.max", "whole number from 1 to 64");
  if (s.min_replicas > s.max_replicas) {
    return Status::Msg(
        Code::kInvalidArgument, "deploy.bad_range",
        {{"min", std::to_string(s.min_replicas)}, {"max", std::to_string(s.max_replicas)}});
  }
  return Status::OK();
}

// What the fields parsed so far leave for the checks across fields.
struct Parsing {
  DeploymentSpec& s;
  Json run = {{"type", "job"}, {"command", {"lathe"}}};  // the replicas' run fields
  bool has_replicas = false, has_autoscale = false;
};

Status ParseName(const Json& v, Parsing& p) {
  if (!v.is_string() || !IsValidOwnedName(v.get<std::string>())) {
    return Status::Msg(Code::kInvalidArgument, "deploy_key.bad_deployment", {{"value", Shown(v)}});
  }
  p.s.name = v.get<std::string>();
  return Status::OK();
}

Status ParseModel(const Json& v, Parsing& p) {
  if (!v.is_string()) return WrongType("model", "model reference NAME/N or NAME@ALIAS");
  ASSIGN_OR_RETURN(ModelRef ref, ParseModelRef(v.get<std::string>()));
  if (!ref.version && ref.alias.empty()) {
    return Status::Msg(Code::kInvalidArgument, "deploy.model_needs_version",
                       {{"value", v.get<std::string>()}});
  }
  p.s.model = v.get<std::string>();
  return Status::OK();
}

Status ParseCommand(const Json& v, Parsing& p) {
  if (!v.is_array() || v.empty()) return WrongType("command", "list of strings");
  p.run["command"] = v;  // checked by run::SpecFromJson with the other run fields
  return Status::OK();
}

Status ParseReady(const Json& v, Parsing& p) {
  const bool ok = v.is_string() && v.get<std::string>().size() <= 1024 &&
                  v.get<std::string>().rfind("/", 0) == 0 &&
                  v.get<std::string>().find_first_of(" \t\r\n") == std::string::npos;
  if (!ok) return Status::Msg(Code::kInvalidArgument, "deploy.bad_ready", {{"value", Shown(v)}});
  p.s.ready = v.get<std::string>();
  return Status::OK();
}

Status ParseReplicas(const Json& v, Parsing& p) {
  ASSIGN_OR_RETURN(p.s.min_replicas, Count(v, "replicas", 1, kMaxReplicas));
  p.s.max_replicas = p.s.min_replicas;
  p.has_replicas = true;
  return Status::OK();
}

Status ParsePublic(const Json& v, Parsing& p) {
  if (!v.is_boolean()) return WrongType("public", "true or false");
  p.s.is_public = v.get<bool>();
  return Status::OK();
}

Status ParseProject(const Json& v, Parsing& p) {
  if (!v.is_string() || !IsValidName(v.get<std::string>())) {
    return WrongType("project",
                     "a project's name: 1-63 of a-z, 0-9, '.', '_' and '-', starting with a "
                     "letter or digit");
  }
  p.s.project = v.get<std::string>();
  return Status::OK();
}

// One entry per field of the deployment's own; the run fields (env, workdir,
// gpus, cpus, ...) go to the replicas' run spec as they are.
struct Field {
  const char* key;
  Status (*parse)(const Json& v, Parsing& p);
};
constexpr Field kFieldParsers[] = {
    {"name", ParseName},
    {"model", ParseModel},
    {"command", ParseCommand},
    {"port",
     [](const Json& v, Parsing& p) {
       ASSIGN_OR_RETURN(p.s.port, Count(v, "port", 1, 65535));
       return Status::OK();
     }},
    {"ready", ParseReady},
    {"revision",
     [](const Json& v, Parsing& p) {
       ASSIGN_OR_RETURN(p.s.revision, Count(v, "revision", 0, 1'000'000'000));
       return Status::OK();
     }},
    {"replicas", ParseReplicas},
    {"autoscale",
     [](const Json& v, Parsing& p) {
       p.has_autoscale = true;
       return ParseAutoscale(v, p.s);
     }},
    {"public", ParsePublic},
    {"project", ParseProject},
    {"canary",
     [](const Json& v, Parsing& p) {
       ASSIGN_OR_RETURN(p.s.canary_percent, Percent(v, "canary"));
       return Status::OK();
     }},
    {"ready_timeout",
     [](const Json& v, Parsing& p) {
       ASSIGN_OR_RETURN(p.s.ready_timeout_ms, Duration(v, "ready_timeout"));
       return Status::OK();
     }},
    {"batching", [](const Json& v, Parsing& p) { return ParseBatching(v, p.s); }},
    {"device", [](const Json& v, Parsing& p) { return ParseDevice(v, p.s); }},
};

// The rules across fields: a model or a command, what only one of them may
// have, replicas or autoscale.
Status CheckCombination(const Json& j, const Parsing& p) {
  const DeploymentSpec& s = p.s;
  if (s.name.empty()) return WrongType("name", "deployment name");
  const bool command = j.contains("command") && !j["command"].is_null();
  if (command && !s.model.empty()) {
    return Status::Msg(Code::kInvalidArgument, "deploy.model_and_command");
  }
  if (!command && s.model.empty()) {
    return Status::Msg(Code::kInvalidArgument, "deploy.model_or_command");
  }
  for (const char* f : kCommandFields) {
    if (!command && j.contains(f) && !j[f].is_null()) {
      return Status::Msg(Code::kInvalidArgument, "deploy.command_only", {{"field", f}});
    }
  }
  if (command && s.port == 0) return Status::Msg(Code::kInvalidArgument, "deploy.port_needed");
  if (command && s.max_batch_size > 0) {
    return Status::Msg(Code::kInvalidArgument, "deploy.model_only", {{"field", "batching"}});
  }
  if (command && !s.device.empty()) {
    return Status::Msg(Code::kInvalidArgument, "deploy.model_only", {{"field", "device"}});
  }
  if (p.has_replicas && p.has_autoscale) {
    return Status::Msg(Code::kInvalidArgument, "deploy.replicas_and_autoscale");
  }
  return Status::OK();
}

}  // namespace

Result<DeploymentSpec> DeploymentSpecFromJson(const Json& j) {
  if (!j.is_object()) return Status::Msg(Code::kInvalidArgument, "json.not_object");
  DeploymentSpec s;
  Parsing p{s};
  // 1. Each field, by the table (a null is as if left out).
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    if (it->is_null()) continue;
    if (!OneOf(key, kFields)) {
      return Status::Msg(Code::kInvalidArgument, "deploy.unknown_field",
                         {{"field", key}, {"allowed", Joined(kFields)}});
    }
    const Field* f = std::find_if(std::begin(kFieldParsers), std::end(kFieldParsers),
                                  [&](const Field& x) { return key == x.key; });
    if (f != std::end(kFieldParsers)) {
      RETURN_IF_ERROR(f->parse(*it, p));
    } else if (key == "env" || key == "workdir" || key == "image" || key == "image_id" ||
               OneOf(key, kRunFields)) {
      p.run[key] = *it;
    }
  }
  // 2. The rules across fields.
  RETURN_IF_ERROR(CheckCombination(j, p));
  // 3. The replicas' run fields, checked as a run's.
  ASSIGN_OR_RETURN(s.resources, run::SpecFromJson(p.run));
  if (!s.model.empty()) return s;
  s.command = s.resources.command;
  s.env = s.resources.env;
  s.workdir = s.resources.workdir;
  s.image = s.resources.image;
  s.image_id = s.resources.image_id;
  if (!s.workdir.empty() && s.workdir[0] != '/') return WrongType("workdir", "absolute path");
  return s;
}

Result<Json> TakeProfileFields(Json resolved, const std::vector<std::string>& filled) {
  const std::string profile = resolved.value("profile", "");
  for (const std::string& f : filled) {
    const Json v = resolved[f];
    const bool fits = (f == "pool" && v == std::string(run::kLocalPool)) ||
                      (f == "nodes" && v == 1) || f == "shm" || f == "partition" ||
                      OneOf(f, kRunFields);
    if (!fits) {
      return Status::Msg(Code::kInvalidArgument, "profile.not_for_deployment",
                         {{"profile", profile}, {"field", f}, {"value", Shown(v)}});
    }
    if (!OneOf(f, kRunFields)) resolved.erase(f);
  }
  return resolved;
}

int DeploymentSpec::device_index() const {
  return device.rfind("cuda:", 0) == 0 ? std::stoi(device.substr(5)) : -1;
}

Status CheckDevice(const DeploymentSpec& s, int machine_gpus) {
  const int n = s.device_index();
  if (n < 0) return Status::OK();
  const int gpus = s.resources.gpus;
  if (gpus <= 0) {
    return Status::Msg(Code::kInvalidArgument, "deploy.device_needs_gpu", {{"device", s.device}});
  }
  const int usable =
      std::min(gpus, machine_gpus);  // the replica's own, as the machine can give them
  if (n >= usable) {
    return Status::Msg(
        Code::kInvalidArgument, "deploy.device_no_gpu",
        {{"device", s.device},
         {"gpus", std::to_string(gpus)},
         {"total", std::to_string(machine_gpus)},
         {"allowed",
          usable <= 0 ? std::string("cpu") : "cpu, cuda:0..cuda:" + std::to_string(usable - 1)}});
  }
  return Status::OK();
}

Json RevisionToJson(const DeploymentSpec& s) {
  Json j = {{"command", s.command}, {"port", s.port}};
  if (!s.env.empty()) j["env"] = s.env;
  if (!s.workdir.empty()) j["workdir"] = s.workdir;
  if (!s.image.empty()) j["image"] = s.image;
  if (!s.image_id.empty()) j["image_id"] = s.image_id;
  return j;
}

Status RevisionFromJson(const Json& j, DeploymentSpec& s) {
  const bool ok =
      j.is_object() && j.contains("command") && j["command"].is_array() && j.value("port", 0) > 0;
  if (!ok) return Status::InvalidArgument("a revision record without command or port");
  s.command = j["command"].get<std::vector<std::string>>();
  s.port = j["port"].get<int>();
  s.env = j.value("env", std::map<std::string, std::string>());
  s.workdir = j.value("workdir", "");
  s.image = j.value("image", "");
  s.image_id = j.value("image_id", "");
  return Status::OK();
}

Json DeploymentSpecToJson(const DeploymentSpec& s) {
  Json j = {{"name", s.name},
            {"gpus", s.resources.gpus},
            {"priority", std::string(run::PriorityName(s.resources.priority))},
            {"preemptible", s.resources.preemptible},
            {"public", s.is_public},
            {"ready_timeout", std::to_string(s.ready_timeout_ms) + "ms"}};
  if (s.autoscaled()) {
    j["autoscale"] = {{"min", s.min_replicas},
                      {"max", s.max_replicas},
                      {"target", s.target_ongoing},
                      {"upscale_delay", std::to_string(s.upscale_delay_ms) + "ms"},
                      {"downscale_delay", std::to_string(s.downscale_delay_ms) + "ms"},
                      {"zero_grace", std::to_string(s.zero_grace_ms) + "ms"}};
  } else {
    j["replicas"] = s.min_replicas;
  }
  if (!s.resources.profile.empty()) j["profile"] = s.resources.profile;
  if (!s.resources.gpu_type.empty()) j["gpu_type"] = s.resources.gpu_type;
  if (s.resources.cpus > 0) j["cpus"] = s.resources.cpus;
  if (s.resources.memory_bytes > 0) j["memory"] = s.resources.memory_bytes;
  if (s.canary_percent > 0) j["canary"] = s.canary_percent;
  if (s.max_batch_size > 0) {
    j["batching"] = {{"max_batch_size", s.max_batch_size},
                     {"max_queue_delay", std::to_string(s.max_queue_delay_us / 1000) + "ms"}};
  }
  if (!s.device.empty()) j["device"] = s.device;
  if (!s.project.empty()) j["project"] = s.project;
  if (s.is_command()) {
    j.update(RevisionToJson(s));
    j["ready"] = s.ready;
    j["revision"] = s.revision;
  } else {
    j["model"] = s.model;
  }
  return j;
}

}  // namespace lathe::deploy
