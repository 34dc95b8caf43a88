#include "lathe/gateway/front_routes.h"

#include <optional>
#include <set>

#include "lathe/common/ids.h"
#include "lathe/common/json.h"
#include "lathe/common/owned_name.h"

namespace lathe::gateway {
namespace {

constexpr size_t kMaxSocketPath = 107;  // sockaddr_un::sun_path less its NUL
constexpr size_t kMaxTextChars = 64;
constexpr int64_t kMaxHoldMs = 3'600'000;
constexpr int64_t kMaxHeld = 100'000;
constexpr int64_t kMaxWeight = 1'000'000;
constexpr int64_t kMaxUid = 0xFFFFFFFE;  // (uid_t)-1 is "no uid"

Status Bad(std::string id, const std::string& field, MsgArgs more = {}) {
  MsgArgs args{{"field", field}};
  args.insert(args.end(), more.begin(), more.end());
  return Status::Msg(Code::kInvalidArgument, std::move(id), std::move(args));
}

// A value as an error shows it: short and printable.
std::string Shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, kMaxTextChars)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > kMaxTextChars) out += "...";
  return out;
}

bool Printable(std::string_view s, bool allow_space) {
  for (unsigned char c : s) {
    if (c < 0x20 || c >= 0x7f || (!allow_space && c == ' ')) return false;
  }
  return true;
}

// Typed access to the fields of one JSON object at `path` ("deployments[0]").
class Fields {
 public:
  Fields(const Json& obj, std::string path) : obj_(obj), path_(std::move(path)) {}

  std::string Path(std::string_view name) const {
    return path_.empty() ? std::string(name) : path_ + "." + std::string(name);
  }
  const Json* Get(std::string_view name) const {
    auto it = obj_.find(name);
    return it == obj_.end() ? nullptr : &*it;
  }
  Status Missing(std::string_view name) const { return Bad("gateway.routes_missing", Path(name)); }
  Status Type(std::string_view name, std::string_view type) const {
    return Bad("gateway.routes_type", Path(name), {{"type", std::string(type)}});
  }
  // An integer in [min, max]; `dflt` when absent (required when nullopt).
  Result<int64_t> Int(std::string_view name, int64_t min, int64_t max,
                      std::optional<int64_t> dflt) const {
    const Json* v = Get(name);
    if (v == nullptr) {
      if (dflt) return *dflt;
      return Missing(name);
    }
    if (!v->is_number_integer()) return Type(name, "integer");
    if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      if (u > static_cast<uint64_t>(max) || static_cast<int64_t>(u) < min) {
        return Range(name, v->dump(), min, max);
      }
      return static_cast<int64_t>(u);
    }
    const int64_t n = v->get<int64_t>();
    if (n < min || n > max) return Range(name, v->dump(), min, max);
    return n;
  }
  Result<bool> Bool(std::string_view name, bool dflt) const {
    const Json* v = Get(name);
    if (v == nullptr) return dflt;
    if (!v->is_boolean()) return Type(name, "boolean");
    return v->get<bool>();
  }
  Result<std::string> String(std::string_view name, std::optional<std::string> dflt) const {
    const Json* v = Get(name);
    if (v == nullptr) {
      if (dflt) return *dflt;
      return Missing(name);
    }
    if (!v->is_string()) return Type(name, "string");
    return v->get<std::string>();
  }
  // An array (empty when absent).
  Result<const Json*> Array(std::string_view name) const {
    static const Json kEmpty = Json::array();
    const Json* v = Get(name);
    if (v == nullptr) return &kEmpty;
    if (!v->is_array()) return Type(name, "array");
    return v;
  }
  Status Range(std::string_view name, const std::string& value, int64_t min, int64_t max) const {
    return Bad(
        "gateway.routes_range", Path(name),
        {{"value", Shown(value)}, {"min", std::to_string(min)}, {"max", std::to_string(max)}});
  }

 private:
  const Json& obj_;
  std::string path_;
};

std::string Index(const std::string& base, size_t i) {
  return base + "[" + std::to_string(i) + "]";
}

// An id or version: 1-64 printable characters without spaces ("" allowed when `may_be_empty`).
Status CheckText(const std::string& field, const std::string& v, bool may_be_empty) {
  if ((v.empty() && !may_be_empty) || v.size() > kMaxTextChars || !Printable(v, false)) {
    return Bad("gateway.routes_text", field, {{"value", Shown(v)}});
  }
  return Status::OK();
}

// An optional request path: "" (none), or '/' and up to 1024 printable
// characters without spaces.
Status CheckPath(const std::string& field, const std::string& v) {
  if (!v.empty() && (v[0] != '/' || v.size() > 1024 || !Printable(v, false))) {
    return Bad("gateway.routes_health_path", field, {{"value", Shown(v)}});
  }
  return Status::OK();
}

bool IsLowerHex64(std::string_view s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

Result<RouteKey> ParseKey(const Json& j, const std::string& path) {
  if (!j.is_object()) return Bad("gateway.routes_type", path, {{"type", "object"}});
  Fields f(j, path);
  RouteKey k;
  ASSIGN_OR_RETURN(k.id, f.String("id", std::nullopt));
  RETURN_IF_ERROR(CheckText(f.Path("id"), k.id, false));
  ASSIGN_OR_RETURN(k.sha256, f.String("sha256", std::nullopt));
  if (!IsLowerHex64(k.sha256)) return Bad("gateway.routes_sha256", f.Path("sha256"));
  ASSIGN_OR_RETURN(k.expires_ms, f.Int("expires_ms", 0, INT64_MAX, 0));
  return k;
}

Result<RouteReplica> ParseReplica(const Json& j, const std::string& path) {
  if (!j.is_object()) return Bad("gateway.routes_type", path, {{"type", "object"}});
  Fields f(j, path);
  RouteReplica r;
  ASSIGN_OR_RETURN(r.id, f.String("id", std::nullopt));
  RETURN_IF_ERROR(CheckText(f.Path("id"), r.id, false));
  ASSIGN_OR_RETURN(r.socket, f.String("socket", std::nullopt));
  if (r.socket.empty() || r.socket[0] != '/' || r.socket.size() > kMaxSocketPath ||
      !Printable(r.socket, true)) {
    return Bad("gateway.routes_socket", f.Path("socket"),
               {{"value", Shown(r.socket)}, {"max", std::to_string(kMaxSocketPath)}});
  }
  ASSIGN_OR_RETURN(int64_t uid, f.Int("uid", 0, kMaxUid, std::nullopt));
  r.uid = static_cast<uid_t>(uid);
  ASSIGN_OR_RETURN(r.version, f.String("version", std::string()));
  RETURN_IF_ERROR(CheckText(f.Path("version"), r.version, true));
  ASSIGN_OR_RETURN(r.draining, f.Bool("draining", false));
  ASSIGN_OR_RETURN(r.metadata_path, f.String("metadata_path", std::string()));
  RETURN_IF_ERROR(CheckPath(f.Path("metadata_path"), r.metadata_path));
  return r;
}

Result<Route> ParseRoute(const Json& j, const std::string& path) {
  if (!j.is_object()) return Bad("gateway.routes_type", path, {{"type", "object"}});
  Fields f(j, path);
  Route d;
  ASSIGN_OR_RETURN(d.name, f.String("name", std::nullopt));
  if (!IsValidOwnedName(d.name)) {
    return Bad("gateway.routes_name", f.Path("name"), {{"value", Shown(d.name)}});
  }
  ASSIGN_OR_RETURN(d.ref, f.String("ref", std::string()));
  if (!d.ref.empty() && (!IsValidOwnedName(d.ref) || ShortName(d.ref) != ShortName(d.name))) {
    return Bad("gateway.routes_name", f.Path("ref"), {{"value", Shown(d.ref)}});
  }
  ASSIGN_OR_RETURN(int64_t uid, f.Int("uid", 0, kMaxUid, std::nullopt));
  d.uid = static_cast<uid_t>(uid);
  ASSIGN_OR_RETURN(d.is_public, f.Bool("public", false));
  ASSIGN_OR_RETURN(const Json* keys, f.Array("keys"));
  for (size_t i = 0; i < keys->size(); ++i) {
    ASSIGN_OR_RETURN(RouteKey k, ParseKey((*keys)[i], Index(f.Path("keys"), i)));
    d.keys.push_back(std::move(k));
  }
  ASSIGN_OR_RETURN(d.idempotent, f.Bool("idempotent", true));
  ASSIGN_OR_RETURN(d.health_path, f.String("health_path", d.health_path));
  if (d.health_path.empty() || d.health_path[0] != '/' || d.health_path.size() > 1024 ||
      !Printable(d.health_path, false)) {
    return Bad("gateway.routes_health_path", f.Path("health_path"),
               {{"value", Shown(d.health_path)}});
  }
  ASSIGN_OR_RETURN(d.replicas_wanted, f.Int("replicas_wanted", 0, 100000, 0));
  ASSIGN_OR_RETURN(d.hold, f.Bool("hold", false));
  ASSIGN_OR_RETURN(d.hold_ms, f.Int("hold_ms", 0, kMaxHoldMs, d.hold_ms));
  ASSIGN_OR_RETURN(d.max_held, f.Int("max_held", 0, kMaxHeld, d.max_held));
  ASSIGN_OR_RETURN(d.metrics_path, f.String("metrics_path", std::string()));
  RETURN_IF_ERROR(CheckPath(f.Path("metrics_path"), d.metrics_path));
  if (const Json* t = f.Get("traffic")) {
    if (!t->is_object()) return f.Type("traffic", "object");
    Fields weights(*t, f.Path("traffic"));
    for (const auto& [version, w] : t->items()) {
      RETURN_IF_ERROR(CheckText(f.Path("traffic"), version, true));
      ASSIGN_OR_RETURN(d.traffic[version], weights.Int(version, 0, kMaxWeight, std::nullopt));
    }
  }
  ASSIGN_OR_RETURN(const Json* replicas, f.Array("replicas"));
  std::set<std::string> ids;
  for (size_t i = 0; i < replicas->size(); ++i) {
    const std::string at = Index(f.Path("replicas"), i);
    ASSIGN_OR_RETURN(RouteReplica r, ParseReplica((*replicas)[i], at));
    if (!ids.insert(r.id).second) {
      return Bad("gateway.routes_duplicate", at + ".id", {{"value", r.id}});
    }
    d.replicas.push_back(std::move(r));
  }
  return d;
}

}  // namespace

const Route* Routes::Find(std::string_view name) const {
  for (const auto& d : deployments) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

Result<Routes> ParseRoutes(std::string_view text) {
  ASSIGN_OR_RETURN(Json j, ParseJson(text));
  if (!j.is_object()) return Bad("gateway.routes_type", "(the file)", {{"type", "object"}});
  Fields f(j, "");
  ASSIGN_OR_RETURN(int64_t version, f.Int("version", 0, INT64_MAX, std::nullopt));
  if (version != kRoutesVersion) {
    return Bad("gateway.routes_version", "version",
               {{"value", std::to_string(version)}, {"supported", std::to_string(kRoutesVersion)}});
  }
  Routes routes;
  ASSIGN_OR_RETURN(routes.generation, f.Int("generation", 0, INT64_MAX, 0));
  ASSIGN_OR_RETURN(const Json* deployments, f.Array("deployments"));
  std::set<std::string> names;
  for (size_t i = 0; i < deployments->size(); ++i) {
    const std::string at = Index("deployments", i);
    ASSIGN_OR_RETURN(Route d, ParseRoute((*deployments)[i], at));
    if (!names.insert(d.name).second) {
      return Bad("gateway.routes_duplicate", at + ".name", {{"value", d.name}});
    }
    routes.deployments.push_back(std::move(d));
  }
  return routes;
}

}  // namespace lathe::gateway
