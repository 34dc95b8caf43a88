#include "lathe/daemon/images.h"
#include "lathe/daemon/images_internal.h"

#include <fcntl.h>

#include <openssl/evp.h>
#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lathe/common/json.h"
#include "lathe/os/command.h"
#include "lathe/os/fd.h"
#include "lathe/os/files.h"
#include "lathe/os/identity.h"
#include "lathe/os/process.h"
#include "lathe/os/users.h"
#include "lathe/run/spec.h"

namespace lathe::daemon {

// The last "sha256:HEX" or bare 64-hex word of podman's output.
std::optional<std::string> IdIn(const std::string& out) {
  std::optional<std::string> id;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t end = out.find_first_of(" \n\t", pos);
    std::string word = out.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (run::ValidImageId(word)) id = word.substr(word.size() - 64);
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return id;
}

Status CheckImageName(const std::string& name) {
  if (!run::ValidImageRef(name) || name.find('@') != std::string::npos) {
    return Status::Msg(Code::kInvalidArgument, "image.bad_name", {{"name", name}});
  }
  return Status::OK();
}

std::string PodmanReason(const os::CommandOutput& out) {
  return PodmanReasonIn(out.err, out.exit_code);
}

std::string PodmanReasonIn(const std::string& text, int exit_code) {
  std::string err = text;
  while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
  size_t nl = err.rfind('\n');
  std::string last = nl == std::string::npos ? err : err.substr(nl + 1);
  if (last.starts_with("Error: ")) last = last.substr(7);
  return last.empty() ? fmt::format("podman exited with status {}", exit_code) : last;
}

namespace {

constexpr int64_t kPodmanTimeoutMs = 10 * 60 * 1000;  // an import of a big tar

Status NotFound(const std::string& name) {
  return Status::Msg(Code::kNotFound, "image.not_found", {{"name", name}});
}

// podman's auth file for one registry: {"auths": {HOST: {"auth": base64(user:password)}}}.
std::string AuthFile(const std::string& registry, const std::string& credentials) {
  std::string b64(4 * ((credentials.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()),
                          reinterpret_cast<const unsigned char*>(credentials.data()),
                          static_cast<int>(credentials.size()));
  b64.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return Json{{"auths", {{registry, {{"auth", b64}}}}}}.dump();
}

// When `uid` last ran `n`'s image (`grants` are theirs), else when the name was
// made.
int64_t LastUsed(const state::ImageName& n, const std::vector<state::ImageGrant>& grants) {
  int64_t used = n.created_at_ms;
  for (const auto& g : grants) {
    if (g.id == n.id) used = std::max(used, g.last_used_at_ms);
  }
  return used;
}

// The image as its user sees it, without its size.
ImageView ViewOf(const state::ImageName& n, const std::vector<state::ImageGrant>& grants) {
  ImageView v{n.name, n.id, n.source, n.created_at_ms, 0, 0, ""};
  for (const auto& g : grants) {
    if (g.id == n.id) v.last_used_at_ms = g.last_used_at_ms;
  }
  return v;
}

}  // namespace

Result<std::vector<std::string>> ContainerGpuDevices(const gpu::CdiState& cdi,
                                                     const std::vector<int>& gpus, bool simulated) {
  std::vector<std::string> out;
  if (gpus.empty()) return out;
  if (!cdi.specs.empty()) {
    RETURN_IF_ERROR(gpu::CheckCdiCurrent(cdi));
    for (int g : gpus) out.push_back(fmt::format("nvidia.com/gpu={}", g));
    return out;
  }
  for (int g : gpus) {
    const std::string node = fmt::format("/dev/nvidia{}", g);
    if (os::Exists(node)) out.push_back(node);
  }
  if (out.size() == gpus.size()) {
    for (const char* n : {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}) {
      if (os::Exists(n)) out.emplace_back(n);
    }
    return out;
  }
  if (simulated) return std::vector<std::string>{};  // CUDA_VISIBLE_DEVICES alone
  return Status::Msg(Code::kFailedPrecondition, "image.no_gpu_devices",
                     {{"gpus", std::to_string(gpus.size())}});
}

std::string RegistryHost(const std::string& ref) {
  size_t slash = ref.find('/');
  if (slash == std::string::npos) return "";
  std::string first = ref.substr(0, slash);
  if (first.find_first_of(".:") != std::string::npos || first == "localhost") return first;
  return "";
}

std::string NormalizeImageName(const std::string& name) {
  if (name.find('@') != std::string::npos) return name;
  size_t slash = name.rfind('/');
  size_t colon = name.rfind(':');
  if (colon == std::string::npos || (slash != std::string::npos && colon < slash)) {
    return name + ":latest";
  }
  return name;
}

Images::Images(HomePaths paths, os::Clock& clock) : paths_(std::move(paths)), clock_(clock) {}

std::optional<exec::PodmanSetup> Images::Detect(const HomePaths& paths, std::string& note) {
  if (!os::IsRoot()) {
    note = "runs in images need a daemon running as root (podman sets the run's cgroups)";
    return std::nullopt;
  }
  exec::PodmanSetup s;
  s.dir = paths.home + "/images";
  for (const char* bin : {"/usr/bin/podman", "/usr/sbin/runc"}) {
    if (!os::Exists(bin)) {
      note = fmt::format("{} is missing (scripts/deps.sh installs podman and runc)", bin);
      return std::nullopt;
    }
  }
  if (Status st = exec::PreparePodmanSetup(s); !st.ok()) {
    note = "cannot prepare the image store: " + st.ToString();
    return std::nullopt;
  }
  if (Status st = exec::PrepareBuildRoot(BuildRoot(paths)); !st.ok()) {
    note = "cannot prepare the image builds' directory: " + st.ToString();
    return std::nullopt;
  }
  return s;
}

void Images::SetPodman(std::optional<exec::PodmanSetup> podman, std::string note) {
  podman_ = std::move(podman);
  note_ = std::move(note);
}

void Images::SetCap(uint64_t max_bytes, std::function<std::set<std::string>()> pinned) {
  max_bytes_ = max_bytes;
  pinned_ = std::move(pinned);
}

uint64_t Images::StoreBytes() const {
  if (!podman_) return 0;
  // "Images 5992590": the images' total, a layer two images share counted once.
  auto out = os::RunCommandWithEnv(Podman({"system", "df", "--format", "{{.Type}} {{.RawSize}}"}),
                                   exec::PodmanEnvironment(*podman_), 60000);
  if (!out.ok() || out->exit_code != 0) return 0;
  size_t at = out->out.find("Images ");
  if (at == std::string::npos) return 0;
  return std::strtoull(out->out.c_str() + at + 7, nullptr, 10);
}

std::vector<std::string> Images::EnforceCap(const std::string& added) {
  std::vector<std::string> removed;
  const uint64_t cap = max_bytes_;
  if (cap == 0 || !podman_) return removed;
  uint64_t bytes = StoreBytes();
  if (bytes <= cap) return removed;
  const std::set<std::string> pinned = pinned_ ? pinned_() : std::set<std::string>{};
  std::vector<state::ImageGrant> ids;
  {
    std::lock_guard lock(mu_);
    if (!OpenStore().ok()) return removed;
    auto all = store_->AllIds();
    if (!all.ok()) return removed;
    ids = *all;
  }
  // Least recently used first: the last run in it by anyone, else its arrival.
  auto used = [](const state::ImageGrant& g) {
    return std::max(g.last_used_at_ms, g.granted_at_ms);
  };
  std::sort(ids.begin(), ids.end(),
            [&](const auto& a, const auto& b) { return used(a) < used(b); });
  for (const auto& g : ids) {
    if (bytes <= cap) break;
    if (g.id == added || pinned.count(g.id)) continue;
    {
      std::lock_guard lock(mu_);
      if (!store_->Forget(g.id).ok()) continue;
    }
    RemoveUnheld({g.id});
    spdlog::info("image {}: removed from the store to keep it under {} bytes (images.max_size)",
                 g.id.substr(0, 12), cap);
    removed.push_back(g.id);
    bytes = StoreBytes();
  }
  return removed;
}

exec::BuildStore Images::BuildStoreFor(const os::FsIdentity& user) const {
  exec::BuildStore b;
  b.podman = podman_->podman;
  b.root = BuildRoot(paths_);
  b.user = {user.uid, user.gid, user.groups, "", "", ""};
  if (b.user.groups.empty()) b.user.groups.push_back(user.gid);  // setpriv --groups, no lookup
  return b;
}

Status Images::OpenStore() {
  if (store_) return Status::OK();
  ASSIGN_OR_RETURN(store_, state::ImageStore::Open(paths_.db));
  return Status::OK();
}

std::vector<std::string> Images::Podman(std::initializer_list<std::string> args) const {
  std::vector<std::string> argv = exec::PodmanBase(*podman_);
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::map<std::string, Images::Stored> Images::StoredOf(const std::vector<std::string>& ids) const {
  std::map<std::string, Stored> stored;
  if (!podman_ || ids.empty()) return stored;
  std::vector<std::string> argv =
      Podman({"image", "inspect", "--format", "{{.Id}} {{.Size}} {{.Digest}}"});
  argv.insert(argv.end(), ids.begin(), ids.end());
  // An unknown id makes podman exit non-zero after printing the others.
  auto out = os::RunCommandWithEnv(argv, exec::PodmanEnvironment(*podman_), 30000);
  if (!out.ok()) return stored;
  size_t pos = 0;
  while (pos < out->out.size()) {
    size_t nl = out->out.find('\n', pos);
    std::string line = out->out.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    size_t sp = line.find(' ');
    if (sp != std::string::npos) {
      Stored& st = stored[line.substr(0, sp)];
      st.size_bytes = std::strtoull(line.c_str() + sp + 1, nullptr, 10);
      if (size_t sp2 = line.find(' ', sp + 1); sp2 != std::string::npos) {
        st.digest = line.substr(sp2 + 1);
        if (!st.digest.starts_with("sha256:")) st.digest.clear();
      }
    }
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return stored;
}

void Images::Fill(ImageView& v, const std::map<std::string, Stored>& stored) {
  if (auto it = stored.find(v.id); it != stored.end()) {
    v.size_bytes = it->second.size_bytes;
    v.digest = it->second.digest;
  }
}

Result<ImageView> Images::Record(const state::ImageName& n) {
  {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(OpenStore());
    RETURN_IF_ERROR(store_->Put(n, n.created_at_ms).status());
  }
  (void)EnforceCap(n.id);
  ImageView v = ViewOf(n, {});
  Fill(v, StoredOf({n.id}));
  return v;
}

Status Images::DropName(uid_t uid, const std::string& name, const std::string& id) {
  RETURN_IF_ERROR(store_->RemoveName(uid, name).status());
  ASSIGN_OR_RETURN(std::vector<std::string> others, store_->NamesOf(uid, id));
  if (others.empty()) RETURN_IF_ERROR(store_->RevokeGrant(uid, id));
  return Status::OK();
}

Result<ImageView> Images::Import(const os::FsIdentity& user, const std::string& name_in,
                                 const std::string& path) {
  RETURN_IF_ERROR(CheckImageName(name_in));
  if (!podman_)
    return Status::Msg(Code::kFailedPrecondition, "image.unavailable", {{"note", note_}});
  const std::string name = NormalizeImageName(name_in);
  if (path.empty() || path[0] != '/') {
    return Status::Msg(Code::kInvalidArgument, "image.bad_path", {{"path", path}});
  }
  // Opened as the user; podman (root) reads the open file, never the path.
  os::Fd file;
  RETURN_IF_ERROR(os::AsUser(user, [&]() -> Status {
    ASSIGN_OR_RETURN(file, os::Fd::Open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY));
    return Status::OK();
  }));
  const std::string via = fmt::format("/proc/{}/fd/{}", os::SelfPid(), file.get());
  auto out = os::RunCommandWithEnv(Podman({"import", "--quiet", via}),
                                   exec::PodmanEnvironment(*podman_), kPodmanTimeoutMs);
  if (!out.ok()) return out.status();
  std::optional<std::string> id = out->exit_code == 0 ? IdIn(out->out) : std::nullopt;
  if (!id) {
    return Status::Msg(Code::kInvalidArgument, "image.import_failed",
                       {{"path", path}, {"why", PodmanReason(*out)}});
  }
  return Record({user.uid, name, *id, "import " + path, clock_.NowMs()});
}

Result<ImageView> Images::Pull(uid_t uid, const std::string& ref, const std::string& name_in,
                               const std::optional<std::string>& credentials, bool insecure,
                               const std::function<void(std::string_view)>& on_line) {
  RETURN_IF_ERROR(CheckImageName(name_in.empty() ? ref.substr(0, ref.find('@')) : name_in));
  if (!run::ValidImageRef(ref)) {
    return Status::Msg(Code::kInvalidArgument, "image.bad_name", {{"name", ref}});
  }
  if (!podman_)
    return Status::Msg(Code::kFailedPrecondition, "image.unavailable", {{"note", note_}});
  const std::string name =
      NormalizeImageName(name_in.empty() ? ref.substr(0, ref.find('@')) : name_in);
  std::vector<std::string> argv = Podman({"pull"});
  if (insecure) argv.push_back("--tls-verify=false");
  std::string auth;
  if (credentials) {
    auth = fmt::format("{}/auth-{}-{}.json", podman_->TmpDir(), uid, clock_.NowMs());
    const std::string host = RegistryHost(ref);
    RETURN_IF_ERROR(os::WriteFileAtomic(auth,
                                        AuthFile(host.empty() ? "docker.io" : host, *credentials),
                                        0600, os::Durability::kNoSync));
    argv.insert(argv.end(), {"--authfile", auth});
  }
  argv.push_back(ref);
  // Its progress and, last, the image's id, on one stream.
  auto out = os::RunCommandLines(argv, exec::PodmanEnvironment(*podman_), -1, kPodmanTimeoutMs,
                                 4096, [&](std::string_view line) {
                                   if (on_line) on_line(line);
                                 });
  if (!auth.empty()) (void)os::RemoveFile(auth);  // best effort: the store's tmp is root's
  if (!out.ok()) return out.status();
  std::optional<std::string> id = out->exit_code == 0 ? IdIn(out->out) : std::nullopt;
  if (!id) {
    return Status::Msg(Code::kInvalidArgument, "image.pull_failed",
                       {{"ref", ref}, {"why", PodmanReasonIn(out->out, out->exit_code)}});
  }
  return Record({uid, name, *id, "pull " + ref, clock_.NowMs()});
}

Result<std::vector<ImageView>> Images::List(uid_t uid) {
  std::vector<state::ImageName> names;
  std::vector<state::ImageGrant> grants;
  {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(OpenStore());
    ASSIGN_OR_RETURN(names, store_->List(uid));
    ASSIGN_OR_RETURN(grants, store_->Grants(uid));
  }
  std::vector<std::string> ids;
  for (const auto& n : names) ids.push_back(n.id);
  const std::map<std::string, Stored> stored = StoredOf(ids);
  std::vector<ImageView> out;
  for (const auto& n : names) {
    ImageView v = ViewOf(n, grants);
    Fill(v, stored);
    out.push_back(std::move(v));
  }
  return out;
}

Result<ImageView> Images::Inspect(uid_t uid, const std::string& name_in) {
  const std::string name = NormalizeImageName(name_in);
  std::optional<state::ImageName> n;
  std::vector<state::ImageGrant> grants;
  {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(OpenStore());
    ASSIGN_OR_RETURN(n, store_->Find(uid, name));
    ASSIGN_OR_RETURN(grants, store_->Grants(uid));
  }
  if (!n) return NotFound(name_in);
  ImageView v = ViewOf(*n, grants);
  Fill(v, StoredOf({n->id}));
  return v;
}

Status Images::Remove(uid_t uid, const std::string& name_in) {
  const std::string name = NormalizeImageName(name_in);
  std::string id;
  {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(OpenStore());
    ASSIGN_OR_RETURN(std::optional<state::ImageName> n, store_->Find(uid, name));
    if (!n) return NotFound(name_in);
    id = n->id;
    RETURN_IF_ERROR(DropName(uid, name, id));
  }
  RemoveUnheld({id});
  return Status::OK();
}

void Images::RemoveUnheld(const std::vector<std::string>& ids) {
  if (!podman_ || ids.empty()) return;
  std::set<std::string> held;
  {
    std::lock_guard lock(mu_);
    if (!OpenStore().ok()) return;
    auto all = store_->AllIds();
    if (!all.ok()) return;
    for (const auto& g : *all) held.insert(g.id);
  }
  for (const std::string& id : std::set<std::string>(ids.begin(), ids.end())) {
    if (held.count(id)) continue;  // someone holds it (still, or again)
    // Best effort: a container still using it keeps it (podman refuses);
    // a later prune takes it.
    auto out = os::RunCommandWithEnv(Podman({"rmi", id}), exec::PodmanEnvironment(*podman_), 60000);
    if (!out.ok() || out->exit_code != 0) {
      spdlog::info("image {}: kept in the store for now: {}", id.substr(0, 12),
                   out.ok() ? PodmanReason(*out) : out.status().ToString());
    }
  }
}

Result<std::vector<Images::Pruned>> Images::Prune(uid_t uid, bool everyone, int64_t unused_for_ms,
                                                  const std::set<std::string>& pinned,
                                                  bool dry_run) {
  std::vector<Pruned> gone;
  std::vector<std::string> ids;
  {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(OpenStore());
    std::vector<state::ImageName> names;
    if (everyone) {
      ASSIGN_OR_RETURN(names, store_->ListAll());
    } else {
      ASSIGN_OR_RETURN(names, store_->List(uid));
    }
    const int64_t now = clock_.NowMs();
    std::map<uid_t, std::vector<state::ImageGrant>> grants;
    for (const auto& n : names) {
      if (!grants.count(n.uid)) {
        ASSIGN_OR_RETURN(grants[n.uid], store_->Grants(n.uid));
      }
      const int64_t used = LastUsed(n, grants[n.uid]);
      if (pinned.count(n.id) || now - used < unused_for_ms) continue;
      gone.push_back({n.uid, n.name, n.id, used});
    }
    if (dry_run) return gone;
    for (const auto& p : gone) {
      RETURN_IF_ERROR(DropName(p.uid, p.name, p.id));
      ids.push_back(p.id);
    }
  }
  RemoveUnheld(ids);
  return gone;
}

Result<std::string> Images::Resolve(uid_t uid, const std::string& image,
                                    const std::string& image_id) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(OpenStore());
  std::string id = image_id;
  if (size_t at = image.find('@'); id.empty() && at != std::string::npos) {
    std::string digest = image.substr(at + 1);
    if (!run::ValidImageId(digest)) {
      return Status::Msg(Code::kInvalidArgument, "spec.bad_image", {{"value", image}});
    }
    id = digest.substr(digest.size() - 64);
  }
  if (id.empty()) {
    ASSIGN_OR_RETURN(std::optional<state::ImageName> n,
                     store_->Find(uid, NormalizeImageName(image)));
    if (!n) return NotFound(image);
    return n->id;
  }
  ASSIGN_OR_RETURN(bool granted, store_->HasGrant(uid, id));
  if (!granted) {
    return Status::Msg(Code::kPermissionDenied, "image.not_granted",
                       {{"image", image.empty() ? id.substr(0, 12) : image}});
  }
  return id;
}

void Images::NoteUse(uid_t uid, const std::string& id) {
  std::lock_guard lock(mu_);
  Status st = OpenStore();
  if (st.ok()) st = store_->TouchGrant(uid, id, clock_.NowMs());
  if (!st.ok())
    spdlog::warn("image {}: last use not recorded: {}", id.substr(0, 12), st.ToString());
}

std::vector<std::string> Images::ContainerNames() const {
  if (!podman_) return {};
  // containers.json lists every container podman's storage holds; "[]" or
  // no file: nothing to ask podman about.
  auto listed = os::ReadFile(podman_->GraphRoot() + "/overlay-containers/containers.json");
  if (!listed.ok() || listed->find("lathe-") == std::string::npos) return {};
  auto out = os::RunCommandWithEnv(
      Podman({"ps", "--all", "--filter", "label=lathe.run", "--format", "{{.Names}}"}),
      exec::PodmanEnvironment(*podman_), 60000);
  if (!out.ok() || out->exit_code != 0) {
    spdlog::warn("images: cannot list the runs' containers: {}",
                 out.ok() ? PodmanReason(*out) : out.status().ToString());
    return {};
  }
  std::vector<std::string> names;
  size_t pos = 0;
  while (pos < out->out.size()) {
    size_t nl = out->out.find('\n', pos);
    std::string name = out->out.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    if (name.starts_with("lathe-")) names.push_back(name);
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return names;
}

Status Images::RemoveContainer(const std::string& name) const {
  if (!podman_) return Status::OK();
  auto out = os::RunCommandWithEnv(exec::PodmanRemove(*podman_, name),
                                   exec::PodmanEnvironment(*podman_), 60000);
  if (!out.ok()) return out.status();
  if (out->exit_code != 0) return Status::Internal(PodmanReason(*out));
  return Status::OK();
}

}  // namespace lathe::daemon
