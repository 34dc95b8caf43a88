#include "lathe/doctor/cluster_probes.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <random>
#include <sstream>
#include <thread>

#include "lathe/doctor/report_format.h"

namespace lathe::doctor {
namespace {

constexpr const char* kDefaultSlurmConf = "/etc/slurm/slurm.conf";
constexpr const char* kDefaultBinDir = "/usr/bin";

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    out.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

CommandProbe RunProbe(const SystemView& view, std::vector<std::string> argv,
                      const std::map<std::string, std::string>& env, int64_t timeout_ms) {
  CommandProbe p;
  p.argv = std::move(argv);
  p.timeout_ms = timeout_ms;
  p.start_ms = view.WallClockMs();
  auto r = view.RunWithEnv(p.argv, env, timeout_ms);
  p.end_ms = view.WallClockMs();
  if (!r.ok()) {
    p.state = r.status().code() == Code::kDeadlineExceeded ? CommandState::kTimedOut
                                                           : CommandState::kFailed;
    p.error = r.status().message();
    return p;
  }
  p.state = CommandState::kDone;
  p.exit_code = r->exit_code;
  p.out = r->out;
  p.err = r->err;
  return p;
}

std::string NewToken() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}", rd(), rd());
}

// The shell script of the test job: it writes the marker, then says which
// node it ran on and whether lathe_path runs there (ParseJobReport).
std::string JobScript(const std::string& marker, const std::string& token,
                      const std::string& lathe) {
  std::string m = ShellQuote(marker), l = ShellQuote(lathe);
  return fmt::format(
      "if e=$(printf %s {} 2>&1 >{}); then echo marker=written; "
      "else echo \"marker=failed: $e\"; fi; "
      "echo \"node=$(hostname)\"; "
      "if [ -x {} ]; then echo \"lathe=$({} --version 2>&1 | head -n 1)\"; "
      "else echo lathe=missing; fi",
      ShellQuote(token), m, l, l);
}

void ProbeShared(const SystemView& view, ClusterProbe& p) {
  const std::string& dir = p.pool.shared_dir;
  p.shared_exists = !dir.empty() && view.StatFs(dir).ok();
  if (!p.shared_exists) return;
  // A user whose directory an administrator made works there; else Lathe
  // makes it in shared_dir as the user, which needs shared_dir writable.
  std::string user = view.UserName();
  std::string own = dir + "/" + user;
  p.shared_probe_dir = user != "root" && view.StatFs(own).ok() ? own : dir;
  p.shared_writable = view.ProbeWritableAsUser(p.shared_probe_dir, &p.shared_user);
}

void RunJob(const SystemView& view, const ClusterOptions& o, const std::string& bin,
            const std::map<std::string, std::string>& env, ClusterProbe& p) {
  p.marker_token = NewToken();
  std::string dir = p.shared_probe_dir.empty() ? p.pool.shared_dir : p.shared_probe_dir;
  p.marker_path = dir + "/.lathe-doctor-" + p.marker_token;
  std::string name = "lathe-doctor-" + p.marker_token;
  std::vector<std::string> argv = {bin + "/srun", "--job-name=" + name, "--nodes=1",
                                   "--ntasks=1",  "--time=1",           "--quiet"};
  if (!p.pool.partition.empty()) argv.push_back("--partition=" + p.pool.partition);
  if (!p.pool.account.empty()) argv.push_back("--account=" + p.pool.account);
  if (!p.pool.qos.empty()) argv.push_back("--qos=" + p.pool.qos);
  for (std::string a : {"/bin/sh", "-c"}) argv.push_back(a);
  argv.push_back(JobScript(p.marker_path, p.marker_token, p.lathe_path));
  p.job = RunProbe(view, std::move(argv), env, o.job_timeout_ms);
  if (p.job.state == CommandState::kTimedOut) {
    // srun was killed while the job waited or ran: take the job out of the queue.
    (void)RunProbe(view, {bin + "/scancel", "--name=" + name}, env, o.command_timeout_ms);
  }
  auto seen = view.ReadFile(p.marker_path);
  p.marker_seen = seen.ok() && Trim(*seen) == p.marker_token;
  if (seen.ok()) (void)view.RemoveFile(p.marker_path);  // best effort: a dot file in shared_dir
}

ClusterProbe ProbePool(const SystemView& view, const ClusterPool& pool, const ClusterOptions& o) {
  ClusterProbe p;
  p.pool = pool;
  p.slurm_conf = pool.slurm_conf.empty() ? kDefaultSlurmConf : pool.slurm_conf;
  if (auto conf = view.ReadFile(p.slurm_conf); conf.ok()) {
    p.munge_socket = MungeSocketFromConf(*conf);
  }
  p.lathe_path = pool.lathe_path.empty() ? view.SelfExe() : pool.lathe_path;
  const std::string bin = pool.bin_dir.empty() ? kDefaultBinDir : pool.bin_dir;
  std::map<std::string, std::string> env;
  if (!pool.slurm_conf.empty()) env["SLURM_CONF"] = pool.slurm_conf;

  auto munge = view.FindExecutable("munge");
  auto unmunge = view.FindExecutable("unmunge");
  if (munge && unmunge) {
    std::string sock = p.munge_socket.empty() ? "" : " -S " + ShellQuote(p.munge_socket);
    std::string cmd = ShellQuote(*munge) + " -n" + sock + " | " + ShellQuote(*unmunge) + sock;
    p.munge = RunProbe(view, {"/bin/sh", "-c", cmd}, env, o.command_timeout_ms);
  } else {
    p.munge.state = CommandState::kFailed;
    p.munge.error = "munge and unmunge are not on PATH";
  }

  ProbeShared(view, p);

  p.ping = RunProbe(view, {bin + "/scontrol", "ping"}, env, o.command_timeout_ms);
  p.job_skipped_no_flag = !o.run_job;
  if (p.ping.state != CommandState::kDone || p.ping.exit_code != 0) return p;
  p.sdiag = RunProbe(view, {bin + "/sdiag"}, env, o.command_timeout_ms);
  p.sinfo = RunProbe(view, {bin + "/sinfo", "--noheader", "--Node", "-o", "%P|%N|%G|%t"}, env,
                     o.command_timeout_ms);
  if (o.run_job && p.shared_exists) RunJob(view, o, bin, env, p);
  return p;
}

}  // namespace

std::vector<ClusterProbe> ProbeClusters(const SystemView& view, const ClusterOptions& o) {
  std::vector<ClusterProbe> out(o.pools.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < o.pools.size(); ++i) {
    threads.emplace_back([&, i] { out[i] = ProbePool(view, o.pools[i], o); });
  }
  for (auto& t : threads) t.join();
  return out;
}

std::string MungeSocketFromConf(std::string_view text) {
  std::string socket;
  for (std::string_view line : Lines(text)) {
    line = Trim(line.substr(0, line.find('#')));
    size_t eq = line.find('=');
    if (eq == std::string_view::npos || Lower(Trim(line.substr(0, eq))) != "authinfo") continue;
    std::string_view v = Trim(line.substr(eq + 1));
    while (!v.empty()) {
      size_t comma = v.find(',');
      std::string_view item = Trim(v.substr(0, comma));
      if (Lower(item).starts_with("socket=")) socket = std::string(Trim(item.substr(7)));
      if (comma == std::string_view::npos) break;
      v.remove_prefix(comma + 1);
    }
  }
  return socket;
}

int64_t SdiagServerTimeMs(std::string_view out) {
  int64_t s = 0;
  if (RE2::PartialMatch(re2::StringPiece(out.data(), out.size()),
                        R"(sdiag output at [^\n]*\((\d+)\))", &s)) {
    return s * 1000;
  }
  return -1;
}

int GresGpus(std::string_view gres, std::vector<std::string>* types) {
  int total = 0;
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= gres.size(); ++i) {
    if (i < gres.size()) {
      if (gres[i] == '(') ++depth;
      if (gres[i] == ')') --depth;
      if (gres[i] != ',' || depth > 0) continue;
    }
    std::string_view item = Trim(gres.substr(start, i - start));
    start = i + 1;
    item = item.substr(0, item.find('('));
    std::vector<std::string_view> f;
    for (size_t a = 0; a <= item.size();) {
      size_t b = std::min(item.find(':', a), item.size());
      f.push_back(item.substr(a, b - a));
      a = b + 1;
    }
    if (f.size() < 2 || f[0] != "gpu") continue;
    int n = 0;
    auto [ptr, ec] = std::from_chars(f.back().data(), f.back().data() + f.back().size(), n);
    if (ec != std::errc() || ptr != f.back().data() + f.back().size()) continue;
    total += n;
    if (f.size() >= 3 && types != nullptr) {
      std::string t(f[1]);
      if (std::find(types->begin(), types->end(), t) == types->end()) types->push_back(t);
    }
  }
  return total;
}

std::vector<SinfoPartition> ParseSinfoNodes(std::string_view out) {
  std::vector<SinfoPartition> parts;
  for (std::string_view line : Lines(out)) {
    line = Trim(line);
    std::vector<std::string_view> f;
    for (size_t a = 0; a <= line.size();) {
      size_t b = std::min(line.find('|', a), line.size());
      f.push_back(line.substr(a, b - a));
      a = b + 1;
    }
    if (f.size() < 4 || f[0].empty()) continue;
    std::string_view name = f[0];
    bool def = name.ends_with('*');
    if (def) name.remove_suffix(1);
    auto it = std::find_if(parts.begin(), parts.end(),
                           [&](const SinfoPartition& p) { return p.name == name; });
    if (it == parts.end()) {
      parts.push_back({std::string(name)});
      it = parts.end() - 1;
    }
    it->is_default = it->is_default || def;
    ++it->nodes;
    std::string_view st = f[3];
    bool down = st.ends_with('*') || st.starts_with("down") || st.starts_with("drain") ||
                st.starts_with("drng") || st.starts_with("fail") || st.starts_with("inval");
    if (!down) ++it->nodes_up;
    it->gpus += GresGpus(f[2], &it->gpu_types);
  }
  return parts;
}

JobReport ParseJobReport(std::string_view out) {
  JobReport r;
  bool marker = false, node = false, lathe = false;
  for (std::string_view line : Lines(out)) {
    line = Trim(line);
    if (line == "marker=written") {
      marker = r.marker_written = true;
    } else if (line.starts_with("marker=failed")) {
      marker = true;
      r.marker_error = std::string(Trim(line.substr(std::string_view("marker=failed").size())));
      if (r.marker_error.starts_with(":"))
        r.marker_error = std::string(Trim(r.marker_error.substr(1)));
    } else if (line.starts_with("node=")) {
      node = true;
      r.node = std::string(line.substr(5));
    } else if (line.starts_with("lathe=")) {
      lathe = true;
      std::string_view v = line.substr(6);
      r.lathe_found = v != "missing";
      if (r.lathe_found) r.lathe_version = std::string(v);
    }
  }
  r.complete = marker && node && lathe;
  return r;
}

}  // namespace lathe::doctor
