#include "lathe/run/notebook_prelude.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "lathe/common/i18n.h"
#include "lathe/common/split.h"
#include "lathe/common/status.h"
#include "lathe/os/command.h"
#include "lathe/os/files.h"
#include "lathe/os/identity.h"
#include "lathe/os/process.h"

namespace lathe::run {
namespace {

// Both languages: nobody knows yet who reads the run's log.
void Say(const Status& s) {
  if (s.msg_id().empty()) {
    std::fprintf(stderr, "lathe: %s\n", s.ToString().c_str());
    return;
  }
  std::fprintf(stderr, "lathe: %s\nlathe: %s\n", Localize(s, Lang::kEn).c_str(),
               Localize(s, Lang::kZh).c_str());
}

std::string Basename(const std::string& path) { return path.substr(path.rfind('/') + 1); }

struct Args {
  std::string state, socket;
  std::vector<std::string> kernels;
  bool image_setup = false;       // --image-setup: prepare only (the notebook is in an image)
  std::vector<std::string> then;  // after `--`: what the setup step execs next
};

bool ParseArgs(const std::vector<std::string>& args, Args& out) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      out.then.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      return out.image_setup && !out.state.empty() && !out.socket.empty() && !out.then.empty();
    }
    if (args[i] == "--image-setup") {
      out.image_setup = true;
      continue;
    }
    if (i + 1 >= args.size()) return false;
    const std::string& v = args[++i];
    if (args[i - 1] == "--state") {
      out.state = v;
    } else if (args[i - 1] == "--socket") {
      out.socket = v;
    } else if (args[i - 1] == "--kernels") {
      out.kernels = SplitNonEmpty(v, ',');
    } else {
      return false;
    }
  }
  return !out.state.empty() && !out.socket.empty();
}

// IRkernel is an R package: R answers whether it is installed.
bool HaveIrkernel(const std::string& path) {
  if (FindOnPath("R", path).empty()) return false;
  auto r =
      os::RunCommand({"R", "--slave", "-e",
                      "quit(status = if (requireNamespace('IRkernel', quietly = TRUE)) 0 else 1)"},
                     60000);
  return r.ok() && r->exit_code == 0;
}

// The r kernel's spec, in the notebook's own data directory.
Status WriteIrKernelSpec(const std::string& data_dir) {
  const std::string dir = data_dir + "/kernels/ir";
  RETURN_IF_ERROR(os::MakeDirs(dir, 0700));
  Json spec = {{"argv", {"R", "--slave", "-e", "IRkernel::main()", "--args", "{connection_file}"}},
               {"display_name", "R"},
               {"language", "R"}};
  return os::WriteFileAtomic(dir + "/kernel.json", spec.dump(2), 0600);
}

// What IPython reads as a kernel starts, in the notebook's IPYTHONDIR.
Status WriteIpythonKernelConfig(const std::string& ipython_dir) {
  const std::string dir = ipython_dir + "/profile_default";
  RETURN_IF_ERROR(os::MakeDirs(dir, 0700));
  return os::WriteFileAtomic(dir + "/ipython_kernel_config.py", kIpythonKernelConfig, 0600);
}

// Step 4: the kernels' specs, in Jupyter's terms; an exit code on failure.
int RegisterKernels(const Args& a, const std::string& path, std::vector<std::string>& specs) {
  for (const auto& k : a.kernels) {
    Status st;
    if (k == "python") {
      st = WriteIpythonKernelConfig(a.state + "/ipython");
      specs.push_back("python3");
    } else if (k == "r") {
      // In an image, R is looked for there, by the container's first command.
      if (!a.image_setup && !HaveIrkernel(path)) {
        Say(Status::Msg(Code::kFailedPrecondition, "notebook.no_irkernel"));
        return 127;
      }
      st = WriteIrKernelSpec(a.state + "/data");
      specs.push_back("ir");
    }
    if (!st.ok()) {
      Say(st);
      return 1;
    }
  }
  return 0;
}

// Step 2: DIR's directories, named in Jupyter's variables. The kernels'
// sockets go into runtime/, whose path must leave them room.
Status PrepareState(const std::string& state) {
  const std::string runtime = state + "/runtime";
  if (runtime.size() + kKernelSocketName > kMaxSocketPath) {
    return Status::Msg(Code::kFailedPrecondition, "notebook.path_too_long",
                       {{"dir", runtime}, {"max", std::to_string(kMaxSocketPath)}});
  }
  for (const std::string& d : {state + "/config", state + "/data", runtime, state + "/ipython"}) {
    RETURN_IF_ERROR(os::MakeDirs(d, 0700));
  }
  os::SetEnvVar("JUPYTER_CONFIG_DIR", state + "/config");
  os::SetEnvVar("JUPYTER_DATA_DIR", state + "/data");
  os::SetEnvVar("JUPYTER_RUNTIME_DIR", runtime);
  os::SetEnvVar("IPYTHONDIR", state + "/ipython");
  return Status::OK();
}

// Jupyter's config: the JSON, and the Python half beside it.
Status WriteConfig(const std::string& exe, const std::string& dir, const Json& cfg) {
  const bool notebook6 = Basename(exe) == "jupyter-notebook";
  const std::string name = notebook6 ? "jupyter_notebook_config" : "jupyter_server_config";
  RETURN_IF_ERROR(os::WriteFileAtomic(dir + "/" + name + ".json", cfg.dump(2), 0600));
  if (notebook6) {
    RETURN_IF_ERROR(os::MakeDirs(dir + "/templates", 0700));
    RETURN_IF_ERROR(os::WriteFileAtomic(dir + "/templates/page.html", kTokenlessPage, 0600));
  }
  return os::WriteFileAtomic(dir + "/" + name + ".py", JupyterPyConfig(notebook6), 0600);
}

// Steps 2-4: the state directories, the token's file, the kernels. An exit
// code on failure, 0 when done.
int PrepareNotebook(const Args& a, const std::string& path, std::vector<std::string>& specs) {
  if (Status st = PrepareState(a.state); !st.ok()) {
    Say(st);
    return 1;
  }
  // The token leaves the environment that kernels and terminals inherit.
  if (const char* token = std::getenv("JUPYTER_TOKEN")) {
    const std::string file = a.state + "/token";
    if (Status st = os::WriteFileAtomic(file, token, 0600); !st.ok()) {
      std::fprintf(stderr, "lathe: %s\n", st.ToString().c_str());
      return 1;
    }
    os::UnsetEnvVar("JUPYTER_TOKEN");
    os::SetEnvVar("JUPYTER_TOKEN_FILE", file);
  }
  return RegisterKernels(a, path, specs);
}

// --image-setup: which Jupyter the image holds is known only inside it, so
// both configs are written (jupyter-notebook 6 reads the NotebookApp's, lab
// and jupyter-server the ServerApp's); Jupyter's root is its working
// directory, the container's. Then the next setup step, if any.
int ImageSetup(const Args& a, const std::string& path) {
  std::vector<std::string> specs;
  if (int rc = PrepareNotebook(a, path, specs); rc != 0) return rc;
  const std::string config = a.state + "/config";
  for (const char* exe : {"jupyter-notebook", "jupyter-server"}) {
    // The container runs as the setup step's user: root may run Jupyter only if allowed.
    Status st = WriteConfig(exe, config, JupyterConfig(exe, a.socket, "", specs, os::IsRoot()));
    if (!st.ok()) {
      std::fprintf(stderr, "lathe: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  (void)os::RemoveFile(a.socket);  // a previous attempt's
  if (a.then.empty()) return 0;
  Status st = os::ExecReplace(a.then);
  std::fprintf(stderr, "lathe: %s\n", st.ToString().c_str());
  return 127;
}

}  // namespace

std::string FindOnPath(const std::string& name, const std::string& path) {
  size_t from = 0;
  while (from <= path.size()) {
    size_t colon = path.find(':', from);
    if (colon == std::string::npos) colon = path.size();
    std::string dir = path.substr(from, colon - from);
    if (!dir.empty() && dir[0] == '/' && os::IsExecutable(dir + "/" + name)) {
      return dir + "/" + name;
    }
    from = colon + 1;
  }
  return "";
}

std::string FindJupyter(const std::string& path) {
  for (const char* exe : {"jupyter-lab", "jupyter-notebook", "jupyter-server"}) {
    std::string found = FindOnPath(exe, path);
    if (!found.empty()) return found;
  }
  return "";
}

Json JupyterConfig(const std::string& exe, const std::string& socket, const std::string& root,
                   const std::vector<std::string>& kernelspecs, bool as_root) {
  // jupyter-notebook 6 is the NotebookApp; lab 3+ and jupyter-server the ServerApp.
  const bool notebook6 = Basename(exe) == "jupyter-notebook";
  Json app = {
      {"sock", socket}, {"sock_mode", "0600"}, {"open_browser", false}, {"allow_root", as_root}};
  if (!root.empty()) app[notebook6 ? "notebook_dir" : "root_dir"] = root;
  return {{notebook6 ? "NotebookApp" : "ServerApp", app},
          // Unix sockets in the notebook's runtime directory: a TCP port on
          // loopback is open to every local user, the HMAC key signs
          // messages but lets anyone subscribe.
          {"KernelManager", {{"transport", "ipc"}}},
          {"KernelSpecManager",
           {{"allowed_kernelspecs", kernelspecs},
            {"ensure_native_kernel",
             std::find(kernelspecs.begin(), kernelspecs.end(), "python3") != kernelspecs.end()}}}};
}

int NotebookMain(const std::vector<std::string>& argv) {
  Args a;
  if (!ParseArgs(argv, a)) {
    std::fprintf(stderr,
                 "usage: lathe __notebook --state DIR --socket PATH --kernels K,... "
                 "[--image-setup [-- NEXT...]]\n");
    return 2;
  }
  const char* env_path = std::getenv("PATH");
  const std::string path = env_path ? env_path : "/usr/bin:/bin";
  if (a.image_setup) return ImageSetup(a, path);
  const std::string exe = FindJupyter(path);
  if (exe.empty()) {
    Say(Status::Msg(Code::kFailedPrecondition, "notebook.no_jupyter", {{"path", path}}));
    return 127;
  }
  std::vector<std::string> specs;
  if (int rc = PrepareNotebook(a, path, specs); rc != 0) return rc;
  const std::string config = a.state + "/config";
  const std::string root = os::CurrentDir().value_or("/");
  if (Status st = WriteConfig(exe, config, JupyterConfig(exe, a.socket, root, specs, os::IsRoot()));
      !st.ok()) {
    std::fprintf(stderr, "lathe: %s\n", st.ToString().c_str());
    return 1;
  }
  (void)os::RemoveFile(a.socket);  // a previous attempt's
  std::fprintf(stderr, "lathe: starting %s on %s\n", exe.c_str(), a.socket.c_str());
  std::fflush(stderr);
  Status st = os::ExecReplace({exe});
  std::fprintf(stderr, "lathe: %s\n", st.ToString().c_str());
  return 127;
}

}  // namespace lathe::run
