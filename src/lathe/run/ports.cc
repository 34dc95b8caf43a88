#include "lathe/run/ports.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace lathe::run {
namespace {

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// A bare `6006` is named "p6006" by the spec: no LATHE_PORT_P6006 for it.
bool NamedInSpec(const PortSpec& p) { return p.name != "p" + std::to_string(p.port); }

int PortOf(std::string_view address) {
  size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return 0;
  return std::atoi(std::string(address.substr(colon + 1)).c_str());
}

// Does `l` accept what is sent to 127.0.0.1:`port` (or to the socket `path`)?
bool Answers(const os::Listener& l, std::string_view kind, std::string_view address, int port) {
  if (kind == "unix") return l.kind == os::Listener::Kind::kUnix && l.path == address;
  if (l.kind != os::Listener::Kind::kTcp || l.port != port) return false;
  return l.host == "127.0.0.1" || l.host == "0.0.0.0" || l.host == "::" ||
         l.host == "::ffff:127.0.0.1";
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "-" : s;
}

}  // namespace

std::string PortEnvName(const PortSpec& p) {
  if (p.port == 0) return "LATHE_SOCKET_" + Upper(p.name);
  return "LATHE_PORT_" + std::to_string(p.port);
}

std::map<std::string, std::string> PortEnvironment(const std::vector<PortSpec>& ports,
                                                   const std::vector<int>& listen_ports) {
  std::map<std::string, std::string> env;
  for (size_t i = 0; i < ports.size() && i < listen_ports.size(); ++i) {
    const PortSpec& p = ports[i];
    if (p.port == 0) {
      env[PortEnvName(p)] = p.socket;
      continue;
    }
    const std::string where = std::to_string(listen_ports[i]);
    env[PortEnvName(p)] = where;
    if (NamedInSpec(p)) env["LATHE_PORT_" + Upper(p.name)] = where;
    if (i == 0) env["PORT"] = where;
  }
  return env;
}

std::string_view PortStateName(PortState s) {
  switch (s) {
    case PortState::kNotRunning:
      return "not_running";
    case PortState::kNotListening:
      return "not_listening";
    case PortState::kElsewhere:
      return "elsewhere";
    case PortState::kWrongOwner:
      return "wrong_owner";
    case PortState::kListening:
      return "listening";
  }
  return "unknown";
}

PortCheck CheckPort(std::string_view kind, std::string_view address, uid_t run_uid, uid_t also_uid,
                    const std::vector<os::Listener>& run_listeners,
                    const std::vector<os::Listener>& all_listeners) {
  PortCheck c;
  const int port = kind == "unix" ? 0 : PortOf(address);
  for (const auto& l : run_listeners) {
    if (l.kind == os::Listener::Kind::kUnix && l.path.empty()) continue;  // unnamed
    std::string a = l.Address();
    if (std::find(c.run_listens.begin(), c.run_listens.end(), a) == c.run_listens.end()) {
      c.run_listens.push_back(std::move(a));
    }
    if (Answers(l, kind, address, port)) c.state = PortState::kListening;
  }
  if (c.state == PortState::kListening) return c;
  // Not the run's own processes: the user's other ones serve it too (the
  // proxy checks the owner alone); another user's would be refused.
  for (const auto& l : all_listeners) {
    if (!Answers(l, kind, address, port)) continue;
    if (kind == "unix" || l.uid == run_uid || l.uid == also_uid) {
      c.state = PortState::kListening;
      return c;
    }
    c.state = PortState::kWrongOwner;
    c.other_uid = l.uid;
    return c;
  }
  c.state = c.run_listens.empty() ? PortState::kNotListening : PortState::kElsewhere;
  return c;
}

Status ExplainPort(const std::string& run_id, const PortSpec& p, std::string_view address,
                   const PortCheck& check) {
  const char* id = nullptr;
  switch (check.state) {
    case PortState::kListening:
      return Status::OK();
    case PortState::kNotRunning:
      return ExplainNotRunning(run_id, p, "-");
    case PortState::kNotListening:
      id = "ports.not_listening";
      break;
    case PortState::kElsewhere:
      id = "ports.elsewhere";
      break;
    case PortState::kWrongOwner:
      id = "ports.wrong_owner";
      break;
  }
  const Code code =
      check.state == PortState::kWrongOwner ? Code::kPermissionDenied : Code::kUnavailable;
  return Status::Msg(code, id,
                     {{"run", run_id},
                      {"port", p.name},
                      {"address", std::string(address)},
                      {"env", PortEnvName(p)},
                      {"layer", std::string(PortStateName(check.state))},
                      {"listening", Join(check.run_listens)},
                      {"uid", std::to_string(check.other_uid)},
                      {"doctor", std::string(kProxyCheckCommand)}});
}

Status ExplainNotRunning(const std::string& run_id, const PortSpec& p, std::string_view state) {
  return Status::Msg(Code::kUnavailable, "ports.not_running",
                     {{"run", run_id},
                      {"port", p.name},
                      {"state", std::string(state)},
                      {"env", PortEnvName(p)},
                      {"layer", std::string(PortStateName(PortState::kNotRunning))},
                      {"doctor", std::string(kProxyCheckCommand)}});
}

}  // namespace lathe::run
