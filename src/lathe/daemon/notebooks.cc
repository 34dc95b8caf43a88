#include "lathe/daemon/notebooks.h"

#include <sys/stat.h>

#include <algorithm>

#include <fmt/format.h>

#include "lathe/common/i18n.h"
#include "lathe/common/ids.h"
#include "lathe/exec/local_backend.h"
#include "lathe/os/files.h"
#include "lathe/run/notebook_prelude.h"

namespace lathe::daemon {
namespace {

// The PATH the run's program gets (the local backend's default unless the
// spec sets one; exec/local_backend.cc).
std::string RunPath(const run::RunSpec& spec) {
  auto it = spec.env.find("PATH");
  return it != spec.env.end() ? it->second : std::string(exec::kDefaultRunPath);
}

// The first command of a notebook in an image, run by the image's /bin/sh as
// the run's user: Jupyter is the image's own, looked for on the image's
// PATH ($1 the socket, $2 "r" when the R kernel is asked for, $3-$6 the two
// messages in both languages). `lathe __notebook --image-setup` prepared
// its directories, token and config on the host before the container
// started. A script, not Lathe's prelude: Lathe's binary is not in the image.
constexpr char kInImageScript[] = R"sh(sock=$1
say() { printf 'lathe: %s\nlathe: %s\n' "$1" "$2" >&2; }
if [ -n "$2" ] && ! R --slave -e "quit(status = if (requireNamespace('IRkernel', quietly = TRUE)) 0 else 1)" >/dev/null 2>&1; then
  say "$5" "$6"; exit 127
fi
for j in jupyter-lab jupyter-notebook jupyter-server; do
  if command -v "$j" >/dev/null 2>&1; then
    echo "lathe: starting the image's $j on $sock" >&2
    exec "$j"
  fi
done
say "$3" "$4"
exit 127
)sh";

std::string Text(const char* id, const std::string& image, Lang lang) {
  return Localize(Status::Msg(Code::kFailedPrecondition, id, {{"image", image}}), lang);
}

// A notebook in an image: the host half of the prelude as the setup step
// (as the user, on the host: the directories, the token's file, the
// kernels, both Jupyter configs), then the image's Jupyter. The token
// reaches the setup step alone; the container gets its file's name.
void ApplyNotebookInImage(const std::string& run_dir, const run::RunSpec& spec,
                          const std::string& self_exe, const std::string& kernels,
                          exec::LaunchRequest& q) {
  const std::string dir = NotebookDir(run_dir);
  q.setup_argv = {self_exe,    "__notebook", "--state",
                  dir,         "--socket",   NotebookSocket(run_dir),
                  "--kernels", kernels,      "--image-setup"};
  q.setup_env_only.push_back("JUPYTER_TOKEN");
  q.env["JUPYTER_TOKEN_FILE"] = dir + "/token";
  q.env["JUPYTER_CONFIG_DIR"] = dir + "/config";
  q.env["JUPYTER_DATA_DIR"] = dir + "/data";
  q.env["JUPYTER_RUNTIME_DIR"] = dir + "/runtime";
  q.env["IPYTHONDIR"] = dir + "/ipython";
  const bool r = std::find(spec.kernels.begin(), spec.kernels.end(), "r") != spec.kernels.end();
  q.argv = {"/bin/sh",
            "-c",
            kInImageScript,
            "lathe-notebook",
            NotebookSocket(run_dir),
            r ? "r" : "",
            Text("notebook.image_no_jupyter", spec.image, Lang::kEn),
            Text("notebook.image_no_jupyter", spec.image, Lang::kZh),
            Text("notebook.image_no_irkernel", spec.image, Lang::kEn),
            Text("notebook.image_no_irkernel", spec.image, Lang::kZh)};
}

}  // namespace

std::string NotebookDir(const std::string& run_dir) { return run_dir + "/notebook"; }
std::string NotebookSocket(const std::string& run_dir) {
  return NotebookDir(run_dir) + "/jupyter.sock";
}
std::string NotebookTokenPath(const std::string& run_dir) { return run_dir + "/notebook.token"; }

Result<std::string> NotebookToken(const std::string& run_dir) {
  const std::string path = NotebookTokenPath(run_dir);
  auto held = os::ReadFileUpTo(path, 256);
  if (held.ok() && held->size() == 64) return *held;
  if (!held.ok() && !held.status().IsNotFound()) return held.status();
  std::string token = NewSecret();
  RETURN_IF_ERROR(os::WriteFileAtomic(path, token, 0600));
  return token;
}

Status PrepareNotebookDir(const std::string& run_dir, uid_t uid, gid_t gid) {
  const std::string dir = NotebookDir(run_dir);
  auto stamp = os::LstatFile(dir);
  if (stamp.ok() && S_ISDIR(stamp->mode)) return Status::OK();
  if (stamp.ok()) RETURN_IF_ERROR(os::RemoveFile(dir));
  Status st = os::WritePrivateDir(dir, {}, uid, gid);
  if (!st.ok()) return Status(st.code(), "cannot make the notebook's directory: " + st.message());
  return Status::OK();
}

Status CheckNotebookSubmittable(const run::RunSpec& spec) {
  // In an image, Jupyter is looked for there when the notebook starts.
  if (!spec.image.empty() || !spec.image_id.empty()) return Status::OK();
  const std::string path = RunPath(spec);
  if (run::FindJupyter(path).empty()) {
    return Status::Msg(Code::kFailedPrecondition, "notebook.no_jupyter", {{"path", path}});
  }
  for (const auto& k : spec.kernels) {
    if (k == "r" && run::FindOnPath("R", path).empty()) {
      return Status::Msg(Code::kFailedPrecondition, "notebook.no_irkernel");
    }
  }
  return Status::OK();
}

std::vector<run::PortSpec> ServedPorts(const state::RunRecord& r) {
  std::vector<run::PortSpec> out;
  if (r.kind == run::RunKind::kNotebook) {
    out.push_back(run::PortSpec{kNotebookPort, 0, NotebookSocket(r.run_dir)});
  }
  out.insert(out.end(), r.spec.ports.begin(), r.spec.ports.end());
  return out;
}

void ApplyNotebook(const std::string& run_dir, const run::RunSpec& spec,
                   const std::string& self_exe, const std::string& token, exec::LaunchRequest& q) {
  const std::string dir = NotebookDir(run_dir);
  std::string kernels;
  for (const auto& k : spec.kernels) kernels += (kernels.empty() ? "" : ",") + k;
  q.env["JUPYTER_TOKEN"] = token;  // moved into a file by the prelude
  q.env["LATHE_NOTEBOOK_DIR"] = dir;
  q.ports.insert(q.ports.begin(), run::PortSpec{kNotebookPort, 0, NotebookSocket(run_dir)});
  if (!spec.image_id.empty()) {
    ApplyNotebookInImage(run_dir, spec, self_exe, kernels, q);
    return;
  }
  q.argv = {self_exe,    "__notebook", "--state", dir, "--socket", NotebookSocket(run_dir),
            "--kernels", kernels};
}

}  // namespace lathe::daemon
