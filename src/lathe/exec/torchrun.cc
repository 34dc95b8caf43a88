#include "lathe/exec/torchrun.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "lathe/common/i18n.h"
#include "lathe/os/command.h"
#include "lathe/os/files.h"
#include "lathe/os/foreground_child.h"
#include "lathe/os/identity.h"
#include "lathe/os/private_dir.h"
#include "lathe/os/process.h"

namespace lathe::exec {
namespace {

constexpr int kMaxNprocOrNodes = 1 << 20;
constexpr int64_t kScontrolTimeoutMs = 30'000;

Status Usage() { return Status::Msg(Code::kInvalidArgument, "torchrun.usage"); }

std::optional<int> Count(const std::string& s) {
  int n = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || end != s.data() + s.size() || n < 1 || n > kMaxNprocOrNodes) {
    return std::nullopt;
  }
  return n;
}

std::string Get(const std::map<std::string, std::string>& env, const std::string& k) {
  auto it = env.find(k);
  return it == env.end() ? "" : it->second;
}

// torchrun runs its script with Python; a command that names the
// interpreter itself (`python3 train.py`) is run as it is (--no_python).
bool NamesPython(const std::vector<std::string>& script) {
  if (script.empty()) return false;
  std::string_view name = script[0];
  if (size_t slash = name.rfind('/'); slash != std::string_view::npos)
    name.remove_prefix(slash + 1);
  if (!name.starts_with("python")) return false;
  name.remove_prefix(6);
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

void AddScript(const TorchrunArgs& a, std::vector<std::string>& argv) {
  if (NamesPython(a.script)) argv.push_back("--no_python");
  argv.insert(argv.end(), a.script.begin(), a.script.end());
}

// A name made only of what a file name may hold.
std::string FileSafe(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) c = '_';
  }
  return out;
}

}  // namespace

Result<TorchrunArgs> ParseTorchrunArgs(const std::vector<std::string>& args) {
  TorchrunArgs a;
  size_t i = 0;
  if (i < args.size() && args[i] == "--node") {
    a.on_node = true;
    ++i;
  }
  if (args.size() < i + 5 || args[i + 3] != "--") return Usage();
  auto nproc = Count(args[i]);
  auto nnodes = Count(args[i + 1]);
  if (!nproc || !nnodes || args[i + 2].empty()) return Usage();
  a.nproc_per_node = *nproc;
  a.nnodes = *nnodes;
  a.run_id = args[i + 2];
  a.script.assign(args.begin() + static_cast<std::ptrdiff_t>(i + 4), args.end());
  return a;
}

std::vector<std::string> TorchrunWrapArgv(const std::string& self_exe, int gpus_per_node, int nodes,
                                          const std::string& run_id,
                                          const std::vector<std::string>& command) {
  std::vector<std::string> argv = {self_exe,
                                   "__torchrun",
                                   std::to_string(std::max(1, gpus_per_node)),
                                   std::to_string(std::max(1, nodes)),
                                   run_id,
                                   "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

int TorchrunPort(const std::string& job_id) {
  uint64_t id = 0;
  auto [end, ec] = std::from_chars(job_id.data(), job_id.data() + job_id.size(), id);
  if (job_id.empty() || ec != std::errc() || end != job_id.data() + job_id.size()) {
    return kTorchrunBasePort;
  }
  return kTorchrunBasePort + static_cast<int>(id % kTorchrunPortRange);
}

std::string HostfileDir(const std::string& tmp) {
  return fmt::format("{}/lathe-hosts-{}", tmp, os::EffectiveUid());
}

Result<std::string> WriteHostfile(const std::string& tmp, const std::string& run_id,
                                  const std::string& job, const std::vector<std::string>& hosts) {
  const std::string dir = HostfileDir(tmp);
  ASSIGN_OR_RETURN(os::Fd fd, os::OpenPrivateDir(dir));
  const std::string name = FileSafe(run_id) + "-" + FileSafe(job) + ".hosts";
  std::string text;
  for (const auto& h : hosts) text += h + "\n";
  Status st = os::WriteNewFileAt(fd.get(), dir, name, text);
  if (st.code() == Code::kAlreadyExists) {
    // One an attempt killed outright left, in a directory only this user
    // can write to.
    RETURN_IF_ERROR(os::RemoveFileIfPresent(dir + "/" + name).status());
    st = os::WriteNewFileAt(fd.get(), dir, name, text);
  }
  RETURN_IF_ERROR(st);
  return dir + "/" + name;
}

Result<TorchrunPlan> PlanTorchrun(const TorchrunArgs& a, const std::string& self_exe,
                                  const std::map<std::string, std::string>& env,
                                  const std::vector<std::string>& hosts) {
  TorchrunPlan p;
  const std::string nproc = std::to_string(a.nproc_per_node);
  const std::string nnodes = std::to_string(a.nnodes);
  p.env["LATHE_NNODES"] = nnodes;
  p.env["LATHE_GPUS_PER_NODE"] = nproc;
  if (a.nnodes == 1) {
    p.argv = {"torchrun", "--standalone", "--nnodes=1", "--nproc_per_node=" + nproc};
    AddScript(a, p.argv);
    p.env["LATHE_NODE_RANK"] = "0";
    std::string node = Get(env, "SLURMD_NODENAME");
    p.hosts = {node.empty() ? "localhost" : node};
    return p;
  }
  if (Get(env, "SLURM_JOB_NODELIST").empty()) {
    return Status::Msg(Code::kInvalidArgument, "torchrun.no_allocation", {{"nnodes", nnodes}});
  }
  const std::string job_nodes = Get(env, "SLURM_JOB_NUM_NODES");
  if (job_nodes != nnodes) {
    return Status::Msg(Code::kInvalidArgument, "torchrun.nodes_mismatch",
                       {{"nnodes", nnodes}, {"job_nodes", job_nodes.empty() ? "?" : job_nodes}});
  }
  if (!a.on_node) {
    // One torchrun per node; a node that fails ends the step, and so the attempt.
    // The pool's Slurm commands where its config puts them (bin_dir).
    const std::string bin = Get(env, "LATHE_SLURM_BIN_DIR");
    p.argv = {bin.empty() ? "srun" : bin + "/srun",
              "--nodes=" + nnodes,
              "--ntasks=" + nnodes,
              "--ntasks-per-node=1",
              "--kill-on-bad-exit=1",
              self_exe,
              "__torchrun",
              "--node",
              nproc,
              nnodes,
              a.run_id,
              "--"};
    p.argv.insert(p.argv.end(), a.script.begin(), a.script.end());
    return p;
  }
  if (hosts.size() != static_cast<size_t>(a.nnodes)) {
    return Status::Msg(Code::kInvalidArgument, "torchrun.nodes_mismatch",
                       {{"nnodes", nnodes}, {"job_nodes", std::to_string(hosts.size())}});
  }
  const std::string master = hosts[0];
  const std::string port = std::to_string(TorchrunPort(Get(env, "SLURM_JOB_ID")));
  p.hosts = hosts;
  p.env["MASTER_ADDR"] = master;
  p.env["MASTER_PORT"] = port;
  const std::string rank = Get(env, "SLURM_NODEID");
  p.env["LATHE_NODE_RANK"] = rank.empty() ? "0" : rank;
  p.argv = {"torchrun",
            "--nnodes=" + nnodes,
            "--nproc_per_node=" + nproc,
            "--rdzv_backend=c10d",
            "--rdzv_endpoint=" + master + ":" + port,
            "--rdzv_id=" + a.run_id};
  AddScript(a, p.argv);
  return p;
}

namespace {

std::map<std::string, std::string> OwnEnv() {
  std::map<std::string, std::string> env;
  for (const char* k : {"SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES", "SLURM_JOB_ID", "SLURM_NODEID",
                        "SLURMD_NODENAME", "TMPDIR", "LATHE_SLURM_BIN_DIR"}) {
    if (const char* v = std::getenv(k)) env[k] = v;
  }
  return env;
}

// The allocation's nodes, in Slurm's order (the first is the rendezvous').
Result<std::vector<std::string>> AllocationHosts(const std::string& nodelist,
                                                 const std::string& bin_dir) {
  std::vector<std::string> argv = {bin_dir.empty() ? "scontrol" : bin_dir + "/scontrol", "show",
                                   "hostnames", nodelist};
  auto out = os::RunCommand(argv, kScontrolTimeoutMs);
  if (!out.ok() || out->exit_code != 0) {
    return Status::Msg(Code::kUnavailable, "torchrun.no_hosts",
                       {{"command", "scontrol show hostnames"},
                        {"detail", out.ok() ? out->err : out.status().message()}});
  }
  std::vector<std::string> hosts;
  size_t start = 0;
  const std::string& text = out->out;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty()) hosts.push_back(line);
    start = end + 1;
  }
  return hosts;
}

int Fail(const Status& st, int rc) {
  std::fprintf(stderr, "lathe: %s\n", Localize(st, DetectLang()).c_str());
  return rc;
}

}  // namespace

int TorchrunMain(int argc, char** argv) {
  auto args = ParseTorchrunArgs(std::vector<std::string>(argv + 2, argv + argc));
  if (!args.ok()) return Fail(args.status(), 2);
  const std::map<std::string, std::string> env = OwnEnv();
  std::vector<std::string> hosts;
  if (args->nnodes > 1 && args->on_node) {
    auto h = AllocationHosts(env.count("SLURM_JOB_NODELIST") ? env.at("SLURM_JOB_NODELIST") : "",
                             env.count("LATHE_SLURM_BIN_DIR") ? env.at("LATHE_SLURM_BIN_DIR") : "");
    if (!h.ok()) return Fail(h.status(), 127);
    hosts = std::move(*h);
  }
  const std::string self = os::SelfExe(argv[0]);
  auto plan = PlanTorchrun(*args, self, env, hosts);
  if (!plan.ok()) return Fail(plan.status(), 2);
  for (const auto& [k, v] : plan->env) os::SetEnvVar(k, v);
  if (plan->hosts.empty()) {  // srun's side: nothing to clean after it
    std::fflush(stderr);
    Status st = os::ExecReplace(plan->argv);
    return Fail(Status::Msg(Code::kNotFound, "torchrun.exec_failed",
                            {{"program", plan->argv[0]}, {"detail", st.message()}}),
                127);
  }
  const std::string tmp = env.count("TMPDIR") ? env.at("TMPDIR") : "/tmp";
  // The node's name too: nodes that share a /tmp (a test cluster on one
  // host) each keep their own.
  std::string job =
      env.count("SLURM_JOB_ID") ? env.at("SLURM_JOB_ID") : std::to_string(os::SelfPid());
  if (env.count("SLURMD_NODENAME")) job += "-" + env.at("SLURMD_NODENAME");
  std::string file;
  if (auto written = WriteHostfile(tmp, args->run_id, job, plan->hosts); written.ok()) {
    file = *written;
    os::SetEnvVar("LATHE_HOSTFILE", file);
  } else {
    std::fprintf(stderr, "lathe: cannot write the hostfile: %s\n",
                 written.status().ToString().c_str());
  }
  // torchrun runs as a child, not in this process's place: the hostfile goes
  // when it ends, however it ends (a signal included).
  std::fflush(stderr);
  auto ended = os::RunForegroundChild(plan->argv, [&] {
    // Best effort: a file left behind is only a few host names.
    if (!file.empty()) (void)os::RemoveFileIfPresent(file);
  });
  if (!ended.ok()) {
    if (!file.empty()) (void)os::RemoveFileIfPresent(file);  // Best effort, as above.
    return Fail(Status::Msg(Code::kNotFound, "torchrun.exec_failed",
                            {{"program", plan->argv[0]}, {"detail", ended.status().message()}}),
                127);
  }
  if (!ended->exited) os::ExitLike(*ended);
  return ended->code;
}

}  // namespace lathe::exec
