// What the cluster checks (checks_cluster.h) need to know about each Slurm
// pool of the daemon's config, found out by running Slurm's and munge's
// client commands under hard timeouts, with SLURM_CONF set from the pool.
//
// The doctor does not read the daemon's config itself (it may not use
// daemon/): the CLI hands it the pools as plain data (ClusterPool). One
// thread per pool runs that pool's probes in order: munge, the shared
// directory, `scontrol ping`, and only when the controller answered
// `sdiag` (its clock), `sinfo` (the partition) and, with `run_job`, one tiny
// job through `srun` that writes a marker file into the shared directory on
// a node and reports whether that node finds lathe_path.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/doctor/system_view.h"

namespace lathe::doctor {

// One Slurm pool of config.yaml (daemon/pool_config.h), as plain data.
struct ClusterPool {
  std::string name;          // "cluster"
  std::string partition;     // "" = the cluster's default partition
  std::string account, qos;  // "" = none
  std::string shared_dir;    // absolute
  std::string slurm_conf;    // "" = Slurm's default (/etc/slurm/slurm.conf)
  std::string lathe_path;    // the lathe binary on the nodes ("" = this binary's path)
  std::string bin_dir;       // where scontrol, sdiag, sinfo, srun, scancel are ("" = /usr/bin)
};

struct ClusterOptions {
  std::string config_file;             // where the pools were read from
  std::string config_error;            // why it could not be used ("" when it could)
  bool config_unreadable = false;      // … because this user may not read it (not a failure)
  std::vector<ClusterPool> pools;      // the Slurm pools, by name
  bool run_job = false;                // `lathe doctor --cluster`: submit the test job
  int64_t command_timeout_ms = 15000;  // each Slurm or munge command
  int64_t job_timeout_ms = 60000;      // the test job, from srun to its end
};

enum class CommandState {
  kNotRun,    // not needed, or an earlier probe made it pointless
  kDone,      // ran (see exit_code and output)
  kTimedOut,  // killed at its timeout
  kFailed,    // could not be started (see error)
};

struct CommandProbe {
  CommandState state = CommandState::kNotRun;
  std::vector<std::string> argv;
  int exit_code = 0;
  std::string out, err;
  std::string error;                 // why it could not run
  int64_t timeout_ms = 0;            // the timeout it ran under
  int64_t start_ms = 0, end_ms = 0;  // the wall clock around it
};

struct ClusterProbe {
  ClusterPool pool;
  std::string slurm_conf;            // the slurm.conf used (pool.slurm_conf or the default)
  std::string munge_socket;          // AuthInfo's socket= in that slurm.conf; "" = munge's default
  std::string lathe_path;            // pool.lathe_path or this binary
  CommandProbe munge;                // munge -n | unmunge
  CommandProbe ping;                 // scontrol ping
  CommandProbe sdiag;                // the controller's clock
  CommandProbe sinfo;                // partitions, nodes, GPUs
  CommandProbe job;                  // srun: marker file and lathe_path on a node
  bool job_skipped_no_flag = false;  // run_job was not asked for
  // The shared directory, probed as an ordinary user.
  bool shared_exists = false;
  std::string shared_probe_dir;  // the directory probed (the user's own when it exists)
  std::string shared_user;       // as whom
  Status shared_writable;
  // The job's marker: where it should be and what this host reads there.
  std::string marker_path, marker_token;
  bool marker_seen = false;  // the file is here with the token
};

// Runs every pool's probes (one thread per pool) and waits for them.
std::vector<ClusterProbe> ProbeClusters(const SystemView& view, const ClusterOptions& options);

// ---- parsers, exposed for tests -------------------------------------------
// The munge socket of a slurm.conf's AuthInfo ("AuthInfo=socket=/x/munge.sock,ttl=60"); ""
// when there is none. Keys are case-insensitive, comments ignored.
std::string MungeSocketFromConf(std::string_view slurm_conf_text);
// The controller's time in `sdiag`'s "sdiag output at … (1796585593)", in ms; -1 when absent.
int64_t SdiagServerTimeMs(std::string_view sdiag_out);
// The GPUs in a node's Gres ("gpu:a100:4(S:0-1),shard:8" → 4); types go to `types`.
int GresGpus(std::string_view gres, std::vector<std::string>* types);

struct SinfoPartition {
  std::string name;
  bool is_default = false;
  int nodes = 0, nodes_up = 0, gpus = 0;
  std::vector<std::string> gpu_types;
};
// `sinfo --noheader --Node -o %P|%N|%G|%t` (a line per node and partition) summed per
// partition, in the order first seen.
std::vector<SinfoPartition> ParseSinfoNodes(std::string_view out);

// The test job's report lines ("marker=written", "node=n1", "lathe=0.1.0" | "lathe=missing").
struct JobReport {
  bool marker_written = false;
  std::string marker_error;  // "marker=failed: …"
  std::string node;
  bool lathe_found = false;
  std::string lathe_version;  // the first line of `lathe --version` on the node
  bool complete = false;      // every line was there
};
JobReport ParseJobReport(std::string_view out);

}  // namespace lathe::doctor
