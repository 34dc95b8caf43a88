#include "lathe/daemon/config.h"

#include <algorithm>

#include <yaml-cpp/yaml.h>

#include "lathe/common/units.h"
#include "lathe/common/yaml_json.h"
#include "lathe/os/files.h"
#include "lathe/run/spec.h"

namespace lathe::daemon {
namespace {

constexpr int64_t kMaxRetryBackoffMs = 24LL * 3600 * 1000;
constexpr uint64_t kMinRunLogBytes = 1 << 20;

Status BadKey(std::string_view file, const std::string& key, const std::string& allowed) {
  return Status::Msg(Code::kInvalidArgument, "config.bad_key",
                     {{"file", std::string(file)}, {"key", key}, {"allowed", allowed}});
}

// retention: {finished_runs: 30d, snapshots: true}
Result<RetentionPolicy> ParseRetention(const YAML::Node& node, std::string_view file) {
  RetentionPolicy p;
  if (node.IsNull()) return p;
  if (!node.IsMap()) return BadKey(file, "retention", "a mapping of finished_runs, snapshots");
  for (const auto& kv : node) {
    std::string key = "retention." + kv.first.Scalar();
    if (!kv.second.IsScalar()) return BadKey(file, key, "a single value");
    std::string v = kv.second.Scalar();
    if (key == "retention.finished_runs") {
      if (v == "0") continue;  // keep forever
      auto d = ParseDuration(v);
      if (!d.ok() || d->count() < 0) return BadKey(file, key, "a duration such as 30d, or 0");
      p.finished_runs_ms = d->count();
    } else if (key == "retention.snapshots") {
      if (v == "true" || v == "yes") {
        p.snapshots = true;
      } else if (v != "false" && v != "no") {
        return BadKey(file, key, "true or false");
      }
    } else {
      return BadKey(file, key, "retention.finished_runs, retention.snapshots");
    }
  }
  return p;
}

// allowed_hosts: [lab.example.org, 10.0.0.5]: host names or addresses, each
// as a browser puts it in Host (a port, when given, is ignored).
Result<std::vector<std::string>> ParseAllowedHosts(const YAML::Node& node, std::string_view file) {
  constexpr const char* kWhat = "a list of host names or addresses, such as [lab.example.org]";
  std::vector<std::string> out;
  if (node.IsNull()) return out;
  if (!node.IsSequence()) return BadKey(file, "allowed_hosts", kWhat);
  for (const auto& item : node) {
    if (!item.IsScalar() || item.Scalar().empty()) return BadKey(file, "allowed_hosts", kWhat);
    std::string v = item.Scalar();
    for (char c : v)
      if (c <= ' ' || c == '/' || c == 0x7f) return BadKey(file, "allowed_hosts", kWhat);
    out.push_back(v);
  }
  return out;
}

// tls: {cert: /path, key: /path}
Result<TlsSettings> ParseTls(const YAML::Node& node, std::string_view file) {
  TlsSettings t;
  if (!node.IsMap()) return BadKey(file, "tls", "a mapping of cert, key");
  for (const auto& kv : node) {
    std::string key = "tls." + kv.first.Scalar();
    if (key != "tls.cert" && key != "tls.key") return BadKey(file, key, "tls.cert, tls.key");
    if (!kv.second.IsScalar() || kv.second.Scalar().empty() || kv.second.Scalar()[0] != '/') {
      return BadKey(file, key, "the absolute path of a PEM file");
    }
    (key == "tls.cert" ? t.cert : t.key) = kv.second.Scalar();
  }
  return t;
}

// notebooks: {idle: 30m, poll: 10s, gpu_busy_pct: 5}
Result<NotebookSettings> ParseNotebooks(const YAML::Node& node, std::string_view file) {
  NotebookSettings n;
  constexpr const char* kKeys = "notebooks.idle, notebooks.poll, notebooks.gpu_busy_pct";
  if (!node.IsMap()) return BadKey(file, "notebooks", "a mapping of idle, poll, gpu_busy_pct");
  for (const auto& kv : node) {
    std::string key = "notebooks." + kv.first.Scalar();
    if (!kv.second.IsScalar()) return BadKey(file, key, "a single value");
    std::string v = kv.second.Scalar();
    if (key == "notebooks.idle" || key == "notebooks.poll") {
      auto d = v == "0" ? Result<std::chrono::milliseconds>(std::chrono::milliseconds(0))
                        : ParseDuration(v);
      const bool poll = key == "notebooks.poll";
      if (!d.ok() || d->count() < 0 || (poll && d->count() < 100)) {
        return BadKey(file, key,
                      poll ? "a duration of at least 100ms, such as 10s"
                           : "a duration such as 30m, or 0 (never)");
      }
      (poll ? n.poll_ms : n.idle_ms) = d->count();
    } else if (key == "notebooks.gpu_busy_pct") {
      int pct = -1;
      try {
        pct = std::stoi(v);
      } catch (...) {
      }
      if (pct < 0 || pct > 100) return BadKey(file, key, "a whole number from 0 to 100");
      n.gpu_busy_pct = pct;
    } else {
      return BadKey(file, key, kKeys);
    }
  }
  return n;
}

// deployments: {listen: HOST:PORT, gateway_user: NAME}
Result<DeploymentSettings> ParseDeployments(const YAML::Node& node, std::string_view file) {
  DeploymentSettings d;
  constexpr const char* kKeys =
      "deployments.listen, deployments.gateway_user, deployments.max_per_user";
  if (!node.IsMap()) {
    return BadKey(file, "deployments", "a mapping of listen, gateway_user, max_per_user");
  }
  for (const auto& kv : node) {
    std::string key = "deployments." + kv.first.Scalar();
    if (!kv.second.IsScalar() || kv.second.Scalar().empty()) {
      return BadKey(file, key, "a single value");
    }
    std::string v = kv.second.Scalar();
    if (key == "deployments.listen") {
      RETURN_IF_ERROR(CheckListen(v, file, key));
      d.listen = v;
    } else if (key == "deployments.gateway_user") {
      d.gateway_user = v;
    } else if (key == "deployments.max_per_user") {
      auto n = ParseCount(v);
      if (!n.ok() || *n > 100000) return BadKey(file, key, "a whole number, 0 for no limit");
      d.max_per_user = static_cast<int>(*n);
    } else {
      return BadKey(file, key, kKeys);
    }
  }
  return d;
}

// metrics: {open_on_loopback: true}
Result<MetricsSettings> ParseMetrics(const YAML::Node& node, std::string_view file) {
  MetricsSettings m;
  if (!node.IsMap()) return BadKey(file, "metrics", "a mapping of open_on_loopback");
  for (const auto& kv : node) {
    std::string key = "metrics." + kv.first.Scalar();
    if (key != "metrics.open_on_loopback") return BadKey(file, key, "metrics.open_on_loopback");
    std::string v = kv.second.IsScalar() ? kv.second.Scalar() : "";
    if (v != "true" && v != "false") return BadKey(file, key, "true or false");
    m.open_on_loopback = v == "true";
  }
  return m;
}

// telemetry: {enabled, interval, max_size, idle_pct, idle_for, throttle_pct, throttle_after}
Result<TelemetrySettings> ParseTelemetry(const YAML::Node& node, std::string_view file) {
  TelemetrySettings t;
  constexpr const char* kKeys =
      "telemetry.enabled, telemetry.interval, telemetry.max_size, telemetry.idle_pct, "
      "telemetry.idle_for, telemetry.throttle_pct, telemetry.throttle_after";
  if (!node.IsMap()) return BadKey(file, "telemetry", kKeys);
  auto pct = [&](const std::string& key, const std::string& v) -> Result<int> {
    int n = -1;
    if (!v.empty() && v.find_first_not_of("0123456789") == std::string::npos && v.size() <= 3) {
      n = std::stoi(v);
    }
    if (n < 0 || n > 100) return BadKey(file, key, "a whole number from 0 to 100");
    return n;
  };
  auto duration = [&](const std::string& key, const std::string& v,
                      int64_t min_ms) -> Result<int64_t> {
    auto d = ParseDuration(v);
    if (!d.ok() || d->count() < min_ms) {
      return BadKey(
          file, key,
          min_ms > 0 ? "a duration of at least 100ms, such as 5s" : "a duration such as 10m");
    }
    return d->count();
  };
  for (const auto& kv : node) {
    std::string key = "telemetry." + kv.first.Scalar();
    if (!kv.second.IsScalar()) return BadKey(file, key, "a single value");
    std::string v = kv.second.Scalar();
    if (key == "telemetry.enabled") {
      if (v != "true" && v != "false" && v != "yes" && v != "no") {
        return BadKey(file, key, "true or false");
      }
      t.enabled = v == "true" || v == "yes";
    } else if (key == "telemetry.interval") {
      ASSIGN_OR_RETURN(t.interval_ms, duration(key, v, 100));
    } else if (key == "telemetry.max_size") {
      auto b = ParseBytes(v);
      if (!b.ok() || *b < 1'000'000)
        return BadKey(file, key, "a size of at least 1MB, such as 256MB");
      t.max_bytes = *b;
    } else if (key == "telemetry.idle_pct") {
      ASSIGN_OR_RETURN(t.idle_pct, pct(key, v));
    } else if (key == "telemetry.idle_for") {
      ASSIGN_OR_RETURN(t.idle_ms, duration(key, v, 0));
    } else if (key == "telemetry.throttle_pct") {
      ASSIGN_OR_RETURN(t.throttle_pct, pct(key, v));
    } else if (key == "telemetry.throttle_after") {
      ASSIGN_OR_RETURN(t.throttle_ms, duration(key, v, 0));
    } else {
      return BadKey(file, key, kKeys);
    }
  }
  return t;
}

}  // namespace

Status CheckListen(const std::string& v, std::string_view file, const std::string& key) {
  auto colon = v.rfind(':');
  int port = -1;
  if (colon != std::string::npos && colon > 0 && colon + 1 < v.size() && colon + 6 >= v.size() &&
      v.find_first_not_of("0123456789", colon + 1) == std::string::npos) {
    port = std::stoi(v.substr(colon + 1));
  }
  if (port < 0 || port > 65535) {
    return Status::Msg(Code::kInvalidArgument, "config.bad_key",
                       {{"file", std::string(file)},
                        {"key", key},
                        {"allowed", "HOST:PORT, such as 127.0.0.1:7733 (port 0: any free one)"}});
  }
  return Status::OK();
}

namespace {

// The sections of config.yaml, each parsed by its own function.
struct Section {
  const char* key;
  Status (*parse)(const YAML::Node& node, std::string_view file, DaemonConfig& c);
};
constexpr Section kSections[] = {
    {"retention",
     [](const YAML::Node& n, std::string_view f, DaemonConfig& c) {
       ASSIGN_OR_RETURN(c.retention, ParseRetention(n, f));
       return Status::OK();
     }},
    {"allowed_hosts",
     [](const YAML::Node& n, std::string_view f, DaemonConfig& c) {
       ASSIGN_OR_RETURN(c.allowed_hosts, ParseAllowedHosts(n, f));
       return Status::OK();
     }},
    {"quotas",
     [](const YAML::Node& n, std::string_view f, DaemonConfig& c) {
       if (!c.quotas) c.quotas = QuotaConfig{};
       return ParseQuotas(n, f, *c.quotas);
     }},
    {"fair_share",
     [](const YAML::Node& n, std::string_view f, DaemonConfig& c) {
       if (!c.quotas) c.quotas = QuotaConfig{};
       return ParseFairShare(n, f, *c.quotas);
     }},
    {"tls",
     [](const YAML::Node& n, std::string_view f, DaemonConfig& c) {
       ASSIGN_OR_RETURN(c.tls, ParseTls(n, f));
       return Status::OK();
     }},
    {"notebooks",
     [](const YAML::Node& n, std::string_view f, DaemonConfig& c) {
       ASSIGN_OR_RETURN(c.notebooks, ParseNotebooks(n, f));
       return Status::OK();
     }},
    {"deployments",
     [](const YAML::Node& n, std::string_view f, DaemonConfig& c) {
       ASSIGN_OR_RETURN(c.deployments, ParseDeployments(n, f));
       return Status::OK();
     }},
    {"metrics",
     [](const YAML::Node& n, std::string_view f, DaemonConfig& c) {
       ASSIGN_OR_RETURN(c.metrics, ParseMetrics(n, f));
       return Status::OK();
     }},
    {"telemetry",
     [](const YAML::Node& n, std::string_view f, DaemonConfig& c) {
       ASSIGN_OR_RETURN(c.telemetry, ParseTelemetry(n, f));
       return Status::OK();
     }},
    {"images",
     [](const YAML::Node& n, std::string_view f, DaemonConfig& c) {
       // images: {max_size: 200GiB}
       if (!n.IsMap()) return BadKey(f, "images", "a mapping of max_size");
       for (const auto& kv : n) {
         const std::string key = "images." + kv.first.Scalar();
         if (key != "images.max_size") return BadKey(f, key, "images.max_size");
         auto b = kv.second.IsScalar() ? ParseBytes(kv.second.Scalar())
                                       : Result<uint64_t>(Status::InvalidArgument(""));
         if (!b.ok() || *b < (1ULL << 20)) {
           return BadKey(f, key, "a size of at least 1MiB, such as 200GiB");
         }
         c.images_max_bytes = *b;
       }
       return Status::OK();
     }},
    {"pools",
     [](const YAML::Node& n, std::string_view f, DaemonConfig& c) {
       ASSIGN_OR_RETURN(c.pools, ParsePools(n, f));
       return Status::OK();
     }},
    {"profiles",
     [](const YAML::Node& n, std::string_view f, DaemonConfig& c) {
       ASSIGN_OR_RETURN(c.profiles, ParseProfiles(n, f));
       return Status::OK();
     }},
};

// default_pool names `local` or a pool of the same file.
Status CheckDefaultPool(const DaemonConfig& c, std::string_view file) {
  if (!c.default_pool || *c.default_pool == run::kLocalPool) return Status::OK();
  if (c.pools && c.pools->count(*c.default_pool)) return Status::OK();
  std::string allowed(run::kLocalPool);
  if (c.pools) {
    for (const auto& [name, p] : *c.pools) allowed += ", " + name;
  }
  return BadKey(file, "default_pool", allowed);
}

// Each profile's pool is `local` or a pool of the same file.
Status CheckProfilePools(const DaemonConfig& c, std::string_view file) {
  if (!c.profiles) return Status::OK();
  for (const auto& [name, p] : *c.profiles) {
    if (p.pool.empty() || p.pool == run::kLocalPool || (c.pools && c.pools->count(p.pool))) {
      continue;
    }
    std::string allowed(run::kLocalPool);
    if (c.pools) {
      for (const auto& [pool, s] : *c.pools) allowed += ", " + pool;
    }
    return BadKey(file, "profiles." + name + ".pool", allowed);
  }
  return Status::OK();
}

// A key of a single value (gpus, host, port, grace, retry_backoff*, run_log_max).
Status ParseScalarKey(const std::string& key, const std::string& v, std::string_view file,
                      DaemonConfig& c) {
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
    if (port < 0 || port > 65535) return BadKey(file, key, "a port number 0-65535");
    c.port = port;
  } else if (key == "grace") {
    if (!ParseDuration(v).ok()) return BadKey(file, key, "a duration such as 10s");
    c.grace = v;
  } else if (key == "retry_backoff" || key == "retry_backoff_max") {
    auto d = ParseDuration(v);
    if (!d.ok() || d->count() < 0 || d->count() > kMaxRetryBackoffMs) {
      return BadKey(file, key, "a duration from 0s to 24h, such as 1s");
    }
    (key == "retry_backoff" ? c.retry_backoff_ms : c.retry_backoff_max_ms) = d->count();
  } else if (key == "default_pool") {
    c.default_pool = v;
  } else if (key == "run_log_max") {
    auto b = ParseBytes(v);
    if (!b.ok() || *b < kMinRunLogBytes)
      return BadKey(file, key, "a size of at least 1MiB, such as 10GiB");
    c.run_log_max_bytes = *b;
  } else {
    return BadKey(file, key,
                  "gpus, host, port, grace, retention, tls, allowed_hosts, quotas, fair_share, "
                  "notebooks, deployments, metrics, telemetry, retry_backoff, retry_backoff_max, "
                  "run_log_max, images, pools, default_pool, profiles");
  }
  return Status::OK();
}

}  // namespace

Result<DaemonConfig> ParseDaemonConfig(std::string_view yaml, std::string_view file) {
  DaemonConfig c;
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    if (root.IsNull()) return c;
    // A key given twice (yaml-cpp keeps both; the sections read the last).
    if (auto checked = YamlToJson(root, file); !checked.ok()) return checked.status();
    if (!root.IsMap()) {
      return BadKey(file, "(top level)",
                    "a mapping of gpus, host, port, grace, retention, tls, allowed_hosts, quotas, "
                    "fair_share, notebooks, deployments, metrics, telemetry, pools, "
                    "default_pool, profiles");
    }
    for (const auto& kv : root) {
      const std::string key = kv.first.Scalar();
      const Section* section = std::find_if(std::begin(kSections), std::end(kSections),
                                            [&](const Section& s) { return key == s.key; });
      if (section != std::end(kSections)) {
        RETURN_IF_ERROR(section->parse(kv.second, file, c));
        continue;
      }
      if (!kv.second.IsScalar()) return BadKey(file, key, "a single value");
      RETURN_IF_ERROR(ParseScalarKey(key, kv.second.Scalar(), file, c));
    }
    RETURN_IF_ERROR(CheckDefaultPool(c, file));
    RETURN_IF_ERROR(CheckProfilePools(c, file));
  } catch (const YAML::Exception& e) {
    return YamlSyntaxError(e, file);
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
