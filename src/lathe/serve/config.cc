#include "lathe/serve/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>

#include <re2/re2.h>

#include "lathe/common/units.h"
#include "lathe/common/yaml_json.h"

namespace lathe::serve {
namespace {

constexpr int kMaxPriorityLevels = 100;
constexpr int kMaxInstances = 256;
constexpr int kMaxBatchSize = 1 << 20;

std::string Join(std::initializer_list<std::string_view> items) {
  std::string s;
  for (auto i : items) s += (s.empty() ? "" : ", ") + std::string(i);
  return s;
}

std::string ShortValue(const Json& v) {
  std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

// Validates fields of one config file; every error names the file and the path.
class Checker {
 public:
  explicit Checker(std::string file) : file_(std::move(file)) {}

  Status Unknown(const Json& obj, const std::string& path,
                 std::initializer_list<std::string_view> allowed) const {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      if (std::find(allowed.begin(), allowed.end(), it.key()) == allowed.end()) {
        return Status::Msg(
            Code::kInvalidArgument, "serve.config_unknown_field",
            {{"file", file_}, {"field", Path(path, it.key())}, {"allowed", Join(allowed)}});
      }
    }
    return Status::OK();
  }
  Status Type(const std::string& field, const char* type) const {
    return Status::Msg(Code::kInvalidArgument, "serve.config_type",
                       {{"file", file_}, {"field", field}, {"type", type}});
  }
  Status Value(const std::string& field, const Json& value, const std::string& allowed) const {
    return Status::Msg(
        Code::kInvalidArgument, "serve.config_value",
        {{"file", file_}, {"field", field}, {"value", ShortValue(value)}, {"allowed", allowed}});
  }
  Status Missing(const std::string& field) const {
    return Status::Msg(Code::kInvalidArgument, "serve.config_missing",
                       {{"file", file_}, {"field", field}});
  }
  Result<int64_t> Int(const Json& v, const std::string& field, int64_t lo, int64_t hi) const {
    if (!v.is_number_integer()) return Type(field, "integer");
    int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) {
      return Value(field, v, "an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
    }
    return x;
  }
  Result<std::string> Str(const Json& v, const std::string& field) const {
    if (!v.is_string()) return Type(field, "string");
    return v.get<std::string>();
  }
  static std::string Path(const std::string& base, const std::string& key) {
    return base.empty() ? key : base + "." + key;
  }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

Result<TensorSpec> ParseTensorSpec(const Checker& c, const Json& j, const std::string& path) {
  if (!j.is_object()) return c.Type(path, "mapping {name, datatype, dims}");
  RETURN_IF_ERROR(c.Unknown(j, path, {"name", "datatype", "dims"}));
  TensorSpec t;
  if (!j.contains("name")) return c.Missing(path + ".name");
  ASSIGN_OR_RETURN(t.name, c.Str(j["name"], path + ".name"));
  static const RE2 kName("[A-Za-z0-9_.:/-]{1,128}");
  if (!RE2::FullMatch(t.name, kName) || t.name == LATHE_JSON_TENSOR_NAME) {
    return c.Value(path + ".name", j["name"], "1-128 letters, digits and _ . : / - (not __json__)");
  }
  if (!j.contains("datatype")) return c.Missing(path + ".datatype");
  ASSIGN_OR_RETURN(std::string dt, c.Str(j["datatype"], path + ".datatype"));
  auto parsed = ParseDataType(dt);
  if (!parsed) return c.Value(path + ".datatype", j["datatype"], DataTypeNames());
  t.datatype = *parsed;
  if (j.contains("dims") && !j["dims"].is_null()) {
    if (!j["dims"].is_array()) return c.Type(path + ".dims", "list of integers");
    Shape dims;
    for (size_t i = 0; i < j["dims"].size(); ++i) {
      const Json& d = j["dims"][i];
      std::string f = path + ".dims[" + std::to_string(i) + "]";
      if (!d.is_number_integer() || (d.get<int64_t>() < 1 && d.get<int64_t>() != -1)) {
        return c.Value(f, d, "a positive integer, or -1 for a variable size");
      }
      dims.push_back(d.get<int64_t>());
    }
    t.dims = dims;
  }
  return t;
}

Result<std::vector<TensorSpec>> ParseTensorList(const Checker& c, const Json& j,
                                                const std::string& path) {
  std::vector<TensorSpec> out;
  if (j.is_null()) return out;
  if (!j.is_array()) return c.Type(path, "list of {name, datatype, dims}");
  for (size_t i = 0; i < j.size(); ++i) {
    ASSIGN_OR_RETURN(TensorSpec t, ParseTensorSpec(c, j[i], path + "[" + std::to_string(i) + "]"));
    for (const auto& o : out) {
      if (o.name == t.name)
        return c.Value(path + "[" + std::to_string(i) + "].name", j[i]["name"],
                       "a name not used twice");
    }
    out.push_back(std::move(t));
  }
  return out;
}

Result<QueuePolicy> ParseQueuePolicy(const Checker& c, const Json& j, const std::string& path,
                                     QueuePolicy base) {
  if (j.is_null()) return base;
  if (!j.is_object()) return c.Type(path, "mapping");
  RETURN_IF_ERROR(
      c.Unknown(j, path, {"max_size", "timeout_us", "on_timeout", "allow_timeout_override"}));
  if (j.contains("max_size")) {
    ASSIGN_OR_RETURN(int64_t v, c.Int(j["max_size"], path + ".max_size", 0, 1 << 24));
    base.max_size = static_cast<size_t>(v);
  }
  if (j.contains("timeout_us")) {
    ASSIGN_OR_RETURN(base.timeout_us,
                     c.Int(j["timeout_us"], path + ".timeout_us", 0, int64_t{1} << 50));
  }
  if (j.contains("on_timeout")) {
    ASSIGN_OR_RETURN(std::string a, c.Str(j["on_timeout"], path + ".on_timeout"));
    if (a == "reject") {
      base.on_timeout = TimeoutAction::kReject;
    } else if (a == "delay") {
      base.on_timeout = TimeoutAction::kDelay;
    } else {
      return c.Value(path + ".on_timeout", j["on_timeout"], "reject, delay");
    }
  }
  if (j.contains("allow_timeout_override")) {
    if (!j["allow_timeout_override"].is_boolean())
      return c.Type(path + ".allow_timeout_override", "boolean");
    base.allow_timeout_override = j["allow_timeout_override"].get<bool>();
  }
  return base;
}

Status ParseBatching(const Checker& c, const Json& j, int max_batch_size, BatchingConfig& b) {
  const std::string path = "dynamic_batching";
  if (j.is_null() || (j.is_boolean() && !j.get<bool>())) {
    b.queues.assign(static_cast<size_t>(b.priority_levels), QueuePolicy{});
    return Status::OK();
  }
  if (j.is_boolean()) {
    b.enabled = true;
    b.queues.assign(static_cast<size_t>(b.priority_levels), QueuePolicy{});
    return Status::OK();
  }
  if (!j.is_object()) return c.Type(path, "mapping (or true)");
  RETURN_IF_ERROR(c.Unknown(j, path,
                            {"max_queue_delay_us", "preferred_batch_sizes", "priority_levels",
                             "default_priority", "queue", "priority_queues"}));
  b.enabled = true;
  if (j.contains("max_queue_delay_us")) {
    ASSIGN_OR_RETURN(b.max_queue_delay_us,
                     c.Int(j["max_queue_delay_us"], path + ".max_queue_delay_us", 0, 60'000'000));
  }
  if (j.contains("preferred_batch_sizes")) {
    const Json& p = j["preferred_batch_sizes"];
    if (!p.is_array()) return c.Type(path + ".preferred_batch_sizes", "list of integers");
    for (size_t i = 0; i < p.size(); ++i) {
      std::string f = path + ".preferred_batch_sizes[" + std::to_string(i) + "]";
      ASSIGN_OR_RETURN(int64_t v, c.Int(p[i], f, 1, std::max(1, max_batch_size)));
      b.preferred_batch_sizes.push_back(static_cast<int>(v));
    }
    std::sort(b.preferred_batch_sizes.begin(), b.preferred_batch_sizes.end());
    b.preferred_batch_sizes.erase(
        std::unique(b.preferred_batch_sizes.begin(), b.preferred_batch_sizes.end()),
        b.preferred_batch_sizes.end());
  }
  if (j.contains("priority_levels")) {
    ASSIGN_OR_RETURN(int64_t v,
                     c.Int(j["priority_levels"], path + ".priority_levels", 1, kMaxPriorityLevels));
    b.priority_levels = static_cast<int>(v);
    b.default_priority = (b.priority_levels + 1) / 2;
  }
  if (j.contains("default_priority")) {
    ASSIGN_OR_RETURN(
        int64_t v, c.Int(j["default_priority"], path + ".default_priority", 1, b.priority_levels));
    b.default_priority = static_cast<int>(v);
  }
  QueuePolicy base;
  if (j.contains("queue")) {
    ASSIGN_OR_RETURN(base, ParseQueuePolicy(c, j["queue"], path + ".queue", base));
  }
  b.queues.assign(static_cast<size_t>(b.priority_levels), base);
  if (j.contains("priority_queues") && !j["priority_queues"].is_null()) {
    const Json& pq = j["priority_queues"];
    if (!pq.is_object()) return c.Type(path + ".priority_queues", "mapping level → queue policy");
    for (auto it = pq.begin(); it != pq.end(); ++it) {
      std::string f = path + ".priority_queues." + it.key();
      char* end = nullptr;
      long level = std::strtol(it.key().c_str(), &end, 10);
      if (it.key().empty() || *end != '\0' || level < 1 || level > b.priority_levels) {
        return c.Value(f, it.key(),
                       "a priority level from 1 to " + std::to_string(b.priority_levels));
      }
      ASSIGN_OR_RETURN(b.queues[static_cast<size_t>(level - 1)], ParseQueuePolicy(c, *it, f, base));
    }
  }
  return Status::OK();
}

Result<InstanceGroup> ParseInstanceGroup(const Checker& c, const Json& j, const std::string& path) {
  if (!j.is_object()) return c.Type(path, "mapping {count, device}");
  RETURN_IF_ERROR(c.Unknown(j, path, {"count", "device"}));
  InstanceGroup g;
  if (j.contains("count")) {
    ASSIGN_OR_RETURN(int64_t v, c.Int(j["count"], path + ".count", 1, kMaxInstances));
    g.count = static_cast<int>(v);
  }
  if (j.contains("device")) {
    ASSIGN_OR_RETURN(std::string d, c.Str(j["device"], path + ".device"));
    int idx = 0;
    if (d == "cpu") {
      g.device = DeviceKind::kCpu;
    } else if (d == "auto") {
      g.device = DeviceKind::kAuto;
    } else if (RE2::FullMatch(d, R"(cuda:(\d{1,3}))", &idx)) {
      g.device = DeviceKind::kCuda;
      g.device_index = idx;
    } else {
      return c.Value(path + ".device", j["device"],
                     "cpu, cuda:N (N among the visible devices), auto");
    }
  }
  return g;
}

Result<VersionPolicy> ParseVersionPolicy(const Checker& c, const Json& j) {
  const std::string path = "version_policy";
  VersionPolicy p;
  if (j.is_null()) return p;
  const std::string allowed = "{latest: N}, {all: true}, {specific: [versions]}";
  if (!j.is_object() || j.size() != 1) return c.Value(path, j, allowed);
  RETURN_IF_ERROR(c.Unknown(j, path, {"latest", "all", "specific"}));
  if (j.contains("latest")) {
    p.kind = VersionPolicy::Kind::kLatest;
    ASSIGN_OR_RETURN(int64_t n, c.Int(j["latest"], path + ".latest", 1, 1000));
    p.latest = static_cast<int>(n);
  } else if (j.contains("all")) {
    if (!j["all"].is_boolean() || !j["all"].get<bool>())
      return c.Value(path + ".all", j["all"], "true");
    p.kind = VersionPolicy::Kind::kAll;
  } else {
    p.kind = VersionPolicy::Kind::kSpecific;
    const Json& s = j["specific"];
    if (!s.is_array() || s.empty())
      return c.Type(path + ".specific", "non-empty list of version numbers");
    for (size_t i = 0; i < s.size(); ++i) {
      ASSIGN_OR_RETURN(int64_t v, c.Int(s[i], path + ".specific[" + std::to_string(i) + "]", 1,
                                        int64_t{1} << 53));
      p.versions.push_back(v);
    }
  }
  return p;
}

Status ParseWarmup(const Checker& c, const Json& j, ModelConfig& m) {
  if (j.is_null()) return Status::OK();
  if (j.is_boolean()) {
    if (j.get<bool>())
      return c.Value("warmup", j, "false, {inputs: {NAME: {data, shape}}}, {json: ...}");
    m.warmup = false;
    return Status::OK();
  }
  if (!j.is_object()) return c.Type("warmup", "mapping {inputs: ...} or {json: ...}");
  RETURN_IF_ERROR(c.Unknown(j, "warmup", {"inputs", "json"}));
  if (j.contains("inputs") == j.contains("json")) {
    return c.Value("warmup", j, "exactly one of inputs, json");
  }
  if (j.contains("inputs")) {
    const Json& in = j["inputs"];
    if (!in.is_object() || in.empty())
      return c.Type("warmup.inputs", "mapping NAME → {data, shape}");
    for (auto it = in.begin(); it != in.end(); ++it) {
      std::string f = "warmup.inputs." + it.key();
      if (!it->is_object()) return c.Type(f, "mapping {data, shape[, datatype]}");
      RETURN_IF_ERROR(c.Unknown(*it, f, {"data", "shape", "datatype"}));
      if (!it->contains("data")) return c.Missing(f + ".data");
      if (!it->contains("shape")) return c.Missing(f + ".shape");
      if (!(*it)["shape"].is_array()) return c.Type(f + ".shape", "list of integers");
      if (!m.inputs.empty() &&
          std::none_of(m.inputs.begin(), m.inputs.end(),
                       [&](const TensorSpec& t) { return t.name == it.key(); })) {
        std::string names;
        for (const auto& t : m.inputs) names += (names.empty() ? "" : ", ") + t.name;
        return c.Value(f, it.key(), "an input of the model: " + names);
      }
    }
  }
  m.warmup = j;
  return Status::OK();
}

Status CheckTopLevel(const Checker& c, const Json& j) {
  return c.Unknown(j, "",
                   {"name", "backend", "max_batch_size", "inputs", "outputs", "dynamic_batching",
                    "instances", "threads_per_instance", "version_policy", "default_model_filename",
                    "warmup", "health_probe_interval", "parameters"});
}

Status ParseBasics(const Checker& c, const Json& j, const std::string& dir_name, ModelConfig& m) {
  m.name = dir_name;
  if (j.contains("name")) {
    ASSIGN_OR_RETURN(std::string n, c.Str(j["name"], "name"));
    if (!dir_name.empty() && n != dir_name)
      return c.Value("name", j["name"], "'" + dir_name + "' (the directory's name)");
    m.name = n;
  }
  if (!j.contains("backend")) return c.Missing("backend");
  ASSIGN_OR_RETURN(m.backend, c.Str(j["backend"], "backend"));
  if (!RE2::FullMatch(m.backend, "[a-z][a-z0-9_]{0,31}")) {
    return c.Value("backend", j["backend"],
                   "torchscript, process, identity (or another installed backend)");
  }
  if (j.contains("max_batch_size")) {
    ASSIGN_OR_RETURN(int64_t v, c.Int(j["max_batch_size"], "max_batch_size", 0, kMaxBatchSize));
    m.max_batch_size = static_cast<int>(v);
  }
  if (j.contains("threads_per_instance")) {
    ASSIGN_OR_RETURN(int64_t v, c.Int(j["threads_per_instance"], "threads_per_instance", 0, 1024));
    m.threads_per_instance = static_cast<int>(v);
  }
  if (j.contains("default_model_filename")) {
    ASSIGN_OR_RETURN(m.default_model_filename,
                     c.Str(j["default_model_filename"], "default_model_filename"));
    if (m.default_model_filename.empty() ||
        m.default_model_filename.find('/') != std::string::npos ||
        m.default_model_filename == "..") {
      return c.Value("default_model_filename", j["default_model_filename"],
                     "a file name without '/'");
    }
  }
  if (j.contains("health_probe_interval")) {
    const Json& h = j["health_probe_interval"];
    if (h.is_number_integer() && h.get<int64_t>() == 0) {
      m.health_probe_interval_ms = 0;
    } else {
      auto d = h.is_string() ? ParseDuration(h.get<std::string>())
                             : Result<std::chrono::milliseconds>(Status::InvalidArgument(""));
      if (!d.ok() || d->count() < 0)
        return c.Value("health_probe_interval", h,
                       "a duration such as 10s, 500ms, 1m; 0 turns probes off");
      m.health_probe_interval_ms = d->count();
    }
  }
  if (j.contains("parameters") && !j["parameters"].is_null()) {
    if (!j["parameters"].is_object()) return c.Type("parameters", "mapping");
    m.parameters = j["parameters"];
  }
  return Status::OK();
}

}  // namespace

std::string DefaultModelFilename(const std::string& backend) {
  if (backend == "torchscript") return "model.pt";
  if (backend == "process") return "handler.py";
  return "";
}

Result<ModelConfig> ModelConfigFromJson(const Json& j, const std::string& file,
                                        const std::string& dir_name) {
  Checker c(file);
  if (!j.is_object()) return c.Type("(top level)", "mapping");
  RETURN_IF_ERROR(CheckTopLevel(c, j));
  ModelConfig m;
  m.file = file;
  RETURN_IF_ERROR(ParseBasics(c, j, dir_name, m));
  ASSIGN_OR_RETURN(m.inputs, ParseTensorList(c, j.value("inputs", Json()), "inputs"));
  ASSIGN_OR_RETURN(m.outputs, ParseTensorList(c, j.value("outputs", Json()), "outputs"));
  if (j.contains("dynamic_batching") && !j["dynamic_batching"].is_null() && m.max_batch_size == 0 &&
      !(j["dynamic_batching"].is_boolean() && !j["dynamic_batching"].get<bool>())) {
    return c.Value("max_batch_size", 0, "an integer from 1 when dynamic_batching is set");
  }
  RETURN_IF_ERROR(
      ParseBatching(c, j.value("dynamic_batching", Json()), m.max_batch_size, m.batching));
  if (j.contains("instances") && !j["instances"].is_null()) {
    const Json& in = j["instances"];
    if (!in.is_array() || in.empty())
      return c.Type("instances", "non-empty list of {count, device}");
    for (size_t i = 0; i < in.size(); ++i) {
      ASSIGN_OR_RETURN(InstanceGroup g,
                       ParseInstanceGroup(c, in[i], "instances[" + std::to_string(i) + "]"));
      m.instances.push_back(g);
    }
  } else {
    m.instances.push_back(InstanceGroup{});
  }
  ASSIGN_OR_RETURN(m.version_policy, ParseVersionPolicy(c, j.value("version_policy", Json())));
  RETURN_IF_ERROR(ParseWarmup(c, j.value("warmup", Json()), m));
  return m;
}

Result<ModelConfig> ParseModelConfig(std::string_view yaml, const std::string& file,
                                     const std::string& dir_name) {
  Json j;
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    if (!root.IsMap()) {
      return Status::Msg(
          Code::kInvalidArgument, "serve.config_yaml",
          {{"file", file}, {"detail", "the top level must be a mapping (field: value)"}});
    }
    ASSIGN_OR_RETURN(j, YamlToJson(root, file));
  } catch (const YAML::Exception& e) {
    return Status::Msg(Code::kInvalidArgument, "serve.config_yaml",
                       {{"file", file}, {"detail", e.what()}});
  }
  return ModelConfigFromJson(j, file, dir_name);
}

ModelConfig DefaultModelConfig(const std::string& name, const std::string& backend) {
  ModelConfig m;
  m.name = name;
  m.backend = backend;
  m.instances.push_back(InstanceGroup{});
  m.batching.queues.assign(static_cast<size_t>(m.batching.priority_levels), QueuePolicy{});
  return m;
}

namespace {
Json TensorSpecsToJson(const std::vector<TensorSpec>& specs) {
  Json a = Json::array();
  for (const auto& t : specs) {
    Json o = {{"name", t.name},
              {"datatype",
               t.datatype == DataType::kInvalid ? "" : std::string(DataTypeName(t.datatype))}};
    o["dims"] = t.dims ? Json(*t.dims) : Json(nullptr);
    a.push_back(o);
  }
  return a;
}
Json QueueToJson(const QueuePolicy& q) {
  return {{"max_size", q.max_size},
          {"timeout_us", q.timeout_us},
          {"on_timeout", q.on_timeout == TimeoutAction::kReject ? "reject" : "delay"},
          {"allow_timeout_override", q.allow_timeout_override}};
}
}  // namespace

Json ModelConfigToJson(const ModelConfig& c) {
  Json j = {
      {"name", c.name},
      {"backend", c.backend},
      {"max_batch_size", c.max_batch_size},
      {"inputs", TensorSpecsToJson(c.inputs)},
      {"outputs", TensorSpecsToJson(c.outputs)},
      {"threads_per_instance", c.threads_per_instance},
      {"default_model_filename", c.default_model_filename.empty() ? DefaultModelFilename(c.backend)
                                                                  : c.default_model_filename},
      {"health_probe_interval", std::to_string(c.health_probe_interval_ms) + "ms"},
      {"parameters", c.parameters}};
  if (c.batching.enabled) {
    Json pq = Json::object();
    for (size_t i = 0; i < c.batching.queues.size(); ++i)
      pq[std::to_string(i + 1)] = QueueToJson(c.batching.queues[i]);
    j["dynamic_batching"] = {{"max_queue_delay_us", c.batching.max_queue_delay_us},
                             {"preferred_batch_sizes", c.batching.preferred_batch_sizes},
                             {"priority_levels", c.batching.priority_levels},
                             {"default_priority", c.batching.default_priority},
                             {"priority_queues", pq}};
  } else {
    j["dynamic_batching"] = nullptr;
  }
  Json inst = Json::array();
  for (const auto& g : c.instances) {
    std::string dev = g.device == DeviceKind::kCpu    ? "cpu"
                      : g.device == DeviceKind::kAuto ? "auto"
                                                      : "cuda:" + std::to_string(g.device_index);
    inst.push_back({{"count", g.count}, {"device", dev}});
  }
  j["instances"] = inst;
  switch (c.version_policy.kind) {
    case VersionPolicy::Kind::kLatest:
      j["version_policy"] = {{"latest", c.version_policy.latest}};
      break;
    case VersionPolicy::Kind::kAll:
      j["version_policy"] = {{"all", true}};
      break;
    case VersionPolicy::Kind::kSpecific:
      j["version_policy"] = {{"specific", c.version_policy.versions}};
      break;
  }
  j["warmup"] = c.warmup;
  return j;
}

std::optional<int> ParsePriority(std::string_view text, const BatchingConfig& b) {
  if (text == "high") return 1;
  if (text == "low") return b.priority_levels;
  if (text == "normal" || text == "default") return b.default_priority;
  int v = 0;
  if (!text.empty() && RE2::FullMatch(text, R"((\d{1,3}))", &v) && v >= 1 && v <= b.priority_levels)
    return v;
  return std::nullopt;
}

}  // namespace lathe::serve
