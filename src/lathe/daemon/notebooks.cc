#include "lathe/daemon/notebooks.h"

#include <sys/stat.h>

#include <fmt/format.h>

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
  q.argv = {self_exe,    "__notebook", "--state", dir, "--socket", NotebookSocket(run_dir),
            "--kernels", kernels};
  q.env["JUPYTER_TOKEN"] = token;  // moved into a file by the prelude
  q.env["LATHE_NOTEBOOK_DIR"] = dir;
  q.ports.insert(q.ports.begin(), run::PortSpec{kNotebookPort, 0, NotebookSocket(run_dir)});
}

}  // namespace lathe::daemon
