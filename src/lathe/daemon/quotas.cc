#include "lathe/daemon/quotas.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>

#include "lathe/common/ids.h"
#include "lathe/common/units.h"

namespace lathe::daemon {
namespace {

constexpr const char* kFields = "gpus, runs, notebooks, gpu_hours, period, disk";
constexpr const char* kProjectFields = "gpus, runs, notebooks, gpu_hours, period";
constexpr const char* kEntries = "default, USER, \"@GROUP\", projects";

Status Bad(std::string_view id, std::string_view file, const std::string& key,
           const std::string& value) {
  return Status::Msg(Code::kInvalidArgument, std::string(id),
                     {{"file", std::string(file)}, {"key", key}, {"value", value}});
}

Result<std::optional<int>> Count(const std::string& v, std::string_view file,
                                 const std::string& key) {
  if (v == "unlimited") return std::optional<int>(kUnlimited);
  size_t used = 0;
  long n = -1;
  try {
    n = std::stol(v, &used);
  } catch (...) {
  }
  if (used != v.size() || n < 0 || n > 1'000'000) return Bad("quota.bad_count", file, key, v);
  return std::optional<int>(static_cast<int>(n));
}

// `project`: an entry of `projects:`, which has no disk.
Result<QuotaEntry> ParseEntry(const YAML::Node& node, std::string_view file,
                              const std::string& entry, bool project = false) {
  const std::string where = "quotas." + entry;
  const char* fields = project ? kProjectFields : kFields;
  if (!node.IsMap()) return Bad("quota.bad_entry", file, where, fields);
  QuotaEntry e;
  for (const auto& kv : node) {
    const std::string field = kv.first.Scalar();
    const std::string key = where + "." + field;
    if (!kv.second.IsScalar()) return Bad("quota.bad_count", file, key, "(not a single value)");
    const std::string v = kv.second.Scalar();
    if (field == "gpus") {
      ASSIGN_OR_RETURN(e.gpus, Count(v, file, key));
    } else if (field == "runs") {
      ASSIGN_OR_RETURN(e.runs, Count(v, file, key));
    } else if (field == "notebooks") {
      ASSIGN_OR_RETURN(e.notebooks, Count(v, file, key));
    } else if (field == "gpu_hours") {
      if (v == "unlimited") {
        e.gpu_hours = kUnlimitedHours;
        continue;
      }
      size_t used = 0;
      double h = -1;
      try {
        h = std::stod(v, &used);
      } catch (...) {
      }
      if (used != v.size() || !std::isfinite(h) || h < 0) {
        return Bad("quota.bad_hours", file, key, v);
      }
      e.gpu_hours = h;
    } else if (field == "disk" && !project) {
      if (v == "unlimited") {
        e.disk_bytes = kUnlimited;
        continue;
      }
      auto bytes = ParseBytes(v);
      if (!bytes.ok() || *bytes > (uint64_t{1} << 60)) return Bad("quota.bad_size", file, key, v);
      e.disk_bytes = static_cast<int64_t>(*bytes);
    } else if (field == "period") {
      auto d = ParseDuration(v);
      if (!d.ok() || d->count() <= 0) return Bad("quota.bad_period", file, key, v);
      e.period_ms = d->count();
    } else {
      return Status::Msg(Code::kInvalidArgument, "quota.bad_field",
                         {{"file", std::string(file)}, {"key", key}, {"allowed", fields}});
    }
  }
  if (e.period_ms && !e.gpu_hours) {
    return Bad("quota.period_alone", file, where + ".period",
               FormatDuration(std::chrono::milliseconds(*e.period_ms)));
  }
  return e;
}

// Field by field: user, first group that sets it, default.
template <typename T, typename Get>
void Pick(const QuotaConfig& c, const std::string& user, const std::vector<std::string>& groups,
          const char* field, Get get, std::optional<T>& out, ResolvedQuota& r,
          const QuotaEntry** from) {
  auto take = [&](const QuotaEntry& e, const std::string& name) {
    if (!get(e)) return false;
    if (*get(e) >= 0) out = *get(e);  // `unlimited` stops the search, unset
    r.source[field] = name;
    if (from) *from = &e;
    return true;
  };
  if (auto it = c.users.find(user); it != c.users.end() && take(it->second, user)) return;
  for (const auto& [group, e] : c.groups) {
    bool member = std::find(groups.begin(), groups.end(), group) != groups.end();
    if (member && take(e, "@" + group)) return;
  }
  if (c.default_entry) take(*c.default_entry, "default");
}

}  // namespace

ResolvedQuota ResolveQuota(const QuotaConfig& c, const std::string& user,
                           const std::vector<std::string>& groups) {
  ResolvedQuota r;
  sched::QuotaLimits& l = r.limits;
  Pick<int>(
      c, user, groups, "gpus", [](const QuotaEntry& e) { return e.gpus; }, l.gpus, r, nullptr);
  Pick<int>(
      c, user, groups, "runs", [](const QuotaEntry& e) { return e.runs; }, l.runs, r, nullptr);
  Pick<int>(
      c, user, groups, "notebooks", [](const QuotaEntry& e) { return e.notebooks; }, l.notebooks, r,
      nullptr);
  const QuotaEntry* hours_from = nullptr;
  Pick<double>(
      c, user, groups, "gpu_hours", [](const QuotaEntry& e) { return e.gpu_hours; }, l.gpu_hours, r,
      &hours_from);
  Pick<uint64_t>(
      c, user, groups, "disk", [](const QuotaEntry& e) { return e.disk_bytes; }, r.disk_bytes, r,
      nullptr);
  if (l.gpu_hours) {
    l.period_ms =
        hours_from && hours_from->period_ms ? *hours_from->period_ms : kDefaultQuotaPeriodMs;
  }
  return r;
}

namespace {

// `quotas.projects`: a mapping of project names to entries.
Status ParseProjects(const YAML::Node& node, std::string_view file, QuotaConfig& c) {
  if (node.IsNull()) return Status::OK();
  if (!node.IsMap())
    return Bad("quota.bad_entry", file, "quotas.projects", "PROJECT: {gpus, runs, ...}");
  for (const auto& kv : node) {
    const std::string name = kv.first.Scalar();
    if (!IsValidName(name)) return Bad("quota.bad_project", file, "quotas.projects." + name, name);
    ASSIGN_OR_RETURN(c.projects[name], ParseEntry(kv.second, file, "projects." + name, true));
  }
  return Status::OK();
}

}  // namespace

sched::QuotaLimits ProjectQuota(const QuotaConfig& c, const std::string& project) {
  sched::QuotaLimits l;
  auto it = c.projects.find(project);
  if (it == c.projects.end()) return l;
  const QuotaEntry& e = it->second;
  auto limited = [](const std::optional<int>& v) {
    return v && *v >= 0 ? v : std::optional<int>();  // `unlimited`: none
  };
  l.gpus = limited(e.gpus);
  l.runs = limited(e.runs);
  l.notebooks = limited(e.notebooks);
  if (e.gpu_hours && *e.gpu_hours >= 0) {
    l.gpu_hours = e.gpu_hours;
    l.period_ms = e.period_ms.value_or(kDefaultQuotaPeriodMs);
  }
  return l;
}

Status ParseQuotas(const YAML::Node& node, std::string_view file, QuotaConfig& c) {
  if (node.IsNull()) return Status::OK();
  if (!node.IsMap()) return Bad("quota.bad_entry", file, "quotas", kEntries);
  for (const auto& kv : node) {
    const std::string name = kv.first.Scalar();
    if (name.empty() || name == "@") {
      return Bad("quota.bad_entry", file, "quotas." + name, kEntries);
    }
    if (name == "projects") {
      RETURN_IF_ERROR(ParseProjects(kv.second, file, c));
      continue;
    }
    ASSIGN_OR_RETURN(QuotaEntry e, ParseEntry(kv.second, file, name));
    if (name == "default") {
      c.default_entry = e;
    } else if (name[0] == '@') {
      c.groups.emplace_back(name.substr(1), e);
    } else {
      c.users[name] = e;
    }
  }
  return Status::OK();
}

Status ParseFairShare(const YAML::Node& node, std::string_view file, QuotaConfig& c) {
  if (node.IsNull()) return Status::OK();
  if (!node.IsMap()) return Bad("quota.bad_half_life", file, "fair_share", "(not a mapping)");
  for (const auto& kv : node) {
    const std::string key = "fair_share." + kv.first.Scalar();
    if (kv.first.Scalar() != "half_life") {
      return Status::Msg(Code::kInvalidArgument, "quota.bad_field",
                         {{"file", std::string(file)}, {"key", key}, {"allowed", "half_life"}});
    }
    const std::string v = kv.second.IsScalar() ? kv.second.Scalar() : "(not a single value)";
    if (v == "0") {
      c.half_life_ms = 0;
      continue;
    }
    auto d = ParseDuration(v);
    if (!d.ok() || d->count() <= 0) return Bad("quota.bad_half_life", file, key, v);
    c.half_life_ms = d->count();
  }
  return Status::OK();
}

}  // namespace lathe::daemon
