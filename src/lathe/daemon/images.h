// Container images for runs (docs/environments.md): `lathe image
// import|ls|inspect|rm`, and what a spec's `image:` resolves to.
//
// The images are podman's, in one store under the daemon's home
// (<home>/images: exec/container/podman.h), shared by every user, so that an
// image two users hold is stored once. Names and the right to run an image
// are per user (state/image_store.h): a user's `pytorch` never shadows
// another's, and a user runs only ids they imported, pulled or built.
//
// A spec's image is resolved at submission to the image's id, recorded on
// the run (RunSpec::image_id): every attempt, a resume and `lathe run --like`
// run those bytes, wherever the name points later.
//
// What a user names on the machine (the file of `import`) is read with that
// user's identity: `import x /root/secret.tar` by a user is EACCES.
//
// Thread-safe: one mutex around the store; podman's commands run outside it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/daemon/home.h"
#include "lathe/exec/container/podman.h"
#include "lathe/gpu/cdi.h"
#include "lathe/os/clock.h"
#include "lathe/os/users.h"
#include "lathe/state/image_store.h"

namespace lathe::daemon {

// One image as its user sees it.
struct ImageView {
  std::string name;  // the user's name, with its tag ("" for an id without a name)
  std::string id;    // 64 hex digits
  std::string source;
  int64_t created_at_ms = 0;
  int64_t last_used_at_ms = 0;  // the user's last run in it; 0 = never
  uint64_t size_bytes = 0;      // 0 when podman could not say
  std::string digest;  // its manifest's digest, "sha256:…" ("" when podman could not say)
};

// "pytorch" -> "pytorch:latest"; a name with a tag or a digest stays.
std::string NormalizeImageName(const std::string& name);

// The registry a reference names: its first component when that is a host
// ("127.0.0.1:5000" of "127.0.0.1:5000/bb:1", "registry.example.com",
// "localhost"); "" for a bare name ("pytorch", "team/bb": Docker Hub's, or
// the user's own).
std::string RegistryHost(const std::string& ref);

// The podman --device values for a run in an image placed on `gpus`: CDI
// names (nvidia.com/gpu=N) where a CDI spec for NVIDIA GPUs exists and is
// current; else the GPUs' device nodes (/dev/nvidiaN, with nvidiactl and the
// UVM nodes) where the machine has them; else nothing for simulated GPUs.
// FailedPrecondition gpu.cdi_stale for a spec made for another driver, and
// image.no_gpu_devices where neither CDI nor device nodes give real GPUs: a
// run that would silently see no GPU does not start.
Result<std::vector<std::string>> ContainerGpuDevices(const gpu::CdiState& cdi,
                                                     const std::vector<int>& gpus, bool simulated);

class Images {
 public:
  Images(HomePaths paths, os::Clock& clock);

  // Where podman can run images: a root daemon, podman and runc installed.
  // Makes <home>/images and its containers.conf. Nullopt with `note` saying
  // why not.
  // Also prepares <home>/image-builds, where users' builds keep their stores.
  static std::optional<exec::PodmanSetup> Detect(const HomePaths& paths, std::string& note);
  // Set once at daemon start (Detect's answer).
  void SetPodman(std::optional<exec::PodmanSetup> podman, std::string note);
  bool available() const { return podman_.has_value(); }
  // The store at most `max_bytes` (0 = no cap; config.yaml images.max_size):
  // after each import, pull and build, while podman's count of the images'
  // bytes (shared layers once) is above it, the least recently used image
  // (its last run by anyone, else its arrival) that `pinned` (the ids queued
  // and active runs hold) does not name leaves the store, with every user's
  // names for it. The image just added stays. Set at daemon start.
  void SetCap(uint64_t max_bytes, std::function<std::set<std::string>()> pinned);
  // Another cap, from the next import, pull or build on (`lathe reload`).
  void SetMaxBytes(uint64_t max_bytes) { max_bytes_ = max_bytes; }
  uint64_t cap() const { return max_bytes_; }
  // podman's count of the images' bytes in the store; 0 when unknown.
  uint64_t StoreBytes() const;
  const std::string& note() const { return note_; }

  // Imports a root file system's tar (podman import) as `uid`'s `name`,
  // reading `path` as the user. InvalidArgument image.bad_name; the
  // errno's status naming the path (EACCES) when the user cannot read it;
  // FailedPrecondition image.unavailable without podman.
  Result<ImageView> Import(const os::FsIdentity& user, const std::string& name,
                           const std::string& path);
  // Pulls `ref` (HOST[:PORT]/PATH[:TAG] or @sha256:…) from its registry as
  // `uid`'s `name` ("" = the reference itself). `credentials` ("user:password",
  // from the user's secret) go to podman in a root-only auth file for this
  // pull alone, never on a command line. `insecure`: the registry is plain
  // HTTP or has a certificate this machine does not trust. Layers the store
  // has already (another user's pull, another image) are not fetched again.
  // InvalidArgument image.pull_failed with podman's reason (an unknown
  // repository or tag, an unreachable registry, bad credentials).
  // Each line podman prints ("Copying blob sha256:… done") goes to `on_line`
  // as it comes.
  Result<ImageView> Pull(uid_t uid, const std::string& ref, const std::string& name,
                         const std::optional<std::string>& credentials, bool insecure,
                         const std::function<void(std::string_view)>& on_line = {});
  // Builds an image from `dir` as `user`'s `name` (`lathe image build`):
  // podman build run as the user (exec::BuildStore), with `file` (absolute;
  // "" = dir's Containerfile or Dockerfile). The images its FROM lines name
  // are the user's own names, resolved like a run's and put in the user's
  // build store first: another user's `pytorch` is not theirs to build on.
  // Each line of the build's output goes to `on_line` as it comes and to its
  // log, <home>/image-builds/<uid>/logs/NAME.log (the user's, kept).
  // InvalidArgument image.build_failed with the log's path and podman's last
  // line; image.build_bad_from; the errno's status naming the file when the
  // user cannot read it.
  struct BuildRequest {
    std::string name, dir, file;
  };
  Result<ImageView> Build(const os::FsIdentity& user, const BuildRequest& req,
                          const std::function<void(std::string_view)>& on_line);

  Result<std::vector<ImageView>> List(uid_t uid);
  // NotFound image.not_found.
  Result<ImageView> Inspect(uid_t uid, const std::string& name);
  // Removes the user's name; the image itself goes when no name and no
  // grant of anyone's holds it any more.
  Status Remove(uid_t uid, const std::string& name);

  // A spec's image for `uid`: its name (or NAME@sha256:HEX), and the
  // image_id the spec brings (a resubmission: --like, a retry). Returns
  // the id to run. NotFound image.not_found for a name the user does not
  // have; PermissionDenied image.not_granted for an id they may not run.
  Result<std::string> Resolve(uid_t uid, const std::string& image, const std::string& image_id);
  // Removes the names not used for `unused_for_ms` (their image's last run,
  // or their making when never run): `uid`'s, or everyone's with
  // `everyone`. An image a queued or active run holds (`pinned`) keeps its
  // names. Images nobody holds any more leave the store. With `dry_run`,
  // only says what would go.
  struct Pruned {
    uid_t uid = 0;
    std::string name, id;
    int64_t last_used_at_ms = 0;
  };
  Result<std::vector<Pruned>> Prune(uid_t uid, bool everyone, int64_t unused_for_ms,
                                    const std::set<std::string>& pinned, bool dry_run);

  // Empties the build stores (image_build.cc; their layer caches) whose last
  // build is older than `unused_for_ms`: `uid`'s, or everyone's with
  // `everyone`. Each is reset by its user's own podman. The uids whose cache
  // went (or would go, with `dry_run`).
  std::vector<uid_t> PruneBuildCaches(uid_t uid, bool everyone, int64_t unused_for_ms,
                                      bool dry_run);

  // A run of `uid`'s started in `id` (last use, for `image ls` and prune).
  void NoteUse(uid_t uid, const std::string& id);

  // The names of the runs' containers podman holds (lathe-<run>-<attempt>),
  // for the daemon to remove those of attempts no longer active (a kill -9
  // of a monitor and the daemon). Empty without podman, or when the store
  // has no container at all (read from its file: no podman is started).
  std::vector<std::string> ContainerNames() const;
  Status RemoveContainer(const std::string& name) const;

 private:
  Status OpenStore();  // with mu_ held
  std::vector<std::string> Podman(std::initializer_list<std::string> args) const;
  // What the store says of each of `ids` (size, manifest digest), from one
  // `podman image inspect`; an id podman does not know is left out.
  struct Stored {
    uint64_t size_bytes = 0;
    std::string digest;
  };
  std::map<std::string, Stored> StoredOf(const std::vector<std::string>& ids) const;
  // `v` with what `stored` says of its id.
  static void Fill(ImageView& v, const std::map<std::string, Stored>& stored);
  // The cap (SetCap) kept after `added` arrived; the ids removed.
  std::vector<std::string> EnforceCap(const std::string& added);
  // Records `n` (its name and its grant) and answers it as `image ls` shows
  // it; then keeps the cap.
  Result<ImageView> Record(const state::ImageName& n);
  // Removes `uid`'s name, and their grant of its image when no other name of
  // theirs points at it. With mu_ held.
  Status DropName(uid_t uid, const std::string& name, const std::string& id);
  // Where users' build stores live: <home>/image-builds.
  static std::string BuildRoot(const HomePaths& paths) { return paths.home + "/image-builds"; }
  // The user's build store (exec::BuildStore) there.
  exec::BuildStore BuildStoreFor(const os::FsIdentity& user) const;
  // image_build.cc: the user's build store made and ready, with the
  // images `bases` names (the user's names) loaded and tagged as written.
  Status PrepareBuildStore(const exec::BuildStore& b, const os::FsIdentity& user,
                           const std::vector<std::pair<std::string, std::string>>& bases,
                           const std::function<void(std::string_view)>& on_line);
  // Moves `id` from the user's build store into the shared one.
  Status MoveBuilt(const exec::BuildStore& b, const os::FsIdentity& user, const std::string& id);
  // podman rmi of each of `ids` no name and no grant holds; best effort.
  void RemoveUnheld(const std::vector<std::string>& ids);

  const HomePaths paths_;
  os::Clock& clock_;
  std::optional<exec::PodmanSetup> podman_;  // set before any call
  std::atomic<uint64_t> max_bytes_{0};       // SetCap, SetMaxBytes
  std::function<std::set<std::string>()> pinned_;
  std::string note_;
  std::mutex mu_;
  std::unique_ptr<state::ImageStore> store_;  // guarded by mu_; opened at first use
};

}  // namespace lathe::daemon
