// The run spec: what a user asks Lathe to run, from `lathe run` flags or a
// YAML file (`type: job`), carried to the daemon as JSON.
//
// JSON/YAML fields (all optional except command, which a notebook leaves out):
//   type: job | notebook | service   name: string    command: [argv...]
//   gpus: int >= 0            cpus: number > 0       memory: size ("16GB", "512Mi", or bytes)
//   shm: size                 priority: low|normal|high
//   env: {NAME: value}        workdir: absolute path (the CLI resolves relative ones)
//   retry: int >= 0           max_duration: duration ("12h", or seconds)
//   requeue: bool (requeue after preemption, default true)
//   preemptible: bool (may be preempted by higher priority, default true)
//   checkpoints: {dir: path, keep: int >= 0}  the daemon snapshots `dir`
//       while the run lives and hands the newest complete checkpoint back on
//       every restart; a relative dir is taken from the workdir; keep: how
//       many of the run's snapshots to keep (0 = all)
//   resume_from: run id or name  start from that run's newest checkpoint
//   umask: the run's file-mode creation mask, 0-0777 (an integer, or a string
//       of octal digits such as "027"); the CLI sends its own; default 022
//   secrets: [NAME, ...]  the caller's secrets (`lathe secret set`), each put
//       into the run's environment under its name at every start; only the
//       names are in the spec (ValidSecretName; none also in env)
//   secret_files: [NAME, ...]  the caller's secrets given as files instead:
//       at every start each value is written to $LATHE_SECRETS_DIR/NAME (0600,
//       the run's user's, in a 0700 directory of theirs), removed when the
//       attempt ends; never also in secrets (docs/security.md, "Secrets")
//   ports: [8888, {name: tb, port: 6006}, {name: web, socket: /abs/web.sock}]
//       what the run serves, reached through the daemon's proxy on the run's
//       own origin (docs/security.md, "Run origins"): a loopback TCP port the
//       program listens on, or a unix socket it creates (absolute path). A
//       name is 1-15 of [a-z0-9], starting with a letter ("p8888" for a bare
//       port); the first entry is the run's main port. A loopback port is
//       reachable by every local user, not only through the proxy, unless
//       the run's network is isolated (below)
//   network: host | isolated  host (the default): the machine's network;
//       isolated: a network namespace of the run's own with only loopback,
//       so its ports are reached through the daemon's proxy alone and the
//       run has no network beyond its own loopback (no downloads). Needs a
//       daemon running as root (capability isolated_network)
//   kernels: [python, r]  (notebook only) the Jupyter kernels the notebook
//       offers; default [python]. r needs IRkernel (r-cran-irkernel)
//   idle: duration | 0  (notebook only) stop the notebook after this long
//       idle (docs/notebooks.md, "Idle stop"); 0 = never; absent = the
//       daemon's default (config.yaml notebooks.idle)
//   workspace: git URL | /abs/path | {git: URL, ref: REF, readonly: bool} |
//       {dir: /abs/path, readonly: bool}  where the code comes from
//       (workspace_spec.h, docs/workspaces.md); with one, a relative workdir
//       is taken inside the workspace
//   pool: name  where the run executes: a cluster pool of the daemon's
//       config (config.yaml `pools:`, docs/slurm.md), or `local` for this
//       machine; absent = the daemon's default pool (this machine unless
//       config.yaml sets `default_pool`). A pool name is 1-32 of [a-z0-9-],
//       starting with a letter
//   profile: name  a resource profile of the daemon's config (config.yaml
//       `profiles:`, docs/cli.md "Resource profiles"): the daemon fills
//       every field the profile sets (gpus, gpu_type, cpus, memory, shm, pool,
//       partition, nodes) that the spec leaves out; what the spec sets wins.
//       A profile's name is 1-32 of [a-z0-9-], starting with a letter
//   gpu_type: string  only GPUs whose name holds it (case-insensitive: A100
//       matches "NVIDIA A100-SXM4-80GB") on this machine; on a Slurm pool,
//       the GRES type (--gres=gpu:TYPE:N). 1-64 of letters, digits, _ - .
//   project: name  the project the run belongs to (`lathe project`,
//       docs/sharing.md): the submitter must own it or be a member with role
//       use or manage; its members reach the run as their role there says.
//   partition: name  (Slurm pools) the partition for this run instead of the
//       pool's; a Slurm name (1-64 of letters, digits, _ - .); ignored here
//   nodes: int >= 1  how many nodes one attempt spans (default 1); more than
//       one only on a pool whose backend runs one attempt on several nodes
//       (a Slurm pool); `gpus` is per node, so the run has gpus * nodes
//   torchrun: bool  the command is torchrun's script and its arguments:
//       Lathe starts one `torchrun` per node (`lathe __torchrun`,
//       exec/torchrun.h) with --nproc_per_node = gpus (1 without GPUs),
//       --nnodes = nodes and a c10d rendezvous on the first node
//   nccl: {ib: bool, socket_ifname: name}  NCCL's network: ib false sets
//       NCCL_IB_DISABLE=1 (true: 0); socket_ifname (1-64 of letters, digits,
//       . _ -) sets NCCL_SOCKET_IFNAME; absent: NCCL's own choice
//   deployment: {name, version, socket}  (service only, and only the
//       daemon's deployments make one: a replica of deployment `name`
//       serving `version` on the unix socket `socket`; docs/deployments.md)
// Unknown fields, bad units and a missing command are rejected with the
// field named (catalog ids spec.*).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/run/state.h"
#include "lathe/run/workspace_spec.h"

namespace lathe::run {

// Ordered: a higher priority may preempt a lower one (sched/ compares them as ints).
enum class Priority : int { kLow = 0, kNormal = 1, kHigh = 2 };
std::string_view PriorityName(Priority p);

// The run's network (see `network` above).
enum class Network { kHost, kIsolated };
std::string_view NetworkName(Network n);

// A port the run serves on (see `ports` above): exactly one of port/socket.
struct PortSpec {
  std::string name;
  int port = 0;        // 1-65535 on 127.0.0.1
  std::string socket;  // absolute path of a unix socket

  friend bool operator==(const PortSpec&, const PortSpec&) = default;
};
inline constexpr size_t kMaxPortsPerRun = 8;
// A port's name: 1-15 of [a-z0-9], starting with a letter (a DNS label's part).
bool ValidPortName(std::string_view name);

struct RunSpec {
  RunKind type = RunKind::kJob;      // "type:" in JSON/YAML, checked at parse time
  std::string name;                  // empty: the daemon uses the id
  std::vector<std::string> command;  // argv; argv[0] is looked up in PATH
  int gpus = 0;
  double cpus = 0;            // 0 = no CPU limit
  uint64_t memory_bytes = 0;  // 0 = no memory limit
  uint64_t shm_bytes = 0;     // 0 = the host's /dev/shm
  Priority priority = Priority::kNormal;
  std::map<std::string, std::string> env;
  std::string workdir;  // absolute, or relative inside the workspace; empty = the user's home (or
                        // the workspace)
  int retry = 0;        // restarts after a failure
  int64_t max_duration_ms = 0;  // 0 = unlimited
  bool requeue = true;
  bool preemptible = true;
  std::string checkpoint_dir;        // absolute; empty = no checkpoint capture
  int keep_checkpoints = 0;          // 0 = keep every snapshot
  std::string resume_from;           // a run reference (the daemon stores its id)
  unsigned umask = 022;              // the run's umask (never the daemon's)
  std::vector<std::string> secrets;  // names, never values (daemon/secrets.h)
  std::vector<PortSpec> ports;       // what the run serves; the first is its main port
  Network network = Network::kHost;
  // Names of the secrets given as files (secret_files), never values.
  std::vector<std::string> secret_files;
  // type notebook: its kernels ("python", "r") and idle limit (-1: the
  // daemon's default, 0: never).
  std::vector<std::string> kernels;
  int64_t idle_ms = -1;
  WorkspaceSpec workspace;  // empty: none (workdir as it is)
  // A pool of the daemon's config; "" as given: the default pool. The daemon
  // stores where the run goes: the pool's name, or "" for this machine.
  std::string pool;
  // The project the run belongs to ("" = none): its members reach it as
  // their role there says (daemon/sharing.h).
  std::string project;
  // The resource profile the spec named ("" = none); the daemon has applied
  // it, so the fields below hold what it resolved to.
  std::string profile;
  std::string gpu_type;            // "" = any GPU
  std::string partition;           // "" = the pool's partition
  int nodes = 1;                   // nodes per attempt; gpus is per node
  bool torchrun = false;           // command is torchrun's script and arguments
  std::optional<bool> nccl_ib;     // unset: NCCL decides
  std::string nccl_socket_ifname;  // "" = NCCL decides
  // type service: the deployment this run is a replica of (see above).
  std::string deployment;
  std::string deployment_version;
  std::string deployment_socket;
  // The container image the command runs in ("" = the host): a name of the
  // user's images (`lathe image ls`), or NAME@sha256:HEX. The daemon
  // resolves it at submission and records the image's id (64 hex digits)
  // in image_id, so every attempt, a resume and `lathe run --like` run the
  // same bytes whatever the name points at later.
  std::string image;
  std::string image_id;
  // A secret of the user's holding "user:password" for the registry of an
  // `image` the daemon pulls while the run is queued (a reference with its
  // registry that the user does not have yet).
  std::string image_secret;

  friend bool operator==(const RunSpec&, const RunSpec&) = default;
};

inline constexpr size_t kMaxSecretsPerRun = 64;
// This machine's pool, as a spec or `lathe run --pool` may name it.
inline constexpr std::string_view kLocalPool = "local";
// A pool's name: 1-32 of [a-z0-9-], starting with a letter.
bool ValidPoolName(std::string_view name);
// An image reference (spec `image`): 1-255 of letters, digits and . _ - / : @,
// starting with a letter or digit.
bool ValidImageRef(std::string_view ref);
// An image's id: 64 lowercase hex digits (a sha256), optionally after "sha256:".
bool ValidImageId(std::string_view id);
// A profile's name (spec `profile`, config.yaml `profiles:`): as a pool's.
bool ValidProfileName(std::string_view name);
// A GPU type or a Slurm partition: 1-64 of letters, digits, '_', '-', '.'
// (what Slurm's own names use; nothing a command line could misread).
bool ValidSlurmName(std::string_view v);
// A network interface's name (spec nccl.socket_ifname): 1-64 of letters,
// digits, '.', '_', '-'.
bool ValidIfname(std::string_view v);
// The largest spec nodes.
inline constexpr int kMaxNodes = 1024;
// NCCL_IB_DISABLE / NCCL_SOCKET_IFNAME from spec.nccl (none when unset).
std::map<std::string, std::string> NcclEnv(const RunSpec& s);
// The kernels a notebook may offer (spec kernels).
inline constexpr std::string_view kNotebookKernels[] = {"python", "r"};
bool IsNotebookSpec(const RunSpec& s);  // type notebook
bool IsServiceSpec(const RunSpec& s);   // type service (a deployment's replica)

inline constexpr size_t kMaxSecretNameBytes = 128;

// Every secret the run names: secrets, then secret_files (each name once).
std::vector<std::string> SecretNames(const RunSpec& spec);

// An environment variable's name: letters, digits and '_', not starting
// with a digit.
bool ValidEnvName(std::string_view name);
// A secret's name: an environment variable's name of at most
// kMaxSecretNameBytes, not starting with LATHE_ (the daemon's own variables).
bool ValidSecretName(std::string_view name);

// The largest spec file `lathe run -f` reads (spec.file_too_large beyond).
inline constexpr size_t kMaxSpecFileBytes = 1u << 20;

// Parses and validates a spec object. Strict: unknown fields are errors.
// Every string that reaches the kernel (command arguments, env names and
// values, paths) is refused with its field named when it holds a NUL byte
// ("command[1]", "env.FOO"); paths must fit PATH_MAX and NAME_MAX.
Result<RunSpec> SpecFromJson(const Json& j);

// ParseJson for a spec body: a number beyond a double's range (1e400) gets
// its field's own error ("field 'gpus' must be a whole number from 0 to
// 1024, got '1e400'") where the field has one.
Result<Json> ParseSpecJson(std::string_view text);
// The canonical JSON form: sizes as integers of bytes, max_duration as a
// duration string ("12h"), priority by name. SpecFromJson(SpecToJson(s))
// gives back `s`.
Json SpecToJson(const RunSpec& s);

// Converts a YAML spec file to the JSON object SpecFromJson takes, keeping
// values as written (units are parsed later). `file` names it in errors.
// Refused: more than kMaxSpecFileBytes, a key given twice, and aliases that
// expand beyond YamlLimits' defaults (see common/yaml_json.h).
Result<Json> YamlSpecToJson(std::string_view yaml, std::string_view file);

}  // namespace lathe::run
