#include "lathe/run/spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "lathe/common/ids.h"
#include "lathe/common/path_check.h"
#include "lathe/common/units.h"
#include "lathe/common/yaml_json.h"

namespace lathe::run {

bool ValidSecretName(std::string_view name) {
  return name.size() <= kMaxSecretNameBytes && ValidEnvName(name) && !name.starts_with("LATHE_");
}

bool ValidPortName(std::string_view name) {
  if (name.empty() || name.size() > 15 || name[0] < 'a' || name[0] > 'z') return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

std::string_view PriorityName(Priority p) {
  switch (p) {
    case Priority::kLow:
      return "low";
    case Priority::kNormal:
      return "normal";
    case Priority::kHigh:
      return "high";
    default:
      return "normal";
  }
}

std::string_view NetworkName(Network n) { return n == Network::kIsolated ? "isolated" : "host"; }

namespace {

constexpr int kMaxGpus = 1024;
constexpr int kMaxRetry = 100;  // retries of one run; each waits longer (daemon.h)

Status WrongType(std::string_view field, std::string_view type) {
  return Status::Msg(Code::kInvalidArgument, "spec.wrong_type",
                     {{"field", std::string(field)}, {"type", std::string(type)}});
}

// A value as a message quotes it; bytes JSON cannot hold (a YAML file's) become U+FFFD.
std::string Shown(const Json& v) {
  return v.is_string() ? v.get<std::string>()
                       : v.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Result<int> IntField(const Json& v, std::string_view field, int min, int max) {
  auto bad = [&] {
    return Status::Msg(Code::kInvalidArgument, "spec.bad_int",
                       {{"field", std::string(field)},
                        {"min", std::to_string(min)},
                        {"max", std::to_string(max)},
                        {"value", Shown(v)}});
  };
  if (!v.is_number_integer()) return bad();
  int64_t n = v.get<int64_t>();
  if (n < min || n > max) return bad();
  return static_cast<int>(n);
}

Result<uint64_t> SizeField(const Json& v, std::string_view field) {
  auto bad = [&] {
    return Status::Msg(Code::kInvalidArgument, "spec.bad_size",
                       {{"field", std::string(field)}, {"value", Shown(v)}});
  };
  if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0)) {
    return v.get<uint64_t>();
  }
  if (!v.is_string()) return bad();
  auto r = ParseBytes(v.get<std::string>());
  if (!r.ok()) return bad();
  return *r;
}

Result<int64_t> DurationField(const Json& v, std::string_view field) {
  auto bad = [&] {
    return Status::Msg(Code::kInvalidArgument, "spec.bad_duration",
                       {{"field", std::string(field)}, {"value", Shown(v)}});
  };
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return v.get<int64_t>() * 1000;
  if (!v.is_string()) return bad();
  auto r = ParseDuration(v.get<std::string>());
  if (!r.ok()) return bad();
  return r->count();
}

Result<Priority> PriorityField(const Json& v) {
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s == "low") return Priority::kLow;
    if (s == "normal") return Priority::kNormal;
    if (s == "high") return Priority::kHigh;
  } else if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= 2) {
    return static_cast<Priority>(v.get<int64_t>());
  }
  return Status::Msg(Code::kInvalidArgument, "spec.bad_priority", {{"value", Shown(v)}});
}

Result<Network> NetworkField(const Json& v) {
  if (v.is_string() && v.get_ref<const std::string&>() == "host") return Network::kHost;
  if (v.is_string() && v.get_ref<const std::string&>() == "isolated") return Network::kIsolated;
  return Status::Msg(Code::kInvalidArgument, "spec.bad_network", {{"value", Shown(v)}});
}

}  // namespace

bool ValidEnvName(std::string_view k) {
  if (k.empty() || std::isdigit(static_cast<unsigned char>(k[0]))) return false;
  for (char c : k) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

namespace {

// Strings reach the kernel (argv, the environment, paths), where a NUL byte
// would cut them short, and travel to the daemon as JSON, which holds UTF-8
// only: every one is checked with its field.
const std::string& Str(const Json& v) { return v.get_ref<const std::string&>(); }

Status CheckString(std::string_view s, const std::string& field) {
  RETURN_IF_ERROR(CheckNoNul(s, field));
  if (!IsValidUtf8(s))
    return Status::Msg(Code::kInvalidArgument, "input.bad_utf8", {{"field", field}});
  return Status::OK();
}

Status ParseCommand(const Json& v, RunSpec& s) {
  if (!v.is_array()) return WrongType("command", "list of strings");
  for (const auto& a : v) {
    if (!a.is_string()) return WrongType("command", "list of strings");
    RETURN_IF_ERROR(CheckString(Str(a), "command[" + std::to_string(s.command.size()) + "]"));
    s.command.push_back(Str(a));
  }
  return Status::OK();
}

Status ParseEnv(const Json& v, RunSpec& s) {
  if (!v.is_object()) return WrongType("env", "mapping of NAME: value");
  for (auto it = v.begin(); it != v.end(); ++it) {
    RETURN_IF_ERROR(CheckString(it.key(), "env"));
    if (!ValidEnvName(it.key())) {
      return Status::Msg(Code::kInvalidArgument, "spec.bad_env", {{"key", it.key()}});
    }
    if (it->is_string()) {
      RETURN_IF_ERROR(CheckString(Str(*it), "env." + it.key()));
      s.env[it.key()] = Str(*it);
    } else if (it->is_number() || it->is_boolean()) {
      s.env[it.key()] = it->dump();
    } else {
      return WrongType("env." + it.key(), "string");
    }
  }
  return Status::OK();
}

// secrets / secret_files: [NAME, ...]: names of the caller's secrets, each
// once, never one of the LATHE_ variables the daemon sets.
Status ParseSecretList(const Json& v, const std::string& key, std::vector<std::string>& out) {
  if (!v.is_array()) return WrongType(key, "list of secret names");
  if (v.size() > kMaxSecretsPerRun) {
    return Status::Msg(Code::kInvalidArgument, "spec.too_many_secrets",
                       {{"field", key},
                        {"count", std::to_string(v.size())},
                        {"max", std::to_string(kMaxSecretsPerRun)}});
  }
  out.clear();
  for (const auto& n : v) {
    const std::string field = key + "[" + std::to_string(out.size()) + "]";
    if (!n.is_string()) return WrongType(field, "secret name");
    RETURN_IF_ERROR(CheckString(Str(n), field));
    if (!ValidSecretName(Str(n))) {
      return Status::Msg(Code::kInvalidArgument, "spec.bad_secret",
                         {{"field", field}, {"value", Str(n)}});
    }
    if (std::find(out.begin(), out.end(), Str(n)) != out.end()) {
      return Status::Msg(Code::kInvalidArgument, "spec.secret_twice",
                         {{"field", key}, {"name", Str(n)}});
    }
    out.push_back(Str(n));
  }
  return Status::OK();
}

// One entry of ports: 8888 or {name, port} or {name, socket}.
Result<PortSpec> ParsePort(const Json& v, const std::string& field) {
  PortSpec p;
  if (v.is_number_integer()) {
    ASSIGN_OR_RETURN(p.port, IntField(v, field, 1, 65535));
    p.name = "p" + std::to_string(p.port);
    return p;
  }
  if (!v.is_object()) return WrongType(field, "port number or {name, port|socket}");
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string f = field + "." + it.key();
    if (it.key() == "name") {
      if (!it->is_string() || !ValidPortName(Str(*it))) {
        return Status::Msg(Code::kInvalidArgument, "spec.bad_port_name",
                           {{"field", f}, {"value", Shown(*it)}});
      }
      p.name = Str(*it);
    } else if (it.key() == "port") {
      ASSIGN_OR_RETURN(p.port, IntField(*it, f, 1, 65535));
    } else if (it.key() == "socket") {
      if (!it->is_string() || Str(*it).empty() || Str(*it)[0] != '/') {
        return Status::Msg(Code::kInvalidArgument, "spec.bad_port_socket",
                           {{"field", f}, {"value", Shown(*it)}});
      }
      RETURN_IF_ERROR(CheckPathName(Str(*it), f));
      p.socket = Str(*it);
    } else {
      return Status::Msg(Code::kInvalidArgument, "spec.unknown_field",
                         {{"field", f}, {"allowed", "name, port, socket"}});
    }
  }
  if ((p.port == 0) == p.socket.empty()) {
    return Status::Msg(Code::kInvalidArgument, "spec.port_needs_one", {{"field", field}});
  }
  if (p.name.empty()) {
    if (p.port == 0)
      return Status::Msg(Code::kInvalidArgument, "spec.port_needs_name", {{"field", field}});
    p.name = "p" + std::to_string(p.port);
  }
  return p;
}

Status ParsePorts(const Json& v, RunSpec& s) {
  if (!v.is_array()) return WrongType("ports", "list of ports");
  if (v.size() > kMaxPortsPerRun) {
    return Status::Msg(
        Code::kInvalidArgument, "spec.too_many_ports",
        {{"count", std::to_string(v.size())}, {"max", std::to_string(kMaxPortsPerRun)}});
  }
  for (const auto& e : v) {
    ASSIGN_OR_RETURN(PortSpec p, ParsePort(e, "ports[" + std::to_string(s.ports.size()) + "]"));
    for (const auto& q : s.ports) {
      if (q.name == p.name)
        return Status::Msg(Code::kInvalidArgument, "spec.port_twice", {{"name", p.name}});
    }
    s.ports.push_back(std::move(p));
  }
  return Status::OK();
}

Status ParseBool(const Json& v, std::string_view field, bool& out) {
  if (!v.is_boolean()) return WrongType(field, "boolean (true/false)");
  out = v.get<bool>();
  return Status::OK();
}

// umask: 18 (an integer) or "022" (octal digits, as a shell writes it).
Status ParseUmask(const Json& v, RunSpec& s) {
  constexpr int kMaxUmask = 0777;
  if (v.is_string()) {
    const std::string& t = v.get_ref<const std::string&>();
    bool octal =
        !t.empty() && t.size() <= 4 && t.find_first_not_of("01234567") == std::string::npos;
    if (!octal || std::stoi(t, nullptr, 8) > kMaxUmask)
      return WrongType("umask", "octal mask 000-777");
    s.umask = static_cast<unsigned>(std::stoi(t, nullptr, 8));
    return Status::OK();
  }
  ASSIGN_OR_RETURN(int m, IntField(v, "umask", 0, kMaxUmask));
  s.umask = static_cast<unsigned>(m);
  return Status::OK();
}

// checkpoints: {dir: path, keep: N}. A relative dir is resolved against the
// workdir once every field is read (SpecFromJson).
Status ParseCheckpoints(const Json& v, RunSpec& s) {
  if (!v.is_object()) return WrongType("checkpoints", "mapping {dir: path, keep: N}");
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it.key() == "dir") {
      if (!it->is_string() || it->get<std::string>().empty()) {
        return WrongType("checkpoints.dir", "path");
      }
      RETURN_IF_ERROR(CheckString(Str(*it), "checkpoints.dir"));
      s.checkpoint_dir = Str(*it);
    } else if (it.key() == "keep") {
      ASSIGN_OR_RETURN(s.keep_checkpoints, IntField(*it, "checkpoints.keep", 0, 1000000));
    } else if (!it->is_null()) {
      return Status::Msg(Code::kInvalidArgument, "spec.unknown_field",
                         {{"field", "checkpoints." + it.key()}, {"allowed", "dir, keep"}});
    }
  }
  if (s.checkpoint_dir.empty()) {
    return Status::Msg(Code::kInvalidArgument, "spec.checkpoints_no_dir");
  }
  return Status::OK();
}

Status ParseKernels(const Json& v, RunSpec& s) {
  std::string allowed;
  for (auto k : kNotebookKernels) allowed += (allowed.empty() ? "" : ", ") + std::string(k);
  if (!v.is_array() || v.empty()) return WrongType("kernels", "non-empty list of " + allowed);
  s.kernels.clear();
  for (size_t i = 0; i < v.size(); ++i) {
    const Json& k = v[i];
    std::string field = fmt::format("kernels[{}]", i);
    bool known = false;
    for (auto n : kNotebookKernels) known = known || (k.is_string() && k.get<std::string>() == n);
    if (!known) {
      return Status::Msg(Code::kInvalidArgument, "spec.bad_kernel",
                         {{"field", field}, {"value", Shown(k)}, {"allowed", allowed}});
    }
    if (std::find(s.kernels.begin(), s.kernels.end(), k.get<std::string>()) == s.kernels.end())
      s.kernels.push_back(k.get<std::string>());
  }
  return Status::OK();
}

// {name, version, socket}: written by the daemon for a deployment's replica.
Status ParseDeployment(const Json& v, RunSpec& s) {
  const char* kShape = "object {name, version, socket}";
  if (!v.is_object()) return WrongType("deployment", kShape);
  for (auto it = v.begin(); it != v.end(); ++it) {
    std::string field = "deployment." + it.key();
    if (!it->is_string()) return WrongType(field, "string");
    RETURN_IF_ERROR(CheckString(Str(*it), field));
    if (it.key() == "name") {
      s.deployment = it->get<std::string>();
    } else if (it.key() == "version") {
      s.deployment_version = it->get<std::string>();
    } else if (it.key() == "socket") {
      RETURN_IF_ERROR(CheckPathName(Str(*it), field));
      s.deployment_socket = it->get<std::string>();
    } else {
      return WrongType(field, kShape);
    }
  }
  if (s.deployment.empty()) return WrongType("deployment.name", "non-empty string");
  return Status::OK();
}

Status ParseType(const Json& v, RunSpec& s) {
  std::optional<RunKind> kind;
  if (v.is_string()) kind = RunKindFromName(v.get<std::string>());
  if (!kind) return Status::Msg(Code::kInvalidArgument, "spec.bad_type", {{"value", Shown(v)}});
  s.type = *kind;
  return Status::OK();
}

Status ParseName(const Json& v, RunSpec& s) {
  if (!v.is_string() || !IsValidName(v.get<std::string>())) {
    return Status::Msg(Code::kInvalidArgument, "spec.bad_name", {{"value", Shown(v)}});
  }
  s.name = v.get<std::string>();
  return Status::OK();
}

Status ParseCpus(const Json& v, RunSpec& s) {
  if (!v.is_number() || !(v.get<double>() > 0) || v.get<double>() > 4096) {
    return Status::Msg(Code::kInvalidArgument, "spec.bad_cpus", {{"value", Shown(v)}});
  }
  s.cpus = v.get<double>();
  return Status::OK();
}

// A relative workdir only with a workspace (SpecFromJson).
Status ParseWorkdir(const Json& v, RunSpec& s) {
  if (!v.is_string() || v.get<std::string>().empty()) {
    return Status::Msg(Code::kInvalidArgument, "spec.bad_workdir", {{"value", Shown(v)}});
  }
  RETURN_IF_ERROR(CheckPathName(Str(v), "workdir"));
  s.workdir = v.get<std::string>();
  return Status::OK();
}

Status ParsePool(const Json& v, RunSpec& s) {
  if (!v.is_string() || !ValidPoolName(v.get<std::string>())) {
    return WrongType("pool", "a pool's name: 1-32 of a-z, 0-9 and -, starting with a letter");
  }
  s.pool = v.get<std::string>();
  return Status::OK();
}

Status ParseProject(const Json& v, RunSpec& s) {
  if (!v.is_string() || !IsValidName(v.get<std::string>())) {
    return WrongType("project",
                     "a project's name: 1-63 of a-z, 0-9, '.', '_' and '-', starting with a "
                     "letter or digit");
  }
  s.project = v.get<std::string>();
  return Status::OK();
}

Status ParseProfile(const Json& v, RunSpec& s) {
  if (!v.is_string() || !ValidProfileName(v.get<std::string>())) {
    return WrongType("profile", "a profile's name: 1-32 of a-z, 0-9 and -, starting with a letter");
  }
  s.profile = v.get<std::string>();
  return Status::OK();
}

Status ParseImage(const Json& v, RunSpec& s) {
  if (!v.is_string() || !ValidImageRef(v.get<std::string>())) {
    return Status::Msg(Code::kInvalidArgument, "spec.bad_image", {{"value", Shown(v)}});
  }
  s.image = v.get<std::string>();
  return Status::OK();
}

Status ParseImageId(const Json& v, RunSpec& s) {
  if (!v.is_string() || !ValidImageId(v.get<std::string>())) {
    return WrongType("image_id", "an image's id: 64 hex digits, optionally after sha256:");
  }
  std::string id = v.get<std::string>();
  s.image_id = id.size() > 64 ? id.substr(id.size() - 64) : id;
  return Status::OK();
}

// gpu_type and partition.
// A YAML `gpu_type: 4090` is a number: taken as the name it spells.
Status ParseSlurmName(const Json& v, const char* field, std::string& out) {
  std::string text = v.is_number_integer() && v.get<int64_t>() >= 0
                         ? std::to_string(v.get<int64_t>())
                     : v.is_string() ? v.get<std::string>()
                                     : std::string();
  if (!ValidSlurmName(text)) return WrongType(field, "1-64 of letters, digits, _ - .");
  out = text;
  return Status::OK();
}

// nccl: {ib: bool, socket_ifname: name}.
Status ParseNccl(const Json& v, RunSpec& s) {
  if (!v.is_object()) return WrongType("nccl", "mapping {ib: bool, socket_ifname: name}");
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it->is_null()) continue;
    if (it.key() == "ib") {
      bool ib = true;
      RETURN_IF_ERROR(ParseBool(*it, "nccl.ib", ib));
      s.nccl_ib = ib;
    } else if (it.key() == "socket_ifname") {
      if (!it->is_string() || !ValidIfname(Str(*it))) {
        return Status::Msg(Code::kInvalidArgument, "spec.bad_ifname",
                           {{"field", "nccl.socket_ifname"}, {"value", Shown(*it)}});
      }
      s.nccl_socket_ifname = Str(*it);
    } else {
      return Status::Msg(Code::kInvalidArgument, "spec.unknown_field",
                         {{"field", "nccl." + it.key()}, {"allowed", "ib, socket_ifname"}});
    }
  }
  return Status::OK();
}

Status ParseResumeFrom(const Json& v, RunSpec& s) {
  if (!v.is_string() || v.get<std::string>().empty()) {
    return WrongType("resume_from", "run id or name");
  }
  s.resume_from = v.get<std::string>();
  return Status::OK();
}

// Assigns what a field parser returned, or passes its error on.
template <typename T>
Status Assign(Result<T> r, T& out) {
  if (!r.ok()) return r.status();
  out = std::move(*r);
  return Status::OK();
}

using FieldParser = Status (*)(const Json& v, RunSpec& s);
struct Field {
  const char* key;
  FieldParser parse;
};

// Every field a spec may hold, in the order AllowedFields names them.
constexpr Field kFieldTable[] = {
    {"type", ParseType},
    {"name", ParseName},
    {"command", ParseCommand},
    {"gpus",
     [](const Json& v, RunSpec& s) { return Assign(IntField(v, "gpus", 0, kMaxGpus), s.gpus); }},
    {"cpus", ParseCpus},
    {"memory",
     [](const Json& v, RunSpec& s) { return Assign(SizeField(v, "memory"), s.memory_bytes); }},
    {"shm", [](const Json& v, RunSpec& s) { return Assign(SizeField(v, "shm"), s.shm_bytes); }},
    {"priority", [](const Json& v, RunSpec& s) { return Assign(PriorityField(v), s.priority); }},
    {"env", ParseEnv},
    {"workdir", ParseWorkdir},
    {"retry",
     [](const Json& v, RunSpec& s) { return Assign(IntField(v, "retry", 0, kMaxRetry), s.retry); }},
    {"max_duration",
     [](const Json& v, RunSpec& s) {
       return Assign(DurationField(v, "max_duration"), s.max_duration_ms);
     }},
    {"requeue", [](const Json& v, RunSpec& s) { return ParseBool(v, "requeue", s.requeue); }},
    {"preemptible",
     [](const Json& v, RunSpec& s) { return ParseBool(v, "preemptible", s.preemptible); }},
    {"checkpoints", ParseCheckpoints},
    {"resume_from", ParseResumeFrom},
    {"umask", ParseUmask},
    {"secrets", [](const Json& v, RunSpec& s) { return ParseSecretList(v, "secrets", s.secrets); }},
    {"ports", ParsePorts},
    {"network", [](const Json& v, RunSpec& s) { return Assign(NetworkField(v), s.network); }},
    {"secret_files",
     [](const Json& v, RunSpec& s) { return ParseSecretList(v, "secret_files", s.secret_files); }},
    {"kernels", ParseKernels},
    {"idle", [](const Json& v, RunSpec& s) { return Assign(DurationField(v, "idle"), s.idle_ms); }},
    {"workspace",
     [](const Json& v, RunSpec& s) { return Assign(WorkspaceFromJson(v), s.workspace); }},
    {"deployment", ParseDeployment},
    {"pool", ParsePool},
    {"project", ParseProject},
    {"profile", ParseProfile},
    {"gpu_type",
     [](const Json& v, RunSpec& s) { return ParseSlurmName(v, "gpu_type", s.gpu_type); }},
    {"partition",
     [](const Json& v, RunSpec& s) { return ParseSlurmName(v, "partition", s.partition); }},
    {"nodes",
     [](const Json& v, RunSpec& s) { return Assign(IntField(v, "nodes", 1, kMaxNodes), s.nodes); }},
    {"torchrun", [](const Json& v, RunSpec& s) { return ParseBool(v, "torchrun", s.torchrun); }},
    {"nccl", ParseNccl},
    {"image", ParseImage},
    {"image_id", ParseImageId},
    {"image_secret",
     [](const Json& v, RunSpec& s) {
       if (!v.is_string() || !ValidSecretName(Str(v))) {
         return Status::Msg(Code::kInvalidArgument, "spec.bad_secret",
                            {{"field", "image_secret"}, {"value", Shown(v)}});
       }
       s.image_secret = Str(v);
       return Status::OK();
     }},
};

std::string AllowedFields() {
  std::string s;
  for (const Field& f : kFieldTable) s += (s.empty() ? "" : ", ") + std::string(f.key);
  return s;
}

Status ParseField(const std::string& key, const Json& v, RunSpec& s) {
  if (v.is_string()) RETURN_IF_ERROR(CheckString(Str(v), key));  // type, name, workdir, resume_from
  for (const Field& f : kFieldTable) {
    if (key == f.key) return f.parse(v, s);
  }
  return Status::Msg(Code::kInvalidArgument, "spec.unknown_field",
                     {{"field", key}, {"allowed", AllowedFields()}});
}

}  // namespace

bool ValidImageRef(std::string_view ref) {
  if (ref.empty() || ref.size() > 255 || !std::isalnum(static_cast<unsigned char>(ref[0]))) {
    return false;
  }
  return std::all_of(ref.begin(), ref.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
           c == '/' || c == ':' || c == '@';
  });
}

bool ValidImageId(std::string_view id) {
  if (id.starts_with("sha256:")) id.remove_prefix(7);
  return id.size() == 64 && std::all_of(id.begin(), id.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

bool ValidPoolName(std::string_view name) {
  if (name.empty() || name.size() > 32 || name[0] < 'a' || name[0] > 'z') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

bool ValidProfileName(std::string_view name) { return ValidPoolName(name); }

bool ValidSlurmName(std::string_view v) {
  return !v.empty() && v.size() <= 64 && std::all_of(v.begin(), v.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

bool ValidIfname(std::string_view v) { return ValidSlurmName(v); }

std::map<std::string, std::string> NcclEnv(const RunSpec& s) {
  std::map<std::string, std::string> env;
  if (s.nccl_ib.has_value()) env["NCCL_IB_DISABLE"] = *s.nccl_ib ? "0" : "1";
  if (!s.nccl_socket_ifname.empty()) env["NCCL_SOCKET_IFNAME"] = s.nccl_socket_ifname;
  return env;
}

bool IsNotebookSpec(const RunSpec& s) { return s.type == RunKind::kNotebook; }
bool IsServiceSpec(const RunSpec& s) { return s.type == RunKind::kService; }

std::vector<std::string> SecretNames(const RunSpec& spec) {
  std::vector<std::string> out = spec.secrets;
  out.insert(out.end(), spec.secret_files.begin(), spec.secret_files.end());
  return out;
}

Result<RunSpec> SpecFromJson(const Json& j) {
  if (!j.is_object()) return Status::Msg(Code::kInvalidArgument, "json.not_object");
  RunSpec s;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it->is_null()) continue;  // an empty YAML field means "default"
    RETURN_IF_ERROR(ParseField(it.key(), *it, s));
  }
  if (IsNotebookSpec(s)) {
    // Lathe starts Jupyter itself, listening where the daemon says.
    if (!s.command.empty()) return Status::Msg(Code::kInvalidArgument, "spec.notebook_command");
    if (s.kernels.empty()) s.kernels = {"python"};
  } else {
    if (!s.kernels.empty() || s.idle_ms >= 0) {
      return Status::Msg(Code::kInvalidArgument, "spec.notebook_only",
                         {{"field", s.kernels.empty() ? "idle" : "kernels"}});
    }
    if (s.command.empty() || s.command[0].empty()) {
      return Status::Msg(Code::kInvalidArgument, "spec.missing_command");
    }
  }
  if (s.torchrun && s.type != RunKind::kJob) {
    return Status::Msg(Code::kInvalidArgument, "spec.torchrun_job_only");
  }
  if (IsServiceSpec(s) != !s.deployment.empty()) {
    return Status::Msg(Code::kInvalidArgument, "spec.service_deployment");
  }
  RETURN_IF_ERROR(ResolveWorkspaceWorkdir(s.workspace, s.workdir));
  if (!s.checkpoint_dir.empty() && s.checkpoint_dir[0] != '/') {
    if (!s.workspace.git.empty()) {  // the clone's path is the daemon's to choose
      return Status::Msg(Code::kInvalidArgument, "workspace.relative_checkpoint_dir",
                         {{"value", s.checkpoint_dir}});
    }
    if (s.workdir.empty()) {
      return Status::Msg(Code::kInvalidArgument, "spec.relative_checkpoint_dir",
                         {{"value", s.checkpoint_dir}});
    }
    s.checkpoint_dir =
        std::filesystem::path(s.workdir + "/" + s.checkpoint_dir).lexically_normal().string();
  }
  while (s.checkpoint_dir.size() > 1 && s.checkpoint_dir.back() == '/') s.checkpoint_dir.pop_back();
  RETURN_IF_ERROR(CheckPathName(s.checkpoint_dir, "checkpoints.dir"));
  for (const auto& name : s.secrets) {
    if (s.env.count(name)) {
      return Status::Msg(Code::kInvalidArgument, "spec.secret_in_env", {{"name", name}});
    }
  }
  for (const auto& name : s.secret_files) {
    // One way in: a file keeps the value out of the environment.
    if (std::find(s.secrets.begin(), s.secrets.end(), name) != s.secrets.end()) {
      return Status::Msg(Code::kInvalidArgument, "spec.secret_file_and_env", {{"name", name}});
    }
  }
  return s;
}

Json SpecToJson(const RunSpec& s) {
  Json j = {{"type", std::string(RunKindName(s.type))},
            {"command", s.command},
            {"gpus", s.gpus},
            {"priority", std::string(PriorityName(s.priority))},
            {"env", s.env},
            {"retry", s.retry},
            {"requeue", s.requeue},
            {"preemptible", s.preemptible}};
  if (!s.name.empty()) j["name"] = s.name;
  if (s.cpus > 0) j["cpus"] = s.cpus;
  if (s.memory_bytes > 0) j["memory"] = s.memory_bytes;
  if (s.shm_bytes > 0) j["shm"] = s.shm_bytes;
  if (!s.workdir.empty()) j["workdir"] = s.workdir;
  if (!s.checkpoint_dir.empty()) {
    j["checkpoints"] = {{"dir", s.checkpoint_dir}, {"keep", s.keep_checkpoints}};
  }
  if (!s.resume_from.empty()) j["resume_from"] = s.resume_from;
  if (!s.pool.empty()) j["pool"] = s.pool;
  if (!s.project.empty()) j["project"] = s.project;
  if (!s.profile.empty()) j["profile"] = s.profile;
  if (!s.gpu_type.empty()) j["gpu_type"] = s.gpu_type;
  if (!s.partition.empty()) j["partition"] = s.partition;
  if (s.nodes != 1) j["nodes"] = s.nodes;
  if (s.torchrun) j["torchrun"] = true;
  if (!s.image.empty()) j["image"] = s.image;
  if (!s.image_id.empty()) j["image_id"] = s.image_id;
  if (!s.image_secret.empty()) j["image_secret"] = s.image_secret;
  if (s.nccl_ib.has_value() || !s.nccl_socket_ifname.empty()) {
    Json n = Json::object();
    if (s.nccl_ib.has_value()) n["ib"] = *s.nccl_ib;
    if (!s.nccl_socket_ifname.empty()) n["socket_ifname"] = s.nccl_socket_ifname;
    j["nccl"] = std::move(n);
  }
  j["umask"] = s.umask;
  if (!s.secrets.empty()) j["secrets"] = s.secrets;
  if (s.network != Network::kHost) j["network"] = std::string(NetworkName(s.network));
  if (!s.secret_files.empty()) j["secret_files"] = s.secret_files;
  if (!s.workspace.empty()) j["workspace"] = WorkspaceToJson(s.workspace);
  if (!s.ports.empty()) {
    Json ports = Json::array();
    for (const auto& p : s.ports) {
      Json e = {{"name", p.name}};
      if (p.port != 0) e["port"] = p.port;
      if (!p.socket.empty()) e["socket"] = p.socket;
      ports.push_back(std::move(e));
    }
    j["ports"] = std::move(ports);
  }
  if (!s.kernels.empty()) j["kernels"] = s.kernels;
  if (!s.deployment.empty()) {
    j["deployment"] = {
        {"name", s.deployment}, {"version", s.deployment_version}, {"socket", s.deployment_socket}};
  }
  if (s.idle_ms >= 0) {
    j["idle"] = s.idle_ms % 1000 == 0 ? FormatDuration(std::chrono::milliseconds(s.idle_ms))
                                      : std::to_string(s.idle_ms) + "ms";
  }
  if (s.max_duration_ms > 0) {
    // FormatDuration drops milliseconds past the first second: "1.5s" would come back as 1s.
    j["max_duration"] = s.max_duration_ms % 1000 == 0
                            ? FormatDuration(std::chrono::milliseconds(s.max_duration_ms))
                            : std::to_string(s.max_duration_ms) + "ms";
  }
  return j;
}

namespace {

std::string YamlScalarText(const Json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return v.dump();
}

std::string ArgOf(const Status& s, std::string_view key) {
  for (const auto& a : s.args()) {
    if (a.key == key) return a.value;
  }
  return "";
}

// {"checkpoints": {"keep": value}} for field "checkpoints.keep"; null unless
// every part of the field is a plain name (not "command[1]").
Json SpecWithField(const std::string& field, const std::string& value) {
  Json probe;
  Json* at = &probe;
  size_t start = 0;
  while (start <= field.size()) {
    size_t end = std::min(field.find('.', start), field.size());
    std::string part = field.substr(start, end - start);
    if (part.empty()) return nullptr;
    for (char c : part) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return nullptr;
    }
    at = &(*at)[part];
    start = end + 1;
  }
  *at = value;
  return probe;
}

}  // namespace

Result<Json> ParseSpecJson(std::string_view text) {
  auto j = ParseJson(text);
  if (j.ok() || j.status().msg_id() != "json.number_out_of_range") return j;
  // The number cannot be held, but the field's own rule (gpus: a whole number
  // from 0 to 1024) says more than "out of range": check the field alone with
  // the number as written.
  Json probe = SpecWithField(ArgOf(j.status(), "field"), ArgOf(j.status(), "value"));
  if (probe.is_null()) return j.status();
  auto s = SpecFromJson(probe);
  if (!s.ok() && s.status().msg_id() != "spec.missing_command") return s.status();
  return j.status();
}

Result<Json> YamlSpecToJson(std::string_view yaml, std::string_view file) {
  if (yaml.size() > kMaxSpecFileBytes) {
    return Status::Msg(Code::kInvalidArgument, "spec.file_too_large",
                       {{"file", std::string(file)}, {"max", FormatBytes(kMaxSpecFileBytes)}});
  }
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    if (!root.IsMap()) {
      return Status::Msg(Code::kInvalidArgument, "spec.yaml_not_mapping",
                         {{"file", std::string(file)}});
    }
    ASSIGN_OR_RETURN(Json j, YamlToJson(root, file));
    // A command may be written as one string: split on whitespace is wrong for
    // quoting, so run it through the shell instead, as dstack and Slurm do.
    if (j.contains("command") && j["command"].is_string()) {
      j["command"] = Json::array({"/bin/sh", "-c", j["command"].get<std::string>()});
    } else if (j.contains("command") && j["command"].is_array()) {
      // [python3, train.py, --epochs, 3]: every argument is a string.
      for (auto& a : j["command"]) {
        if (!a.is_string() && !a.is_structured()) a = YamlScalarText(a);
      }
    }
    return j;
  } catch (const YAML::Exception& e) {
    return YamlSyntaxError(e, file);
  }
}

}  // namespace lathe::run
