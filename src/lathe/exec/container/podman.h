// How a run in a container image is run with podman: the command lines and
// environment, as pure functions of what the local backend resolved, so
// that they are tested without podman (podman_test.cc) and read in one place.
//
// The arrangement (docs/environments.md, "Identity and safety"):
//   - root podman (rootless podman cannot set the run's cgroup limits here),
//     its store under the daemon's home (PodmanSetup), overlay storage;
//   - the program runs as the run's uid, gid and groups (--user, --group-add),
//     never as root: no user namespace is needed for the files it writes to
//     belong to the user; no-new-privileges defeats a set-user-ID file in the
//     image, and every capability is dropped;
//   - mounts are the user's directories, opened as the user and bound onto
//     root's staging directories by the monitor (attempt_records.h
//     ContainerMount), with nosuid and nodev; they appear at the same paths
//     as outside;
//   - the host's network (a run's ports work as outside; an isolated run's
//     namespace is the monitor's, which podman inherits), --init so that
//     SIGTERM reaches the program as it does outside;
//   - the container in a cgroup below the attempt's (--cgroup-parent), so the
//     attempt's limits hold it;
//   - the run's environment in a root-only file (--env-file): podman's own
//     environment is podman's alone, so nothing a user sets (LD_PRELOAD,
//     CONTAINER_HOST) reaches a root process.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/exec/attempt_records.h"
#include "lathe/exec/backend.h"
#include "lathe/os/process.h"

namespace lathe::exec {

// Where podman keeps images, containers and its temporary files: `dir` is
// <daemon home>/images, on the daemon's local disk (never $HOME, /tmp or
// NFS), shared by every user: one copy of each layer.
struct PodmanSetup {
  std::string podman = "/usr/bin/podman";
  std::string dir;
  std::string GraphRoot() const { return dir + "/graph"; }
  std::string RunRoot() const { return dir + "/run"; }
  std::string TmpDir() const { return dir + "/tmp"; }
  std::string ConfPath() const { return dir + "/containers.conf"; }
  std::string StorageConfPath() const { return dir + "/storage.conf"; }
  std::string LibpodTmpDir() const { return dir + "/libpod"; }
};

// The containers.conf Lathe's podman reads (CONTAINERS_CONF): explicit
// ulimits, the caller's own (podman 4.3 here fails with "error setting
// rlimit" without them, and a limit above the caller's hard one is refused),
// cgroupfs, events in a file, runc.
// Its libpod tmp_dir is the store's own (`LibpodTmpDir`): podman's default
// (/run/libpod: its "alive" file, the containers' exit files) is shared by
// every podman on the machine, so two stores would disturb each other.
std::string ContainersConf(const PodmanSetup& s, const os::ResourceLimit& open_files,
                           const os::ResourceLimit& processes);
// storage.conf (CONTAINERS_STORAGE_CONF): overlay in the store, and no
// private bind mount of the store on itself (skip_mount_home), which podman
// would otherwise leave in the daemon's mount namespace.
std::string StorageConf(const PodmanSetup& s);
// Makes `dir`'s directories (root's, 0700) and writes containers.conf with
// this process's limits, and storage.conf.
Status PreparePodmanSetup(const PodmanSetup& s);

// `podman --root … --runroot …`: every command starts with it.
std::vector<std::string> PodmanBase(const PodmanSetup& s);
// podman's complete environment: a fixed PATH, CONTAINERS_CONF, TMPDIR and
// HOME in the store; nothing of the daemon's or of a user's.
std::map<std::string, std::string> PodmanEnvironment(const PodmanSetup& s);

// lathe-<run>-<attempt>
std::string ContainerName(const std::string& run_id, int attempt);

// One attempt in an image, resolved by the local backend.
struct ContainerRun {
  std::string run_id;
  int attempt = 0;
  std::string image_id;  // 64 hex digits
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  unsigned umask = 022;
  std::string workdir;   // absolute; inside one of `mounts`
  std::string env_file;  // where ContainerEnvFile's text is written (root's, 0600)
  std::vector<ContainerMount> mounts;
  std::vector<std::string> devices;  // --device values (CDI names or device nodes)
  uint64_t shm_bytes = 0;            // 0: podman's default (64 MB)
  std::string cgroup_parent;         // "" = podman's default
  std::vector<std::string> argv;
};

// `podman … rm --force --ignore --time 0 NAME`: a container gone, whatever
// state it was left in (the monitor's cleanup, the daemon's at recovery).
std::vector<std::string> PodmanRemove(const PodmanSetup& s, const std::string& name);

// The launch the monitor executes: `podman run --rm …` and `podman rm -f`.
ContainerLaunch PodmanRun(const PodmanSetup& s, const ContainerRun& r);

// The run's environment as an --env-file: NAME=VALUE per line. PATH is left
// to the image unless `env` has one the spec set (`keep_path`). A value
// with a line break cannot be written there: InvalidArgument naming it.
Result<std::string> ContainerEnvFile(const std::map<std::string, std::string>& env, bool keep_path);

// A user's own podman, for building images (`lathe image build`,
// daemon/images.h Images::Build). Rootless podman run as the user
// (setpriv), so every step of a Containerfile runs with the user's identity:
// the build's root is the user on the host (a single-id user namespace; no
// subordinate ids needed), the context is read as the user, and a step that
// escaped its container would be the user, never root. Root podman builds
// here would run RUN steps as real root with no user namespace (its
// --userns-uid-map leaves the layers unmapped on this podman), which a
// Containerfile must not get.
// The store is the user's, under <home>/image-builds/<uid>: vfs (an
// unprivileged overlay mount fails on this kernel), ignore_chown_errors (a
// base's files of other owners become the user's), and it keeps the layer
// cache between builds. The daemon moves a built image into the shared store
// (podman save by the user, podman load by root).
struct BuildStore {
  std::string podman = "/usr/bin/podman";
  std::string root;  // <home>/image-builds: the configuration files, root's
  RunUser user;
  std::string Dir() const { return root + "/" + std::to_string(user.uid); }
  std::string GraphRoot() const { return Dir() + "/graph"; }
  std::string RunRoot() const { return Dir() + "/run"; }
  std::string TmpDir() const { return Dir() + "/tmp"; }
  std::string LibpodTmpDir() const { return Dir() + "/libpod"; }
  std::string RuntimeDir() const { return Dir() + "/xdg"; }
  std::string LogDir() const { return Dir() + "/logs"; }
  // The directories the user makes in Dir(), in order.
  std::vector<std::string> UserDirs() const {
    return {GraphRoot(), RunRoot(), TmpDir(), LibpodTmpDir(), RuntimeDir(), LogDir()};
  }
  std::string ConfPath() const { return root + "/containers.conf"; }
  std::string StorageConfPath() const { return root + "/storage.conf"; }
};

// storage.conf of the users' build stores: vfs with ignore_chown_errors.
std::string BuildStorageConf();
// Makes `root` (root's, 0711: each user reaches only their own directory,
// 0700) and writes its containers.conf and storage.conf (0644).
Status PrepareBuildRoot(const std::string& root);
// `setpriv --reuid … -- podman --root … --runroot … --tmpdir … --storage-driver vfs
// --storage-opt vfs.ignore_chown_errors=true`.
std::vector<std::string> BuildPodmanBase(const BuildStore& b);
// The user's podman's complete environment, all of it in their store.
std::map<std::string, std::string> BuildPodmanEnvironment(const BuildStore& b);
// `… build --network host --pull=never --layers --iidfile IIDFILE [-f FILE] DIR`:
// the bases are in the user's store already (the daemon put exactly the
// images the user may use there); the host's network as for runs.
std::vector<std::string> PodmanBuild(const BuildStore& b, const std::string& dir,
                                     const std::string& file, const std::string& iidfile);

// What podman's own exit status means for a container run
// (`podman run` exits with the program's status, 128+N when a signal ended
// it, and 125-127 when it could not start it).
struct PodmanExit {
  std::optional<int> code;
  std::optional<int> signal;
};
PodmanExit DecodePodmanExit(int status);

}  // namespace lathe::exec
