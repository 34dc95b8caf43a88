#include "lathe/daemon/pool_config.h"

#include <algorithm>

#include <yaml-cpp/yaml.h>

#include "lathe/common/units.h"
#include "lathe/run/spec.h"

namespace lathe::daemon {
namespace {

constexpr int64_t kMaxSignalGraceMs = 3600 * 1000;
constexpr int64_t kMinTokenLifespanMs = 60 * 1000;
constexpr int64_t kMaxTokenLifespanMs = 24 * 3600 * 1000;

Status BadKey(std::string_view file, const std::string& key, const std::string& allowed) {
  return Status::Msg(Code::kInvalidArgument, "config.bad_key",
                     {{"file", std::string(file)}, {"key", key}, {"allowed", allowed}});
}

// A Slurm partition, account or QOS: what Slurm's own names use.
bool SlurmName(std::string_view v) {
  return !v.empty() && v.size() <= 64 && std::all_of(v.begin(), v.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

bool AbsolutePath(std::string_view v) {
  return !v.empty() && v[0] == '/' && v.find('\n') == std::string_view::npos &&
         v.find('\0') == std::string_view::npos;
}

Status ParseKey(const std::string& key, const std::string& field, const std::string& v,
                std::string_view file, PoolSettings& pool) {
  exec::SlurmPoolOptions& p = pool.slurm;
  if (field == "type") {
    if (v != "slurm") return BadKey(file, key, "slurm");
    pool.type = v;
  } else if (field == "partition" || field == "account" || field == "qos") {
    if (!SlurmName(v)) return BadKey(file, key, "a Slurm name: letters, digits, _ - .");
    (field == "partition" ? p.partition : field == "account" ? p.account : p.qos) = v;
  } else if (field == "shared_dir" || field == "slurm_conf" || field == "lathe_path" ||
             field == "bin_dir") {
    if (!AbsolutePath(v)) return BadKey(file, key, "an absolute path");
    (field == "shared_dir"   ? p.shared_dir
     : field == "slurm_conf" ? p.slurm_conf
     : field == "lathe_path" ? p.lathe_path
                             : p.bin_dir) = v;
  } else if (field == "signal_grace") {
    auto d = v == "0" ? Result<std::chrono::milliseconds>(std::chrono::milliseconds(0))
                      : ParseDuration(v);
    if (!d.ok() || d->count() < 0 || d->count() > kMaxSignalGraceMs) {
      return BadKey(file, key, "a duration from 0s to 1h, such as 90s");
    }
    p.signal_grace_ms = d->count();
  } else {
    return BadKey(file, key,
                  "type, partition, account, qos, shared_dir, signal_grace, slurm_conf, "
                  "lathe_path, bin_dir, rest");
  }
  return Status::OK();
}

// A URL slurmrestd listens on: http(s)://host[:port] or unix:/path.
bool RestUrl(std::string_view v) {
  if (v.find_first_of(" \t\r\n") != std::string_view::npos) return false;
  if (v.rfind("unix:/", 0) == 0) return v.size() > 6;
  for (std::string_view scheme : {"http://", "https://"}) {
    if (v.rfind(scheme, 0) == 0) {
      std::string_view host = v.substr(scheme.size());
      return !host.empty() && host.find('/') == std::string_view::npos;
    }
  }
  return false;
}

// pools.<name>.rest: {url, version, token_lifespan}.
Status ParseRest(const std::string& prefix, const YAML::Node& node, std::string_view file,
                 exec::SlurmRestOptions& rest) {
  if (!node.IsMap()) return BadKey(file, prefix, "a mapping of url, version, token_lifespan");
  for (const auto& kv : node) {
    const std::string field = kv.first.Scalar();
    const std::string key = prefix + "." + field;
    if (!kv.second.IsScalar() || kv.second.Scalar().empty()) {
      return BadKey(file, key, "a single value");
    }
    const std::string v = kv.second.Scalar();
    if (field == "url") {
      if (!RestUrl(v))
        return BadKey(file, key, "http://host:port, https://host:port or unix:/path");
      rest.url = v;
    } else if (field == "version") {
      const bool ok = v.size() > 1 && v.size() <= 16 && v[0] == 'v' &&
                      std::all_of(v.begin() + 1, v.end(),
                                  [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
      if (!ok) return BadKey(file, key, "an OpenAPI plugin version such as v0.0.38");
      rest.version = v;
    } else if (field == "token_lifespan") {
      auto d = ParseDuration(v);
      if (!d.ok() || d->count() < kMinTokenLifespanMs || d->count() > kMaxTokenLifespanMs) {
        return BadKey(file, key, "a duration from 1m to 24h, such as 30m");
      }
      rest.token_lifespan_ms = d->count();
    } else {
      return BadKey(file, key, "url, version, token_lifespan");
    }
  }
  if (rest.url.empty()) return BadKey(file, prefix + ".url", "http://host:port or unix:/path");
  return Status::OK();
}

Result<PoolSettings> ParsePool(const std::string& name, const YAML::Node& node,
                               std::string_view file) {
  const std::string prefix = "pools." + name;
  if (!run::ValidPoolName(name) || name == run::kLocalPool) {
    return BadKey(file, prefix,
                  "a pool name: 1-32 of a-z, 0-9 and -, starting with a letter, not 'local'");
  }
  if (!node.IsMap()) return BadKey(file, prefix, "a mapping of type, shared_dir, ...");
  PoolSettings p;
  p.slurm.name = name;
  for (const auto& kv : node) {
    const std::string field = kv.first.Scalar();
    const std::string key = prefix + "." + field;
    if (field == "rest") {
      RETURN_IF_ERROR(ParseRest(key, kv.second, file, p.slurm.rest));
      continue;
    }
    if (!kv.second.IsScalar() || kv.second.Scalar().empty()) {
      return BadKey(file, key, "a single value");
    }
    RETURN_IF_ERROR(ParseKey(key, field, kv.second.Scalar(), file, p));
  }
  if (p.type.empty()) return BadKey(file, prefix + ".type", "slurm");
  if (p.slurm.shared_dir.empty()) return BadKey(file, prefix + ".shared_dir", "an absolute path");
  return p;
}

}  // namespace

Result<std::map<std::string, PoolSettings>> ParsePools(const YAML::Node& node,
                                                       std::string_view file) {
  if (!node.IsMap()) return BadKey(file, "pools", "a mapping of pool names to their settings");
  std::map<std::string, PoolSettings> pools;
  for (const auto& kv : node) {
    const std::string name = kv.first.Scalar();
    ASSIGN_OR_RETURN(PoolSettings p, ParsePool(name, kv.second, file));
    pools[name] = std::move(p);
  }
  return pools;
}

}  // namespace lathe::daemon
