// Notebook runs (spec type: notebook; docs/notebooks.md): what the daemon
// adds to such a run's launch. A notebook is a run like any other — queued,
// placed, held by its monitor, preempted by priority — whose program is
// Jupyter, started by `lathe __notebook` (run/notebook_prelude.h) as the
// run's user, listening on a unix socket the daemon names.
//
// Files, in the run's directory (the daemon's; 0711 in system mode):
//   notebook.token  the Jupyter token: 0600, the daemon's, made at the first
//                   start and kept across attempts (a restarted daemon's
//                   proxy reads it again). It reaches Jupyter through the
//                   environment of the prelude, which moves it into a 0600
//                   file of the user's: never a command line, which `ps`
//                   shows every user.
//   notebook/       the run's user's (0700): Jupyter's config, data and
//                   runtime directories, IPython's, and jupyter.sock. Two
//                   notebooks of one user share none of it. Kept across
//                   attempts (a restarted notebook keeps its settings);
//                   removed with the run.
//
// Thread-safe: plain functions of their arguments.
#pragma once

#include <sys/types.h>

#include <string>

#include "lathe/common/status.h"
#include "lathe/exec/backend.h"
#include "lathe/run/spec.h"
#include "lathe/state/run_store.h"

namespace lathe::daemon {

// The notebook's port name: its run origin's main port.
inline constexpr char kNotebookPort[] = "jupyter";

std::string NotebookDir(const std::string& run_dir);     // <run_dir>/notebook
std::string NotebookSocket(const std::string& run_dir);  // <run_dir>/notebook/jupyter.sock
std::string NotebookTokenPath(const std::string& run_dir);

// The run's token, made (0600) when there is none yet.
Result<std::string> NotebookToken(const std::string& run_dir);

// Makes notebook/ for uid:gid when it is missing (a directory already there
// is kept: only the daemon can create entries in the run directory).
Status PrepareNotebookDir(const std::string& run_dir, uid_t uid, gid_t gid);

// At submission: Jupyter must be found on the run's PATH (the spec's env
// PATH, else the backend's default), and R too for the r kernel; else a
// clear error naming the package (notebook.no_jupyter, notebook.no_irkernel).
// A notebook in an image passes: its image is looked into when it starts
// (notebook.image_no_jupyter in the run's log, exit status 127).
Status CheckNotebookSubmittable(const run::RunSpec& spec);

// What the run serves, in order, the first being its main port: a
// notebook's Jupyter, then the spec's ports.
std::vector<run::PortSpec> ServedPorts(const state::RunRecord& r);

// Turns the launch of a notebook run into `lathe __notebook`: argv, the
// token and Jupyter's directories in the environment, and the Jupyter
// socket as the run's first port (the spec's own ports follow). In an image
// (spec.image_id), `lathe __notebook --image-setup` becomes the setup step
// (on the host, as the user) and the image's own Jupyter the program,
// started by the image's /bin/sh; the notebook's directory is mounted at
// the same path (exec/local_backend.cc ContainerMounts).
void ApplyNotebook(const std::string& run_dir, const run::RunSpec& spec,
                   const std::string& self_exe, const std::string& token, exec::LaunchRequest& q);

}  // namespace lathe::daemon
