#include "lathe/exec/slurm/slurm_backend.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lathe/exec/checkpoint_records.h"
#include "lathe/exec/slurm/slurm_sinfo.h"
#include "lathe/os/fd.h"
#include "lathe/os/files.h"

namespace lathe::exec {
namespace {

// Where Launch notes the run's shared log, in the daemon's run directory,
// for LogPath after a restart.
constexpr char kLogNote[] = "slurm_log";
// How much of Slurm's output file explains a job that never started the run.
constexpr size_t kOutputReadBytes = 64 << 10;
constexpr size_t kOutputTailBytes = 400;

std::string Trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A path option: absolute, without a line break (it ends up in a shell
// script and in Slurm's options).
Status CheckPathOption(const std::string& pool, const char* field, const std::string& value,
                       bool required) {
  if (value.empty() && !required) return Status::OK();
  if (value.empty() || value[0] != '/' || value.find_first_of("\n\r") != std::string::npos) {
    return Status::Msg(Code::kInvalidArgument, "slurm.bad_pool_path",
                       {{"pool", pool}, {"field", field}, {"value", value}});
  }
  return Status::OK();
}

// `path` is `dir` or inside it, lexically.
bool IsUnder(const std::string& path, const std::string& dir) {
  namespace fs = std::filesystem;
  std::string p = fs::path(path).lexically_normal().string();
  std::string d = fs::path(dir).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  if (p == d) return true;
  return p.size() > d.size() && p.compare(0, d.size(), d) == 0 && (d == "/" || p[d.size()] == '/');
}

// The last line of Slurm's output that says something, shortened.
std::string LastWords(std::string_view text) {
  std::string t = Trimmed(text);
  const size_t nl = t.rfind('\n');
  std::string line = nl == std::string::npos ? t : t.substr(nl + 1);
  if (line.size() > kOutputTailBytes) line = "..." + line.substr(line.size() - kOutputTailBytes);
  return line;
}

// scancel's answer when there was nothing left to do.
bool NothingToCancel(const os::CommandOutput& o) {
  return o.exit_code == 0 || Contains(o.err, "already completing or completed") ||
         Contains(o.err, "Invalid job id specified");
}

// scancel's (or setpriv's) answer when the user may not do it.
bool Refused(const Result<os::CommandOutput>& r) {
  if (!r.ok()) return r.status().IsNotFound();  // setpriv cannot run the command
  const std::string& e = r->err;
  return Contains(e, "ermission denied") || Contains(e, "Invalid user id") ||
         Contains(e, "setpriv:");
}

AttemptStatus Exited(ExitRecord e) {
  AttemptStatus s;
  s.phase = AttemptPhase::kExited;
  s.exit = std::move(e);
  return s;
}

// The ends Slurm imposed on a job that its program did not choose, as
// AttemptStatus::cluster_end names them (and CANCELLED: a scancel that the
// daemon did not ask for; the run is stopped); "" for any other state.
std::string ClusterEnd(std::string_view state, bool time_capped) {
  if (state == "TIMEOUT" && time_capped) return std::string(kPartitionTimeLimit);
  for (const char* s : {"PREEMPTED", "NODE_FAIL", "TIMEOUT", "CANCELLED"}) {
    if (state == s) return s;
  }
  return "";
}

}  // namespace

Json SlurmHandleToJson(const SlurmHandle& h) {
  Json j = {{"dir", h.dir}, {"pool", h.pool}, {"uid", h.uid}, {"gid", h.gid}, {"log", h.log}};
  if (!h.job_id.empty()) j["job_id"] = h.job_id;
  if (h.records_checkpoints) j["records_checkpoints"] = true;
  if (h.time_capped) j["time_capped"] = true;
  if (!h.submitted_with.empty()) j["submitted_with"] = h.submitted_with;
  if (!h.rest_error.empty()) j["rest_error"] = h.rest_error;
  return j;
}

SlurmHandle SlurmHandleFromJson(const Json& j) {
  SlurmHandle h;
  if (!j.is_object()) return h;
  auto str = [&](const char* k) {
    auto it = j.find(k);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  h.job_id = str("job_id");
  h.dir = str("dir");
  h.pool = str("pool");
  h.log = str("log");
  h.submitted_with = str("submitted_with");
  h.rest_error = str("rest_error");
  if (auto it = j.find("uid"); it != j.end() && it->is_number_unsigned()) h.uid = it->get<uid_t>();
  if (auto it = j.find("gid"); it != j.end() && it->is_number_unsigned()) h.gid = it->get<gid_t>();
  if (auto it = j.find("records_checkpoints"); it != j.end() && it->is_boolean())
    h.records_checkpoints = it->get<bool>();
  if (auto it = j.find("time_capped"); it != j.end() && it->is_boolean())
    h.time_capped = it->get<bool>();
  return h;
}

// ---- construction ---------------------------------------------------------------

Result<std::unique_ptr<SlurmBackend>> SlurmBackend::Create(SlurmPoolOptions options,
                                                           std::string self_exe, os::Clock& clock) {
  const int64_t timeout_ms = options.command_timeout_ms;
  return Create(std::move(options), std::move(self_exe), clock, MakeRealSlurmCommands(timeout_ms));
}

Result<std::unique_ptr<SlurmBackend>> SlurmBackend::Create(
    SlurmPoolOptions options, std::string self_exe, os::Clock& clock,
    std::unique_ptr<SlurmCommands> commands, std::unique_ptr<SlurmRestTransport> rest) {
  std::string lathe = options.lathe_path.empty() ? self_exe : options.lathe_path;
  RETURN_IF_ERROR(CheckPathOption(options.name, "shared_dir", options.shared_dir, true));
  RETURN_IF_ERROR(CheckPathOption(options.name, "lathe_path", lathe, true));
  RETURN_IF_ERROR(CheckPathOption(options.name, "bin_dir", options.bin_dir, false));
  RETURN_IF_ERROR(CheckPathOption(options.name, "slurm_conf", options.slurm_conf, false));
  if (!options.rest.url.empty() && rest == nullptr) {
    return Status::Msg(
        Code::kInvalidArgument, "slurm.bad_pool_path",
        {{"pool", options.name}, {"field", "rest.url"}, {"value", options.rest.url}});
  }
  if (options.rest.url.empty()) rest.reset();
  return std::unique_ptr<SlurmBackend>(new SlurmBackend(std::move(options), std::move(lathe), clock,
                                                        std::move(commands), std::move(rest)));
}

SlurmBackend::SlurmBackend(SlurmPoolOptions options, std::string lathe_path, os::Clock& clock,
                           std::unique_ptr<SlurmCommands> commands,
                           std::unique_ptr<SlurmRestTransport> rest)
    : opts_(std::move(options)),
      lathe_path_(std::move(lathe_path)),
      clock_(clock),
      commands_(std::move(commands)),
      rest_(std::move(rest)) {
  if (rest_ != nullptr) {
    tokens_ = std::make_unique<SlurmTokens>(
        opts_.rest.token_lifespan_ms,
        [this](const std::string& user, int64_t lifespan_s) { return MintToken(user, lifespan_s); },
        clock_);
  }
}

Capabilities SlurmBackend::Caps() const {
  Capabilities c;
  c.places_runs = true;
  c.memory_limit = true;  // --mem
  c.cpu_limit = true;     // --cpus-per-task
  c.multi_node = true;    // --nodes; spec.torchrun starts one torchrun per node
  c.note = fmt::format(
      "Slurm pool '{}': each attempt is a batch job on one node or several (spec nodes), placed "
      "by Slurm (GPUs per node as GRES, --cpus-per-task, --mem, --time); no ports, notebooks, "
      "workspaces, secret files, private "
      "/dev/shm, isolated network or images, and paths must be under {}",
      opts_.name, opts_.shared_dir);
  return c;
}

Status SlurmBackend::Check(const run::RunSpec& spec, const RunUser& user) const {
  auto unsupported = [&](const char* field) {
    return Status::Msg(Code::kInvalidArgument, "slurm.field_unsupported",
                       {{"field", field}, {"pool", opts_.name}});
  };
  auto not_shared = [&](const char* field, const std::string& path) {
    return Status::Msg(Code::kInvalidArgument, "slurm.path_not_shared",
                       {{"field", field}, {"path", path}, {"shared_dir", opts_.shared_dir}});
  };
  if (run::IsNotebookSpec(spec) || run::IsServiceSpec(spec)) return unsupported("type");
  if (!spec.ports.empty()) return unsupported("ports");
  if (spec.network == run::Network::kIsolated) return unsupported("network");
  if (spec.shm_bytes > 0) return unsupported("shm");
  // A workspace's clone and record are made on the daemon's machine
  // (daemon/workspaces.h), which the nodes do not see.
  if (!spec.workspace.empty()) return unsupported("workspace");
  // Secret files are written into the daemon's run directory.
  if (!spec.secret_files.empty()) return unsupported("secret_files");
  if (!spec.workdir.empty() && !IsUnder(spec.workdir, opts_.shared_dir)) {
    return not_shared("workdir", spec.workdir);
  }
  if (!spec.checkpoint_dir.empty()) {
    std::string dir = spec.checkpoint_dir;
    if (dir[0] != '/') dir = (spec.workdir.empty() ? user.home : spec.workdir) + "/" + dir;
    if (!IsUnder(dir, opts_.shared_dir)) return not_shared("checkpoints.dir", dir);
  }
  return Status::OK();
}

// ---- launching ------------------------------------------------------------------

Result<Json> SlurmBackend::Prepare(const LaunchRequest& req) {
  const SlurmAttemptPaths p = SlurmPaths(
      opts_.shared_dir, SlurmUserDirName(req.user.uid, req.user.name), req.run_id, req.attempt);
  RememberLog(req.run_id, p.log);
  return SlurmHandleToJson(SlurmHandle{"", p.dir, opts_.name, req.user.uid, req.user.gid, p.log,
                                       !req.checkpoint_dir.empty()});
}

Status SlurmBackend::MakeAttemptFiles(const LaunchRequest& req, const SlurmAttemptPaths& p,
                                      const os::FsIdentity& id) {
  LaunchConfig config = SlurmLaunchConfig(opts_, req, p);
  // `lathe __torchrun` runs on the nodes: the pool's lathe, as the monitor's.
  if (config.argv.size() > 1 && config.argv[1] == "__torchrun") config.argv[0] = lathe_path_;
  return os::AsUser(id, [&]() -> Status {
    // 1. The user's own directory, made now or checked to be theirs.
    Status made = os::MakeDir(p.user_dir, 0700);
    if (made.code() == Code::kAlreadyExists) {
      auto st = os::LstatFile(p.user_dir);
      if (!st.ok()) return st.status();
      if (!S_ISDIR(st->mode) || st->uid != id.uid) {
        return Status::Msg(Code::kPermissionDenied, "slurm.user_dir_not_owned",
                           {{"path", p.user_dir}, {"user", id.name}});
      }
    } else if (!made.ok()) {
      return made;
    }
    // 2. The run's and the attempt's; what an earlier try of this attempt left goes.
    for (const std::string& dir : {p.run_dir, p.dir}) {
      Status st = os::MakeDir(dir, 0700);
      if (!st.ok() && st.code() != Code::kAlreadyExists) return st;
    }
    for (const std::string& stale : {p.exit, p.exit + ".pending", p.monitor}) {
      RETURN_IF_ERROR(os::RemoveFile(stale));
    }
    // 3. The log, so that it can be followed before the job starts.
    ASSIGN_OR_RETURN(os::Fd log,
                     os::Fd::Open(p.log, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600));
    RETURN_IF_ERROR(log.Close(p.log));
    // 4. What the node reads; launch.json holds the run's environment.
    RETURN_IF_ERROR(os::WriteFileAtomic(p.launch, LaunchToJson(config).dump(), 0600));
    return os::WriteFileAtomic(p.script, SlurmBatchScript(lathe_path_, p.launch), 0700);
  });
}

Result<Launched> SlurmBackend::Launch(const LaunchRequest& req, const Json& prepared) {
  const std::string user_dir = SlurmUserDirName(req.user.uid, req.user.name);
  const SlurmAttemptPaths p = SlurmPaths(opts_.shared_dir, user_dir, req.run_id, req.attempt);
  SlurmHandle h{
      "", p.dir, opts_.name, req.user.uid, req.user.gid, p.log, !req.checkpoint_dir.empty()};
  RememberLog(req.run_id, p.log);
  if (!req.attempt_dir.empty()) {
    const std::string run_dir = std::filesystem::path(req.attempt_dir).parent_path().string();
    Status noted =
        os::WriteFileAtomic(run_dir + "/" + kLogNote, p.log + "\n", 0600, os::Durability::kNoSync);
    if (!noted.ok()) spdlog::warn("run {}: {}", req.run_id, noted.ToString());
  }
  Launched out;
  out.handle = SlurmHandleToJson(h);
  const os::FsIdentity id{req.user.uid, req.user.gid, req.user.groups, user_dir};
  // The time limit first: launch.json holds the monitor's warning for it.
  LaunchRequest limited = req;
  h.time_capped = CapToPartition(limited);
  out.handle = SlurmHandleToJson(h);
  if (Status made = MakeAttemptFiles(limited, p, id); !made.ok()) {
    if (!made.msg_id().empty()) {  // the user's directory is not theirs
      out.start_error = made.message();
      return out;
    }
    return Status(made.code(), "cannot prepare the attempt in the Slurm pool's shared directory: " +
                                   made.message());
  }
  if (rest_ != nullptr) {
    auto by_rest = SubmitRest(limited, p);
    if (by_rest.ok()) {
      h.job_id = *by_rest;
      h.submitted_with = "slurmrestd";
    } else {
      h.rest_error = by_rest.status().message();
      spdlog::warn("pool {}: run {} attempt {}: slurmrestd did not submit it ({}); sbatch does",
                   opts_.name, req.run_id, req.attempt, h.rest_error);
    }
  }
  if (h.job_id.empty()) {
    auto by_sbatch = SubmitSbatch(limited, p);
    if (!by_sbatch.ok()) {
      out.handle = SlurmHandleToJson(h);
      out.start_error = Status::Msg(Code::kUnavailable, "slurm.submit_failed",
                                    {{"pool", opts_.name}, {"error", by_sbatch.status().message()}})
                            .message();
      return out;
    }
    h.job_id = *by_sbatch;
    h.submitted_with = "sbatch";
  }
  {
    std::lock_guard lock(mu_);
    Job& job = Track(h, req.user.name);
    job.user = id;
    planner_.Reset();
  }
  out.handle = SlurmHandleToJson(h);
  out.what = "job " + h.job_id;
  // The run's events say it too, where its owner looks (`lathe inspect`).
  if (!h.rest_error.empty()) {
    out.what += " with sbatch: slurmrestd did not submit it (" + h.rest_error + ")";
  }
  return out;
}

Result<std::string> SlurmBackend::SubmitSbatch(const LaunchRequest& req,
                                               const SlurmAttemptPaths& p) {
  auto submitted = commands_->Run(SbatchArgv(SlurmCommandPath(opts_, "sbatch"), opts_, req, p),
                                  &req.user, SlurmCommandEnv(opts_, &req.user));
  if (!submitted.ok()) return Status::Unavailable(submitted.status().message());
  if (submitted->exit_code != 0) {
    std::string err = Trimmed(submitted->err);
    return Status::Unavailable(err.empty() ? fmt::format("exit status {}", submitted->exit_code)
                                           : err);
  }
  // --parsable: "<job id>" or "<job id>;<cluster>".
  const std::string line = Trimmed(submitted->out);
  const std::string job_id = Trimmed(line.substr(0, line.find(';')));
  if (!AllDigits(job_id)) return Status::Unavailable("no job id in sbatch's answer: " + line);
  return job_id;
}

Result<std::string> SlurmBackend::MintToken(const std::string& user, int64_t lifespan_s) {
  auto r = Command("scontrol",
                   {"token", "username=" + user, fmt::format("lifespan={}", lifespan_s)}, nullptr);
  if (!r.ok()) return Status::Unavailable("scontrol token: " + r.status().message());
  if (r->exit_code != 0) {
    return Status::Unavailable("scontrol token: " + LastWords(r->err + "\n" + r->out));
  }
  return ParseScontrolToken(r->out);
}

Result<std::string> SlurmBackend::SubmitRest(const LaunchRequest& req, const SlurmAttemptPaths& p) {
  const std::string& name = req.user.name;
  if (name.empty()) {
    return Status::FailedPrecondition(
        fmt::format("uid {} has no user name, which slurmrestd needs", req.user.uid));
  }
  const std::string body =
      SlurmRestJob(opts_, lathe_path_, req, p, SlurmCommandEnv(opts_, &req.user)).dump();
  SlurmRestAnswer answer;
  for (int tries = 0; tries < 2; ++tries) {
    auto token = tokens_->Get(name);
    if (!token.ok())
      return Status::Unavailable("no token for " + name + ": " + token.status().message());
    auto reply = rest_->Post(SlurmRestSubmitPath(opts_.rest), body,
                             {{"X-SLURM-USER-NAME", name}, {"X-SLURM-USER-TOKEN", *token}});
    if (!reply.ok()) {
      // No answer: slurmctld may have taken the job all the same.
      auto found =
          FindJob(AttemptRef{req.run_id, req.attempt, req.attempt_dir, req.user, {}}, req.user.uid);
      if (found.ok() && found->has_value()) return **found;
      return Status::Unavailable(reply.status().message());
    }
    answer = ParseSlurmRestSubmit(*reply);
    if (!answer.job_id.empty() || !answer.auth_failed) break;
    tokens_->Forget(name);  // refused (expired, or the key changed): one new token
  }
  if (answer.job_id.empty()) return Status::Unavailable(answer.error);
  // openapi/v0.0.38 ignores requeue: false. A job Slurm requeued itself after
  // a node failure would run this attempt a second time, beside the one the
  // daemon submits: off, as the user, or the job goes and sbatch submits.
  auto off = Command("scontrol", {"update", "JobId=" + answer.job_id, "Requeue=0"}, &req.user);
  if (!off.ok() || off->exit_code != 0) {
    const std::string why =
        off.ok() ? LastWords(off->err + "\n" + off->out) : off.status().message();
    Job job;
    job.handle.job_id = answer.job_id;
    job.user = os::FsIdentity{req.user.uid, req.user.gid, req.user.groups, name};
    job.user_name = name;
    (void)Scancel(job, {answer.job_id});  // best effort: sbatch submits the attempt next
    return Status::Unavailable(fmt::format(
        "job {} could not be made not to requeue (scontrol update): {}", answer.job_id, why));
  }
  return answer.job_id;
}

// A run longer than its partition allows, or without a limit of its own,
// is submitted with the partition's MaxTime: at that limit it goes on as a
// new job (kPartitionTimeLimit). Asked of sinfo through Describe (shared,
// reused for a moment), without mu_.
bool SlurmBackend::CapToPartition(LaunchRequest& req) {
  const PoolDescription d = Describe();
  if (!d.error.ok()) return false;  // Describe logged why; Slurm applies its limit anyway
  const std::string& wanted = req.partition.empty() ? opts_.partition : req.partition;
  for (const Partition& part : d.partitions) {
    if (wanted.empty() ? !part.is_default : part.name != wanted) continue;
    if (part.max_time_ms <= 0) return false;  // no limit
    if (req.time_limit_ms > 0 && req.time_limit_ms <= part.max_time_ms) return false;
    req.time_limit_ms = part.max_time_ms;
    return true;
  }
  return false;
}

// ---- supervising ----------------------------------------------------------------

std::vector<AttemptStatus> SlurmBackend::Poll(const std::vector<AttemptRef>& attempts) {
  std::vector<SlurmHandle> handles;
  std::vector<std::string> ids;
  const int64_t now = clock_.MonotonicMs();
  bool due = false;
  {
    std::lock_guard lock(mu_);
    for (const AttemptRef& a : attempts) {
      handles.push_back(HandleOf(a));
      const SlurmHandle& h = handles.back();
      logs_[a.run_id] = h.log;
      if (h.job_id.empty()) continue;
      if (!Track(h, a.user.name).final &&
          std::find(ids.begin(), ids.end(), h.job_id) == ids.end()) {
        ids.push_back(h.job_id);
      }
    }
    due = !ids.empty() && planner_.Due(now);
  }
  if (due) Observe(ids, Squeue(ids), now);
  CountCheckpoints(handles);
  std::vector<AttemptStatus> out;
  out.reserve(handles.size());
  std::lock_guard lock(mu_);
  for (const SlurmHandle& h : handles) out.push_back(StatusOf(h));
  return out;
}

// The records of running jobs' nodes, counted without mu_ (a file on the
// shared file system each, read as the job's user).
void SlurmBackend::CountCheckpoints(const std::vector<SlurmHandle>& handles) {
  struct Running {
    std::string job_id, records;
    os::FsIdentity user;
  };
  std::vector<Running> running;
  {
    std::lock_guard lock(mu_);
    for (const SlurmHandle& h : handles) {
      if (!h.records_checkpoints || h.job_id.empty()) continue;
      auto it = jobs_.find(h.job_id);
      if (it == jobs_.end() || it->second.before != AttemptPhase::kRunning) continue;
      running.push_back({h.job_id, h.dir + "/checkpoints.jsonl", it->second.user});
    }
  }
  for (const Running& r : running) {
    int64_t n = -1;
    // Best effort: an identity that cannot be taken counts nothing new this time.
    (void)os::AsUser(r.user, [&] {
      if (auto c = CountCheckpointRecords(r.records); c.ok()) n = *c;
      return Status::OK();
    });
    std::lock_guard lock(mu_);
    if (auto it = jobs_.find(r.job_id); it != jobs_.end() && n > it->second.checkpoints)
      it->second.checkpoints = n;
  }
}

void SlurmBackend::Observe(const std::vector<std::string>& ids,
                           const std::optional<std::map<std::string, SlurmQueueEntry>>& queue,
                           int64_t now_ms) {
  std::vector<std::string> left;
  {
    std::lock_guard lock(mu_);
    if (!queue) {  // keep what was known: a failed squeue says nothing about the jobs
      planner_.Asked(now_ms, false);
      return;
    }
    bool changed = false;
    for (const std::string& id : ids) {
      auto it = jobs_.find(id);
      if (it == jobs_.end() || it->second.final) continue;
      Job& job = it->second;
      auto q = queue->find(id);
      const bool present = q != queue->end();
      if (present) {
        changed |= !job.last || job.last->state != q->second.state || job.absent;
        job.last = q->second;
        job.absent = false;
        const SlurmJobClass c = ClassifySlurmState(job.last->state);
        if (c != SlurmJobClass::kEnded) {
          job.before =
              c == SlurmJobClass::kQueued ? AttemptPhase::kStarting : AttemptPhase::kRunning;
          job.settled_looks = 0;
          continue;
        }
      } else {
        changed |= !job.absent;
        job.absent = true;
      }
      ++job.settled_looks;
      left.push_back(id);
    }
    planner_.Asked(now_ms, changed);
  }
  Settle(left);
}

void SlurmBackend::Settle(const std::vector<std::string>& ids) {
  std::map<std::string, Job> jobs;  // copies: files and commands are read without mu_
  {
    std::lock_guard lock(mu_);
    for (const std::string& id : ids) {
      if (auto it = jobs_.find(id); it != jobs_.end() && !it->second.final)
        jobs.emplace(id, it->second);
    }
  }
  std::map<std::string, AttemptStatus> ended;
  std::vector<std::string> unexplained;
  for (const auto& [id, job] : jobs) {
    if (auto exit = ReadExit(job)) {
      ended[id] = Exited(*exit);
      // Slurm's last word, when squeue still showed the job ended.
      if (job.last && !job.absent)
        ended[id].cluster_end = ClusterEnd(job.last->state, job.handle.time_capped);
      // The monitor ended the program on --signal's USR1, ahead of the time
      // limit: the job ended before Slurm's TIMEOUT, which says it as well.
      if (ended[id].cluster_end.empty() && exit->stop_signal == SIGUSR1) {
        ended[id].cluster_end = ClusterEnd("TIMEOUT", job.handle.time_capped);
      }
    } else if (job.settled_looks >= 2) {  // never on one answer: NFS may show the file late
      unexplained.push_back(id);
    }
  }
  const auto accounted =
      unexplained.empty() ? std::map<std::string, SlurmJobEnd>{} : Sacct(unexplained);
  for (const std::string& id : unexplained) {
    const Job& job = jobs.at(id);
    std::optional<SlurmJobEnd> end;
    if (auto it = accounted.find(id);
        it != accounted.end() && ClassifySlurmState(it->second.state) == SlurmJobClass::kEnded) {
      end = it->second;
    } else if (job.last && ClassifySlurmState(job.last->state) == SlurmJobClass::kEnded) {
      end = SlurmJobEnd{job.last->state, 0, 0};
    }
    if (end) {
      ended[id] = Exited(*SlurmExitRecord(*end, RunStarted(job), OutputTail(job), clock_.NowMs()));
      ended[id].cluster_end = ClusterEnd(end->state, job.handle.time_capped);
      continue;
    }
    AttemptStatus gone;
    gone.phase = AttemptPhase::kGone;
    gone.why = fmt::format(
        "Slurm job {} left the queue, and neither its exit record ({}/exit.json) nor Slurm's "
        "accounting says how it ended",
        id, job.handle.dir);
    ended[id] = gone;
  }
  std::lock_guard lock(mu_);
  for (auto& [id, status] : ended) {
    if (auto it = jobs_.find(id); it != jobs_.end()) it->second.final = std::move(status);
  }
}

AttemptStatus SlurmBackend::StatusOf(const SlurmHandle& h) const {
  AttemptStatus s;
  if (h.job_id.empty()) return s;  // still being submitted
  auto it = jobs_.find(h.job_id);
  if (it == jobs_.end()) return s;
  const Job& job = it->second;
  if (job.final) {
    s = *job.final;
  } else {
    s.phase = job.before;
  }
  s.checkpoints_recorded = job.checkpoints;
  s.note = job.absent ? "left the queue" : job.last ? SlurmNote(*job.last) : "submitted";
  return s;
}

Status SlurmBackend::Signal(const AttemptRef& a, StopSignal signal) {
  const SlurmHandle h = HandleOf(a);
  if (h.job_id.empty()) return Status::OK();  // told once it has been submitted
  Job job;
  {
    std::lock_guard lock(mu_);
    Job& tracked = Track(h, a.user.name);
    if (tracked.final) return Status::OK();
    job = tracked;
    planner_.Reset();  // see what it did soon
  }
  const bool queued =
      job.last && !job.absent && ClassifySlurmState(job.last->state) == SlurmJobClass::kQueued;
  if (signal == StopSignal::kGraceful) {
    // A job still queued has no batch step to signal (Slurm refuses, or fails
    // the job as a launch failure): it is cancelled.
    if (queued) return Scancel(job, {h.job_id});
    if (Scancel(job, {"--batch", "--signal=TERM", h.job_id}).ok()) return Status::OK();
    return Scancel(job, {h.job_id});
  }
  if (queued) return Scancel(job, {h.job_id});
  // Best effort: the cancel below ends the job whether or not the monitor answered.
  (void)Scancel(job, {"--batch", "--signal=USR2", h.job_id});
  return Scancel(job, {h.job_id});
}

void SlurmBackend::Release(const AttemptRef& a) {
  SlurmHandle h = HandleOf(a);
  std::optional<Job> known;
  {
    std::lock_guard lock(mu_);
    if (auto it = jobs_.find(h.job_id); !h.job_id.empty() && it != jobs_.end()) {
      known = it->second;
      jobs_.erase(it);
    }
  }
  if (known && known->final) return;  // it ended: nothing left to cancel
  if (h.job_id.empty()) {
    auto found = FindJob(a, h.uid);
    if (!found.ok() || !*found) return;
    h.job_id = **found;
  }
  Job job;
  if (known) {
    job = *known;
  } else {
    job.handle = h;
    job.user = os::IdentityOf(h.uid, h.gid);
    job.user_name = a.user.name;
  }
  if (Status st = Scancel(job, {h.job_id}); !st.ok()) {
    spdlog::warn("run {}: cannot cancel Slurm job {} of attempt {}: {}", a.run_id, h.job_id,
                 a.attempt, st.ToString());
  }
}

Readoption SlurmBackend::Readopt(const AttemptRef& a) {
  Readoption out;
  SlurmHandle h = HandleOf(a);
  RememberLog(a.run_id, h.log);
  Job probe;
  probe.handle = h;
  probe.user = os::IdentityOf(h.uid, h.gid);
  probe.user_name = a.user.name;
  if (auto exit = ReadExit(probe)) {
    out.what = Found::kExited;
    out.exit = *exit;
    out.handle = SlurmHandleToJson(h);
    return out;
  }
  if (h.job_id.empty()) {  // the daemon died while sbatch ran: did it submit?
    auto found = FindJob(a, h.uid);
    out.handle = SlurmHandleToJson(h);
    if (!found.ok()) {
      out.what = Found::kGone;
      out.why =
          "cannot ask Slurm whether the attempt's job was submitted: " + found.status().message();
      return out;
    }
    if (!*found) {
      out.what = Found::kNeverStarted;
      return out;
    }
    h.job_id = **found;
  }
  out.handle = SlurmHandleToJson(h);
  {
    std::lock_guard lock(mu_);
    Job& job = Track(h, a.user.name);
    job.user = probe.user;
  }
  const std::vector<std::string> ids = {h.job_id};
  Observe(ids, Squeue(ids), clock_.MonotonicMs());
  std::lock_guard lock(mu_);
  const AttemptStatus s = StatusOf(h);
  planner_.Reset();  // the first Poll asks again at once
  if (s.phase == AttemptPhase::kExited) {
    out.what = Found::kExited;
    out.exit = s.exit;
    return out;
  }
  // Queued, running, or not heard of once: Poll settles it (never gone on one answer).
  out.what = Found::kAlive;
  return out;
}

std::string SlurmBackend::LogPath(const std::string& run_dir) const {
  std::string dir = run_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string run_id = dir.substr(dir.rfind('/') + 1);
  {
    std::lock_guard lock(mu_);
    if (auto it = logs_.find(run_id); it != logs_.end()) return it->second;
  }
  if (auto note = os::ReadFileUpTo(dir + "/" + kLogNote, 4096); note.ok()) {
    const std::string path = Trimmed(*note);
    const std::string tail = "/" + run_id + "/log";
    if (IsUnder(path, opts_.shared_dir) && path.size() > tail.size() &&
        path.compare(path.size() - tail.size(), tail.size(), tail) == 0 &&
        path.find('\n') == std::string::npos) {
      RememberLog(run_id, path);
      return path;
    }
  }
  return dir + "/log";
}

// ---- helpers --------------------------------------------------------------------

SlurmHandle SlurmBackend::HandleOf(const AttemptRef& a) const {
  SlurmHandle h = SlurmHandleFromJson(a.handle);
  const bool has_uid = a.handle.is_object() && a.handle.contains("uid");
  if (!has_uid) h.uid = a.user.uid;
  if (h.dir.empty() || h.log.empty()) {
    const SlurmAttemptPaths p = SlurmPaths(
        opts_.shared_dir, SlurmUserDirName(a.user.uid, a.user.name), a.run_id, a.attempt);
    if (h.dir.empty()) h.dir = p.dir;
    if (h.log.empty()) h.log = p.log;
  }
  if (h.pool.empty()) h.pool = opts_.name;
  return h;
}

SlurmBackend::Job& SlurmBackend::Track(const SlurmHandle& h, const std::string& user_name) {
  auto [it, added] = jobs_.try_emplace(h.job_id);
  if (added) {
    it->second.handle = h;
    it->second.user = os::IdentityOf(h.uid, h.gid);
    it->second.user_name = user_name;
    planner_.Reset();  // a job not heard of yet (after a restart): ask at once
  }
  return it->second;
}

void SlurmBackend::RememberLog(const std::string& run_id, const std::string& log) const {
  std::lock_guard lock(mu_);
  logs_[run_id] = log;
}

Result<os::CommandOutput> SlurmBackend::Command(std::string_view name,
                                                std::vector<std::string> args,
                                                const RunUser* user) {
  args.insert(args.begin(), SlurmCommandPath(opts_, name));
  return commands_->Run(args, user, SlurmCommandEnv(opts_, user));
}

std::optional<std::map<std::string, SlurmQueueEntry>> SlurmBackend::Squeue(
    const std::vector<std::string>& ids) {
  auto r = Command("squeue",
                   {"--noheader", "--states=all", fmt::format("--jobs={}", fmt::join(ids, ",")),
                    std::string("--format=") + kSqueueFormat},
                   nullptr);
  if (!r.ok()) {
    spdlog::warn("Slurm pool {}: squeue: {}", opts_.name, r.status().ToString());
    return std::nullopt;
  }
  if (r->exit_code != 0) {
    // Every job asked about is one Slurm no longer knows: none is in the queue.
    if (Contains(r->err, "Invalid job id specified"))
      return std::map<std::string, SlurmQueueEntry>{};
    spdlog::warn("Slurm pool {}: squeue exited with {}: {}", opts_.name, r->exit_code,
                 Trimmed(r->err));
    return std::nullopt;
  }
  return ParseSqueue(r->out);
}

PoolDescription SlurmBackend::Describe() {
  std::lock_guard lock(describe_mu_);  // one sinfo at a time: those waiting get its answer
  if (described_ && clock_.MonotonicMs() - described_at_ms_ < kDescribeReuseMs) {
    return *described_;
  }
  described_ = DescribeNow();
  described_at_ms_ = clock_.MonotonicMs();
  return *described_;
}

PoolDescription SlurmBackend::DescribeNow() {
  PoolDescription d;
  d.partition = opts_.partition;
  d.account = opts_.account;
  d.qos = opts_.qos;
  auto fail = [&](std::string why) {
    std::string first = Trimmed(why.substr(0, why.find('\n')));
    if (first.size() > 300) first = first.substr(0, 300) + "...";
    spdlog::warn("Slurm pool {}: sinfo: {}", opts_.name, first);
    d.error = Status::Msg(Code::kUnavailable, "slurm.sinfo_failed",
                          {{"pool", opts_.name}, {"error", first}});
    return d;
  };
  auto r = Command("sinfo", SinfoArgs(), nullptr);
  if (!r.ok()) return fail(r.status().message());
  if (r->exit_code != 0) {
    std::string err = Trimmed(r->err);
    return fail(err.empty() ? fmt::format("exit status {}", r->exit_code) : err);
  }
  auto parts = ParseSinfo(r->out);
  if (!parts.ok()) return fail(parts.status().message());
  d.partitions = std::move(*parts);
  return d;
}

std::map<std::string, SlurmJobEnd> SlurmBackend::Sacct(const std::vector<std::string>& ids) {
  auto r = Command(
      "sacct",
      {"-n", "-P", fmt::format("--jobs={}", fmt::join(ids, ",")), "--format=JobID,State,ExitCode"},
      nullptr);
  if (!r.ok() || r->exit_code != 0) return {};  // no accounting on this cluster
  return ParseSacct(r->out);
}

Status SlurmBackend::Scancel(const Job& job, const std::vector<std::string>& args) {
  RunUser user;
  user.uid = job.user.uid;
  user.gid = job.user.gid;
  user.groups = job.user.groups;
  user.name = job.user_name;
  auto mine = Command("scancel", args, &user);
  if (mine.ok() && NothingToCancel(*mine)) return Status::OK();
  auto result = std::move(mine);
  if (Refused(result)) result = Command("scancel", args, nullptr);
  if (!result.ok()) return result.status();
  if (NothingToCancel(*result)) return Status::OK();
  return Status::Unavailable(
      fmt::format("scancel {}: {}", fmt::join(args, " "), Trimmed(result->err)));
}

Result<std::optional<std::string>> SlurmBackend::FindJob(const AttemptRef& a, uid_t uid) {
  auto r = Command("squeue",
                   {"--noheader", "--states=all", "--name=lathe-" + a.run_id, "--format=%i|%k|%U"},
                   nullptr);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return Status::Unavailable("squeue: " + Trimmed(r->err));
  const std::string comment = fmt::format("lathe:{}:{}", a.run_id, a.attempt);
  const std::string owner = std::to_string(uid);
  std::string_view rest = r->out;
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    const std::string line = Trimmed(rest.substr(0, nl));
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    const size_t a1 = line.find('|'), a2 = line.rfind('|');
    if (a1 == std::string::npos || a1 == a2) continue;
    const std::string id = line.substr(0, a1);
    if (AllDigits(id) && line.substr(a1 + 1, a2 - a1 - 1) == comment &&
        line.substr(a2 + 1) == owner) {
      return std::optional<std::string>(id);
    }
  }
  return std::optional<std::string>();
}

std::optional<ExitRecord> SlurmBackend::ReadExit(const Job& job) {
  std::optional<ExitRecord> out;
  // Best effort: an identity that cannot be taken reads nothing, as a missing file.
  (void)os::AsUser(job.user, [&] {
    if (auto e = ReadExitRecord(job.handle.dir + "/exit.json"); e.ok()) out = *e;
    return Status::OK();
  });
  return out;
}

bool SlurmBackend::RunStarted(const Job& job) {
  bool started = false;
  // Best effort, as ReadExit.
  (void)os::AsUser(job.user, [&] {
    started = os::Exists(job.handle.dir + "/monitor.json");
    return Status::OK();
  });
  return started;
}

std::string SlurmBackend::OutputTail(const Job& job) {
  std::string tail;
  // Best effort, as ReadExit.
  (void)os::AsUser(job.user, [&] {
    auto text = os::ReadRegularFileUpTo(job.handle.dir + "/slurm.out", kOutputReadBytes);
    if (text.ok()) tail = LastWords(*text);
    return Status::OK();
  });
  return tail;
}

}  // namespace lathe::exec
