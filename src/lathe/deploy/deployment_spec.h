// What a deployment asks for (`lathe deploy create`, POST
// /api/v1/deployments, a deploy.yaml), validated with each field named:
//
//   name: digits                 unique across users (ids.h IsValidName)
//   model: digits@prod | digits/3  the version to serve; an alias is
//                                followed: moving it rolls the deployment out
//   replicas: 2                  fixed count, 1-64 (default 1), or
//   autoscale: {min: 0, max: 4, target: 2, upscale_delay: 30s,
//               downscale_delay: 10m, zero_grace: 30s}
//   gpus, gpu_type, cpus, memory, priority, preemptible   each replica's, as
//                                a run's (spec.h)
//   profile: small               a resource profile of the daemon's config
//                                (run/profile.h): its gpus, gpu_type, cpus
//                                and memory where the deployment leaves them
//                                out (TakeProfileFields); stored with the
//                                fields as resolved
//   public: false                callable without a deployment key
//   canary: 10                   percent of traffic a rollout keeps on the
//                                new version until `lathe deploy promote`
//   batching: {max_batch_size: 8, max_queue_delay: 2ms}  each replica's
//                                dynamic batching (max_batch_size 1-4096,
//                                max_queue_delay 0-10s; a model deployment's)
//   ready_timeout: 5m            a new version's replica not ready by then
//                                is rolled back
//   device: cuda:0 | cpu         where each replica runs the model (a model
//                                deployment's): cuda:N is the replica's own
//                                N-th GPU (0..gpus-1, as CUDA_VISIBLE_DEVICES
//                                numbers them); absent: the version's own
//                                config decides (lathe serve's default)
// A command deployment names, instead of model (exactly one of the two):
//   command: [vllm, serve, ...]  what each replica runs; it listens on TCP
//                                127.0.0.1:$PORT (docs/deployments.md)
//   port: 8000                   the port it is declared to listen on, 1-65535
//                                (required); $PORT is this one where the run's
//                                network is isolated, else a free loopback port
//   ready: /health               the path whose 200 makes a replica ready
//                                (default /)
//   env: {NAME: value}, workdir: /abs   the program's, as a run's (spec.h)
//   image: NAME                  one of the owner's images: each replica runs
//                                the command in it (docs/environments.md),
//                                its relay beside the container
//   image_id: HEX                the daemon's: the image's id, resolved when
//                                the image is named, so that every replica of
//                                a revision runs the same bytes
//   revision: 3                  the daemon's: the command's revision, 1 at
//                                create, one more whenever command, port, env,
//                                workdir or image change; the version is "rev-3" (no space: it
//                                is a header value and a routes.json key)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/run/spec.h"

namespace lathe::deploy {

inline constexpr int kMaxReplicas = 64;

struct DeploymentSpec {
  std::string name;
  std::string model;  // a model ref (models.h): NAME/N or NAME@ALIAS
  // A command deployment (model empty): see above.
  std::vector<std::string> command;
  int port = 0;
  std::string ready = "/";
  std::map<std::string, std::string> env;
  std::string workdir;
  std::string image, image_id;  // "": on the host
  int revision = 0;
  int min_replicas = 1;
  int max_replicas = 1;  // == min: fixed
  double target_ongoing = 2;
  int64_t upscale_delay_ms = 30'000;
  int64_t downscale_delay_ms = 600'000;
  int64_t zero_grace_ms = 30'000;
  int64_t ready_timeout_ms = 300'000;
  int canary_percent = 0;
  bool is_public = false;
  // The project it belongs to ("" = none): its members reach it as their
  // role there says (daemon/sharing.h).
  std::string project;
  // Each replica's resources and priority (only these fields are used).
  run::RunSpec resources;

  bool autoscaled() const { return min_replicas != max_replicas; }
  // batching: {max_batch_size: 8, max_queue_delay: 2ms} (a model
  // deployment's): each replica batches up to max_batch_size requests,
  // waiting at most max_queue_delay for a fuller batch. 0: the version's own
  // config.yaml decides.
  int max_batch_size = 0;
  int64_t max_queue_delay_us = 0;
  std::string device;        // "", "cpu" or "cuda:N"
  int device_index() const;  // cuda:N -> N; -1 otherwise

  bool is_command() const { return !command.empty(); }
  // A command deployment's version: "rev-N".
  std::string revision_version() const { return "rev-" + std::to_string(revision); }
};

// Strict: unknown fields and out-of-range values are InvalidArgument naming
// the field (spec.wrong_type, deploy.bad_*), in both languages.
Result<DeploymentSpec> DeploymentSpecFromJson(const Json& j);
// The canonical form; DeploymentSpecFromJson(DeploymentSpecToJson(s)) == s.
Json DeploymentSpecToJson(const DeploymentSpec& s);
// A deployment's JSON resolved against its profile (run::ResolveProfile,
// which filled the fields `filled`), keeping what a replica takes of it:
// gpus, gpu_type, cpus and memory. Its shm and partition are left out (a
// replica has no /dev/shm of its own; a partition is a Slurm pool's), as are
// `pool: local` and `nodes: 1`; another pool, or more nodes, is
// profile.not_for_deployment naming the profile and the field: replicas run
// on this machine, one node each.
Result<Json> TakeProfileFields(Json resolved, const std::vector<std::string>& filled);

// Whether this machine, with `machine_gpus` GPUs, can ever give each replica
// the cuda device it names: cuda:N needs gpus ≥ N+1 per replica (the
// replica sees only its own) and a machine with N+1 GPUs. InvalidArgument
// naming the field `device` (deploy.device_needs_gpu when the replicas get no
// GPU, deploy.device_no_gpu otherwise), in both languages. OK without a
// cuda device.
Status CheckDevice(const DeploymentSpec& s, int machine_gpus);

// What makes a command deployment's revision (command, port, env, workdir, image)
// as JSON: stored per revision, so that a replica of an older one (during a
// rollout, after a rollback) starts with what it was started with.
Json RevisionToJson(const DeploymentSpec& s);
// The inverse onto `s` (its command, port, env, workdir, image); InvalidArgument for
// a malformed record.
Status RevisionFromJson(const Json& j, DeploymentSpec& s);

}  // namespace lathe::deploy
