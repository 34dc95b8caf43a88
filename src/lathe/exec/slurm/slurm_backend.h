// The Slurm backend: each attempt of a run in a Slurm pool is one batch job,
// submitted with sbatch as the run's user, whose script execs Lathe's
// monitor (`lathe __monitor <launch.json> -`, monitor.h) on the node that
// Slurm picked. Slurm places the run (places_runs: GPUs as GRES, CPUs,
// memory, the time limit); the monitor writes the run's log, monitor.json
// and exit.json on the shared file system exactly as for a local run
// (slurm_batch.h has the layout). One backend per pool; the daemon routes
// attempts by the run's pool.
//
// Supervision: one batched squeue per Poll that needs one, for all of the
// pool's attempts, paced by SqueuePlanner (2 s after a change, doubling to
// 60 s while nothing changes); between two, Poll answers from the last
// answer. A job that is no longer in the queue (or is there in an ended
// state) ended as its exit.json says; without one, as Slurm's accounting
// (sacct) or its last state says. A job is declared gone only after two
// squeue answers in a row without it (a failed squeue counts for nothing)
// and neither exit.json nor Slurm knows how it ended: NFS may show a file
// late, and slurmctld forgets a job some time after it ended.
//
// The handle:
//   {"job_id": "123", "dir": "<shared attempt dir>", "pool": "cluster",
//    "uid": 1001, "gid": 1001, "log": "<shared run dir>/log"}
// (prepared: the same without job_id). Launched::what is "job 123".
//
// Identity. Files on the shared file system are made and read with the
// user's file-system identity (os::AsUser: NFS with root_squash is the
// norm); sbatch and scancel run as the user (SlurmCommands); squeue and
// sacct, which only read, as the daemon. scancel falls back to the daemon
// only when the user's is refused.
//
// Threads: as backend.h says. Launch runs on several threads at once and
// blocks on sbatch; the other calls are serialised by the daemon and run a
// Slurm command at most (squeue, sacct, scancel), each bounded by the pool's
// command_timeout_ms. What the backend remembers of its jobs (the last
// squeue answer, the planner) is guarded by mu_ and rebuilt from handles
// after a restart.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "lathe/exec/backend.h"
#include "lathe/exec/slurm/slurm_batch.h"
#include "lathe/exec/slurm/slurm_commands.h"
#include "lathe/exec/slurm/slurm_options.h"
#include "lathe/exec/slurm/slurm_rest.h"
#include "lathe/exec/slurm/slurm_state.h"
#include "lathe/exec/slurm/squeue_planner.h"
#include "lathe/os/clock.h"
#include "lathe/os/users.h"

namespace lathe::exec {

// The handle's fields, parsed.
struct SlurmHandle {
  std::string job_id;  // "" until sbatch answered
  std::string dir;     // the attempt's directory on the shared file system
  std::string pool;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string log;  // the run's log on the shared file system
  // The node records finished checkpoints in <dir>/checkpoints.jsonl
  // (LaunchRequest::checkpoint_dir was set).
  bool records_checkpoints = false;
  // Submitted with its partition's MaxTime as --time (shorter than the run's
  // max_duration, or the run has none): a TIMEOUT is the partition's limit.
  bool time_capped = false;
  // How it was submitted: "sbatch" or "slurmrestd"; "" before.
  std::string submitted_with{};
  // Why slurmrestd did not submit it when the pool has one ("" otherwise).
  std::string rest_error{};
};
Json SlurmHandleToJson(const SlurmHandle& h);
SlurmHandle SlurmHandleFromJson(const Json& j);  // missing fields stay empty

class SlurmBackend final : public ExecutionBackend {
 public:
  // self_exe: the daemon's own binary (the monitor's path on the nodes when
  // options.lathe_path is ""). clock: for the squeue pacing; not owned, must
  // outlive the backend. InvalidArgument (slurm.bad_pool_path) when
  // shared_dir, lathe_path, bin_dir or slurm_conf is not an absolute path
  // without a line break.
  static Result<std::unique_ptr<SlurmBackend>> Create(SlurmPoolOptions options,
                                                      std::string self_exe, os::Clock& clock);
  // The same with the commands given (tests answer for Slurm with a fake),
  // and slurmrestd's transport for a pool with options.rest.url
  // (InvalidArgument, slurm.bad_pool_path, when one is needed and missing).
  static Result<std::unique_ptr<SlurmBackend>> Create(
      SlurmPoolOptions options, std::string self_exe, os::Clock& clock,
      std::unique_ptr<SlurmCommands> commands, std::unique_ptr<SlurmRestTransport> rest = nullptr);

  static constexpr std::string_view kName = "slurm";
  std::string_view Name() const override { return kName; }
  Capabilities Caps() const override;
  // Refuses (slurm.field_unsupported, naming the field and the pool): a
  // notebook or service, ports, an isolated network, shm, a workspace,
  // secret files; (slurm.path_not_shared) a workdir or checkpoint dir not
  // under shared_dir.
  Status Check(const run::RunSpec& spec, const RunUser& user) const override;
  // The preliminary handle (no I/O).
  Result<Json> Prepare(const LaunchRequest& request) override;
  // Makes the attempt's files as the user, then submits as the user: through
  // slurmrestd with the user's token where the pool has one (slurm_rest.h),
  // else — or when that fails, logged with the reason and kept in the
  // handle's rest_error — with sbatch. sbatch's refusal is a start_error
  // (slurm.submit_failed with its stderr); so is a user directory that is
  // not the user's (slurm.user_dir_not_owned).
  Result<Launched> Launch(const LaunchRequest& request, const Json& prepared) override;
  // Each attempt's phase, and in AttemptStatus::note Slurm's last word on
  // it ("PENDING (Resources)", "RUNNING", "left the queue").
  std::vector<AttemptStatus> Poll(const std::vector<AttemptRef>& attempts) override;
  // A job still queued (as last heard) is cancelled. Otherwise kGraceful:
  // `scancel --batch --signal=TERM` (the monitor forwards it to the run and
  // waits for it), a cancel if that fails; kKill: `scancel --batch
  // --signal=USR2` (the monitor SIGKILLs the run and records it), then a
  // cancel, which ends the job even if its monitor does not answer.
  Status Signal(const AttemptRef& attempt, StopSignal signal) override;
  // Cancels a job not known to have ended (or, with no job id, one that the
  // attempt's sbatch may have submitted before it failed); forgets it.
  void Release(const AttemptRef& attempt) override;
  // From the handle: exit.json, squeue, sacct. kAlive while Slurm has the
  // job (queued or running) and while it cannot tell (squeue failed, or
  // the job was absent once: Poll applies the absent-twice rule); kExited;
  // kNeverStarted only when there is no job id and Slurm has no job of the
  // attempt's (found by its name and comment).
  Readoption Readopt(const AttemptRef& attempt) override;
  std::vector<Endpoint> Endpoints(const AttemptRef& attempt) override { return {}; }
  // The pool's partition, account and QOS from its options, and every
  // partition of the cluster from one sinfo run as the daemon
  // (slurm_sinfo.h), bounded by command_timeout_ms. A failed sinfo is the
  // description's error (slurm.sinfo_failed, naming the pool and why).
  // Callers at the same time share one sinfo, and an answer is reused for
  // kDescribeReuseMs (many people running `lathe pools` cost slurmctld one
  // RPC a few seconds). Touches nothing that mu_ guards.
  PoolDescription Describe() override;
  // The run's log on the shared file system. The run id is run_dir's last
  // component; its user's directory is remembered from Prepare, Launch, Poll
  // and Readopt, and across restarts from a note Launch leaves in run_dir
  // (slurm_log, 0600); unknown: run_dir/log (which does not exist).
  std::string LogPath(const std::string& run_dir) const override;

  const SlurmPoolOptions& options() const { return opts_; }

  static constexpr int64_t kDescribeReuseMs = 2000;

 private:
  // What the backend remembers of one job, by job id.
  struct Job {
    SlurmHandle handle;
    os::FsIdentity user;                            // whose files it reads and as whom it cancels
    std::string user_name;                          // "" when the uid has no passwd entry
    std::optional<SlurmQueueEntry> last;            // squeue's last answer about it
    AttemptPhase before = AttemptPhase::kStarting;  // its phase while it was queued or running
    bool absent = false;                            // not in squeue's last answer
    int settled_looks = 0;               // squeue answers in a row with it ended or absent
    std::optional<AttemptStatus> final;  // how it ended, once known
    int64_t checkpoints = 0;             // records counted in checkpoints.jsonl
  };

  SlurmBackend(SlurmPoolOptions options, std::string lathe_path, os::Clock& clock,
               std::unique_ptr<SlurmCommands> commands, std::unique_ptr<SlurmRestTransport> rest);

  // One Slurm command: <bin_dir>/<name> args..., the clean environment, as
  // `user` (nullptr: as the daemon).
  Result<os::CommandOutput> Command(std::string_view name, std::vector<std::string> args,
                                    const RunUser* user);
  // squeue about `ids`; nullopt when it failed (slurmctld down...). Jobs
  // that Slurm no longer knows are simply absent.
  std::optional<std::map<std::string, SlurmQueueEntry>> Squeue(const std::vector<std::string>& ids);
  // One sinfo, read (Describe without the reuse).
  PoolDescription DescribeNow();
  // Submits the attempt through slurmrestd as its user: a token (minted once
  // more if refused), the job, then Requeue=0 (slurm_rest.h says why). The
  // job id, or why not; a job that slurmrestd may have taken without
  // answering is looked for (FindJob) before this says it did not.
  Result<std::string> SubmitRest(const LaunchRequest& req, const SlurmAttemptPaths& paths);
  // sbatch as the user: the job id, or the start error's text.
  Result<std::string> SubmitSbatch(const LaunchRequest& req, const SlurmAttemptPaths& paths);
  // A token for `user` from `scontrol token`, run as the daemon.
  Result<std::string> MintToken(const std::string& user, int64_t lifespan_s);
  // sacct's end of each of `ids` it knows; empty when accounting is absent.
  std::map<std::string, SlurmJobEnd> Sacct(const std::vector<std::string>& ids);
  // scancel `args` as the job's user, then as the daemon if the user's was
  // refused. OK also when the job has ended or is unknown to Slurm.
  Status Scancel(const Job& job, const std::vector<std::string>& args);
  // The job id of the attempt's job, looked up by its name and comment
  // (sbatch may have submitted it before the daemon stored the handle);
  // nullopt when none; an error when squeue failed.
  Result<std::optional<std::string>> FindJob(const AttemptRef& attempt, uid_t uid);

  // The user's files, read with their identity.
  std::optional<ExitRecord> ReadExit(const Job& job);
  bool RunStarted(const Job& job);
  std::string OutputTail(const Job& job);
  Status MakeAttemptFiles(const LaunchRequest& request, const SlurmAttemptPaths& paths,
                          const os::FsIdentity& id);

  // The handle of `attempt`, its dir and log filled in when it has none.
  SlurmHandle HandleOf(const AttemptRef& attempt) const;
  // Adds the attempt's job to jobs_ when it is new. Under mu_.
  Job& Track(const SlurmHandle& h, const std::string& user_name);
  // Lowers `req`'s time limit to its partition's MaxTime when the run asks
  // for more or for none; true when it did. Without sinfo's answer, nothing.
  bool CapToPartition(LaunchRequest& req);
  // Counts the checkpoint records of the running jobs among `handles`
  // (Job::checkpoints). Takes mu_ only around the bookkeeping.
  void CountCheckpoints(const std::vector<SlurmHandle>& handles);
  // Records squeue's answer about `ids` (nullopt: it failed) asked at
  // `now_ms`, then settles the jobs that left. Takes mu_.
  void Observe(const std::vector<std::string>& ids,
               const std::optional<std::map<std::string, SlurmQueueEntry>>& queue, int64_t now_ms);
  // For each of `ids` (ended or absent in the last answer): exit.json, then
  // after a second such answer sacct or the last state, else gone.
  void Settle(const std::vector<std::string>& ids);
  AttemptStatus StatusOf(const SlurmHandle& h) const;  // under mu_
  void RememberLog(const std::string& run_id, const std::string& log) const;

  const SlurmPoolOptions opts_;
  const std::string lathe_path_;
  os::Clock& clock_;
  const std::unique_ptr<SlurmCommands> commands_;
  const std::unique_ptr<SlurmRestTransport> rest_;  // null: sbatch only
  std::unique_ptr<SlurmTokens> tokens_;             // with rest_; thread-safe itself

  mutable std::mutex mu_;
  std::map<std::string, Job> jobs_;                  // guarded by mu_
  SqueuePlanner planner_;                            // guarded by mu_
  mutable std::map<std::string, std::string> logs_;  // run id -> its log; guarded by mu_

  // Describe's last answer and when it came (monotonic ms). A lock of its
  // own, held while sinfo runs, so that Poll and the others never wait on it.
  std::mutex describe_mu_;
  std::optional<PoolDescription> described_;  // guarded by describe_mu_
  int64_t described_at_ms_ = 0;               // guarded by describe_mu_
};

}  // namespace lathe::exec
