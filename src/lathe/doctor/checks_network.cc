#include "lathe/doctor/checks_network.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "lathe/doctor/check_util.h"
#include "lathe/doctor/probes.h"

namespace lathe::doctor {
namespace {

constexpr const char* kProxyVars[] = {"http_proxy", "https_proxy", "all_proxy",
                                      "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"};
constexpr const char* kLocalHosts[] = {"localhost", "127.0.0.1"};
// Interfaces that are not links to other machines.
constexpr const char* kVirtualPrefixes[] = {"lo",  "docker",  "veth", "br-",  "virbr", "ifb",
                                            "cni", "flannel", "cali", "tunl", "kube",  "vxlan"};
// NCCL switches that trade speed for getting past a problem.
constexpr const char* kSlowSwitches[] = {"NCCL_P2P_DISABLE", "NCCL_IB_DISABLE", "NCCL_SHM_DISABLE",
                                         "NCCL_NVLS_ENABLE=0"};

std::string Trim(std::string s) {
  s.erase(0, s.find_first_not_of(" \t"));
  s.erase(s.find_last_not_of(" \t") + 1);
  return s;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  for (size_t a = 0, b; a <= s.size(); a = b + 1) {
    b = std::min(s.find(sep, a), s.size());
    std::string t = Trim(s.substr(a, b - a));
    if (!t.empty()) out.push_back(t);
  }
  return out;
}

bool CidrCovers(const std::string& entry, std::string_view host) {
  size_t slash = entry.find('/');
  if (slash == std::string::npos) return false;
  in_addr net{}, ip{};
  int bits = std::atoi(entry.c_str() + slash + 1);
  if (bits < 0 || bits > 32 || inet_pton(AF_INET, entry.substr(0, slash).c_str(), &net) != 1 ||
      inet_pton(AF_INET, std::string(host).c_str(), &ip) != 1) {
    return false;
  }
  uint32_t mask = bits == 0 ? 0 : htonl(~uint32_t{0} << (32 - bits));
  return (net.s_addr & mask) == (ip.s_addr & mask);
}

bool IsVirtual(const std::string& name) {
  return std::any_of(std::begin(kVirtualPrefixes), std::end(kVirtualPrefixes),
                     [&](const char* p) { return name.starts_with(p); });
}

std::vector<std::string> Interfaces(const SystemView& view) {
  auto names = view.ListDir("/sys/class/net");
  if (!names.ok()) return {};
  std::vector<std::string> out = *names;
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

bool NoProxyCovers(std::string_view no_proxy, std::string_view host) {
  for (const auto& e : Split(std::string(no_proxy), ',')) {
    std::string entry = e.front() == '.' ? e.substr(1) : e;
    if (entry == "*" || entry == host || CidrCovers(entry, host)) return true;
  }
  return false;
}

Finding CheckProxy(const SystemView& view, const Facts&) {
  std::vector<std::string> set;
  for (const char* v : kProxyVars) {
    if (auto val = view.Getenv(v); val && !val->empty()) set.push_back(v);
  }
  if (set.empty()) return {"net.proxy.none", {}};
  std::string no_proxy = view.Getenv("no_proxy").value_or("");
  std::string upper = view.Getenv("NO_PROXY").value_or("");
  std::string all = no_proxy + (no_proxy.empty() || upper.empty() ? "" : ",") + upper;
  std::vector<std::string> missing;
  for (const char* h : kLocalHosts) {
    if (!NoProxyCovers(all, h)) missing.push_back(h);
  }
  std::string vars;
  for (const auto& v : set) vars += (vars.empty() ? "" : ", ") + v;
  MsgArgs a = {{"vars", vars}, {"no_proxy", all.empty() ? "-" : all}};
  if (missing.empty()) return {"net.proxy.bypassed", a};
  std::string m;
  for (const auto& h : missing) m += (m.empty() ? "" : ", ") + h;
  a.push_back({"missing", m});
  return {"net.proxy.captures_localhost", a};
}

Finding CheckDns(const SystemView&, const Facts& f) {
  const DnsProbe& d = f.dns;
  switch (d.state) {
    case ProbeState::kNotRun:
      return {"net.dns.fast", {}};
    case ProbeState::kTimedOut:
      return {"net.dns.timeout", {{"name", d.name}}};
    case ProbeState::kFailed:
      return {"net.dns.error", {{"error", d.error}}};
    case ProbeState::kDone:
      break;
  }
  if (d.address.empty()) return {"net.dns.fail", {{"name", d.name}, {"error", d.error}}};
  return {"net.dns.ok", {{"name", d.name}, {"address", d.address}}};
}

Finding CheckMtu(const SystemView& view, const Facts&) {
  std::vector<std::string> list;
  std::set<std::string> mtus;
  for (const auto& n : Interfaces(view)) {
    if (IsVirtual(n)) continue;
    std::string base = "/sys/class/net/" + n;
    if (ReadLine(view, base + "/operstate") == "down") continue;
    auto mtu = ReadLine(view, base + "/mtu");
    if (!mtu) continue;
    list.push_back(n + " " + *mtu);
    mtus.insert(*mtu);
  }
  if (list.empty()) return {"net.mtu.none", {}};
  std::string joined;
  for (const auto& l : list) joined += (joined.empty() ? "" : ", ") + l;
  return {mtus.size() > 1 ? "net.mtu.mixed" : "net.mtu.ok", {{"list", joined}}};
}

namespace {

// A NCCL_SOCKET_IFNAME entry that names no interface here ("" when all do).
std::string MissingIfname(const std::string& value, const std::vector<std::string>& ifaces) {
  if (value.starts_with("^")) return "";  // an exclusion list cannot be wrong here
  for (auto entry : Split(value, ',')) {
    bool exact = entry.starts_with("=");
    if (exact) entry = entry.substr(1);
    bool found = std::any_of(ifaces.begin(), ifaces.end(), [&](const std::string& i) {
      return exact ? i == entry : i.starts_with(entry);
    });
    if (!found) return entry;
  }
  return "";
}

}  // namespace

Finding CheckNccl(const SystemView& view, const Facts&) {
  std::vector<std::pair<std::string, std::string>> vars;
  for (const auto& kv : view.Environment()) {
    if (kv.first.starts_with("NCCL_")) vars.push_back(kv);
  }
  if (vars.empty()) return {"net.nccl.none", {}};
  std::sort(vars.begin(), vars.end());
  std::string list, slow;
  for (const auto& [k, v] : vars) {
    list += (list.empty() ? "" : " ") + k + "=" + v;
    for (const char* s : kSlowSwitches) {
      std::string sw = s;
      bool hit = sw.find('=') != std::string::npos ? sw == k + "=" + v : (sw == k && v == "1");
      if (hit) slow += (slow.empty() ? "" : " ") + k + "=" + v;
    }
  }
  std::vector<std::string> ifaces = Interfaces(view);
  for (const auto& [k, v] : vars) {
    if (k != "NCCL_SOCKET_IFNAME") continue;
    std::string bad = MissingIfname(v, ifaces);
    if (!bad.empty()) {
      std::string names;
      for (const auto& i : ifaces) names += (names.empty() ? "" : ", ") + i;
      return {"net.nccl.bad_ifname", {{"value", v}, {"bad", bad}, {"ifaces", names}}};
    }
  }
  if (!slow.empty()) return {"net.nccl.slow", {{"vars", slow}, {"list", list}}};
  return {"net.nccl.set", {{"list", list}}};
}

}  // namespace lathe::doctor
