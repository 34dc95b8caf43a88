#include "lathe/api/credentials.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "lathe/common/json.h"
#include "lathe/os/files.h"
#include "lathe/os/identity.h"
#include "lathe/os/users.h"

namespace lathe::api {
namespace {

constexpr size_t kMaxCredentialsBytes = 64 * 1024;

Status Bad(const std::string& path, const std::string& detail) {
  return Status::Msg(Code::kFailedPrecondition, "credentials.bad",
                     {{"path", path}, {"detail", detail}});
}

}  // namespace

std::string ConfigDir() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  if (xdg != nullptr && *xdg == '/') return std::string(xdg) + "/lathe";  // XDG: relative ignored
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home != '\0') return std::string(home) + "/.config/lathe";
  auto u = os::LookupUser(os::RealUid());
  return (u.ok() ? u->home : std::string("/")) + "/.config/lathe";
}

std::string CredentialsPath() { return ConfigDir() + "/credentials"; }

std::string DefaultProject() {
  const char* env = std::getenv("LATHE_PROJECT");
  if (env != nullptr) return env;  // set and empty: no project
  auto text = os::ReadFileUpTo(ConfigDir() + "/config.yaml", 64 * 1024);
  if (!text.ok()) return "";
  try {
    YAML::Node config = YAML::Load(*text);
    if (config.IsMap() && config["project"] && config["project"].IsScalar()) {
      return config["project"].as<std::string>();
    }
  } catch (const YAML::Exception&) {
    // A file that is not YAML names no project; `lathe run --project` still does.
  }
  return "";
}

Result<std::optional<Credentials>> LoadCredentials() {
  const std::string path = CredentialsPath();
  auto mode = os::FileMode(path);
  if (mode.status().IsNotFound()) return std::optional<Credentials>();
  if (!mode.ok()) return mode.status();
  if ((*mode & 077) != 0) {
    return Status::Msg(Code::kPermissionDenied, "credentials.mode",
                       {{"path", path}, {"mode", fmt::format("{:04o}", *mode)}});
  }
  ASSIGN_OR_RETURN(std::string text, os::ReadFileUpTo(path, kMaxCredentialsBytes));
  if (text.size() > kMaxCredentialsBytes) return Bad(path, "too large");
  auto j = ParseJson(text);
  if (!j.ok()) return Bad(path, j.status().message());
  if (!j->is_object()) return Bad(path, "not a JSON object");
  auto url = GetString(*j, "url");
  auto token = GetString(*j, "token");
  if (!url.ok()) return Bad(path, url.status().message());
  if (!token.ok()) return Bad(path, token.status().message());
  auto parsed = ParseDaemonUrl(*url);
  if (!parsed.ok()) return Bad(path, parsed.status().message());
  std::string ca;
  if (j->contains("ca")) {
    auto c = GetString(*j, "ca");
    if (!c.ok()) return Bad(path, c.status().message());
    ca = *c;
  }
  return std::optional<Credentials>(Credentials{parsed->Url(), *token, ca});
}

Status SaveCredentials(const Credentials& c) {
  const std::string dir = ConfigDir();
  RETURN_IF_ERROR(os::MakeDirs(dir, 0700));
  Json j = {{"url", c.url}, {"token", c.token}};
  if (!c.ca_file.empty()) j["ca"] = c.ca_file;
  return os::WriteFileAtomic(dir + "/credentials", j.dump(2) + "\n", 0600);
}

Result<bool> RemoveCredentials() { return os::RemoveFileIfPresent(CredentialsPath()); }

std::string DaemonUrl::Url() const {
  bool v6 = host.find(':') != std::string::npos;
  return fmt::format("{}://{}{}{}:{}", tls ? "https" : "http", v6 ? "[" : "", host, v6 ? "]" : "",
                     port);
}

bool DaemonUrl::loopback() const {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

Result<DaemonUrl> ParseDaemonUrl(const std::string& url) {
  auto bad = [&] { return Status::Msg(Code::kInvalidArgument, "login.bad_url", {{"url", url}}); };
  constexpr std::string_view kHttp = "http://", kHttps = "https://";
  std::string_view s = url;
  DaemonUrl u;
  if (s.substr(0, kHttps.size()) == kHttps) {
    u.tls = true;
    s.remove_prefix(kHttps.size());
  } else if (s.substr(0, kHttp.size()) == kHttp) {
    s.remove_prefix(kHttp.size());
  } else {
    return bad();
  }
  if (!s.empty() && s.back() == '/') s.remove_suffix(1);
  size_t colon;
  if (!s.empty() && s.front() == '[') {  // [::1]:PORT
    size_t close = s.find(']');
    if (close == std::string_view::npos || close + 1 >= s.size() || s[close + 1] != ':')
      return bad();
    u.host = std::string(s.substr(1, close - 1));
    colon = close + 1;
  } else {
    colon = s.rfind(':');
    if (colon == std::string_view::npos) return bad();
    u.host = std::string(s.substr(0, colon));
    if (u.host.find(':') != std::string::npos) return bad();  // IPv6 needs brackets
  }
  constexpr std::string_view kHostChars =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:";
  if (u.host.empty() || u.host.find_first_not_of(kHostChars) != std::string::npos) return bad();
  std::string_view port = s.substr(colon + 1);
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), u.port);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || u.port < 1 ||
      u.port > 65535) {
    return bad();
  }
  return u;
}

}  // namespace lathe::api
