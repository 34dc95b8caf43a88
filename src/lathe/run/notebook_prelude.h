// `lathe __notebook`: the first program of a notebook run (daemon/notebooks.h
// builds its command line). It runs as the run's user, in the run's cgroups,
// with the run's GPUs, in the run's working directory (the workspace's when
// it has one), and replaces itself with Jupyter:
//
//   lathe __notebook --state DIR --socket PATH --kernels python,r
//
//   1. finds Jupyter on PATH: jupyter-lab, else jupyter-notebook, else
//      jupyter-server (none: a clear error naming the package, exit 127);
//   2. makes DIR's config/, data/, runtime/ and ipython/ (0700) and points
//      JUPYTER_CONFIG_DIR, JUPYTER_DATA_DIR, JUPYTER_RUNTIME_DIR and
//      IPYTHONDIR there, so two notebooks of one user share no state;
//   3. moves the token from $JUPYTER_TOKEN into DIR/token (0600) and names
//      it in $JUPYTER_TOKEN_FILE, so that kernels do not inherit it;
//   4. registers the kernels asked for (python: ipykernel's own, its
//      output pipe moved to a unix socket; r: IRkernel, checked with R) and
//      allows only those;
//   5. writes Jupyter's config (the unix socket PATH with mode 0600, no
//      browser, the working directory as its root; kernels on unix sockets
//      in DIR/runtime, never on TCP ports; pages without the token) and
//      execs it.
// Every message goes to stderr: the run's log.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "lathe/common/json.h"

namespace lathe::run {

// The first executable `name` in the colon-separated `path`; "" if none.
std::string FindOnPath(const std::string& name, const std::string& path);
// The Jupyter server program on `path` (step 1); "" if none.
std::string FindJupyter(const std::string& path);

// Jupyter's config (step 5) for the program `exe` (jupyter-notebook reads
// NotebookApp, the others ServerApp) and the kernels' names in Jupyter's
// terms ("python3", "ir").
Json JupyterConfig(const std::string& exe, const std::string& socket, const std::string& root,
                   const std::vector<std::string>& kernelspecs, bool as_root);

// The Python half of that config (jupyter_notebook_config.py or
// jupyter_server_config.py beside the JSON): an ipc kernel's sockets are
// named <runtime>/k<N>-<port>, short whatever the kernel's id; for
// jupyter-notebook 6, its templates are looked for in DIR/config/templates
// first.
std::string JupyterPyConfig(bool notebook6);
// DIR/ipython/profile_default/ipython_kernel_config.py: ipykernel's pipe for
// its forked children's output on a unix socket <runtime>/p<pid>, not on a
// 127.0.0.1 port.
extern const char kIpythonKernelConfig[];
// DIR/config/templates/page.html for jupyter-notebook 6: its own page.html
// with `token` empty, so that no page carries the token (the proxy adds it
// to every request).
extern const char kTokenlessPage[];

// The longest name the kernels' sockets add to the runtime directory
// ("/k9999-9", "/p4194304"), and a socket's longest path.
inline constexpr size_t kKernelSocketName = 9;
inline constexpr size_t kMaxSocketPath = 107;

// The body of `lathe __notebook ARGS...` (ARGS without the command word).
// Returns an exit code only when it could not exec Jupyter.
int NotebookMain(const std::vector<std::string>& args);

}  // namespace lathe::run
