// lathe __workspace (internal): a run's first process when it has a
// workspace (run/workspace.h). The daemon builds the command line
// (daemon/workspaces.h):
//   lathe __workspace [--git SRC] [--ref REF] [--in-place] --dir DIR [--record FILE]
//                     [--workdir W] [--setup-only] -- ARGV...
// Parsed here by hand, before CLI11 (main.cc): ARGV is the run's own
// command line and is never read as options.
#include <cstdio>
#include <cstring>
#include <string>

#include "cmd/commands.h"
#include "lathe/run/workspace.h"

namespace lathe::cmd {

int WorkspaceMain(int argc, char** argv) {
  run::WorkspaceJob job;
  int i = 2;  // argv[1] is "__workspace"
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    auto value = [&](std::string& out) {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    bool ok = true;
    if (a == "--git") {
      ok = value(job.git);
    } else if (a == "--ref") {
      ok = value(job.ref);
    } else if (a == "--dir") {
      ok = value(job.dir);
    } else if (a == "--record") {
      ok = value(job.record_path);
    } else if (a == "--workdir") {
      ok = value(job.workdir);
    } else if (a == "--in-place") {
      job.in_place = true;
    } else if (a == "--setup-only") {
      job.setup_only = true;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "lathe __workspace: bad argument '%s'\n", a.c_str());
      return 2;
    }
  }
  for (; i < argc; ++i) job.argv.emplace_back(argv[i]);
  if (job.dir.empty() || (job.git.empty() != job.in_place) ||
      (job.argv.empty() && !job.setup_only)) {
    std::fprintf(stderr,
                 "lathe __workspace: needs --dir, one of --git and --in-place, and a "
                 "command after --\n");
    return 2;
  }
  return run::RunWorkspaceJob(job);
}

}  // namespace lathe::cmd
