// The `lathe` binary: parses the command line, runs one subcommand, and maps
// its Status to the documented exit code (docs/cli.md). Subcommands live in
// cmd_<noun>.cc, each registering itself through a Setup function.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cmd/commands.h"
#include "cmd/help_text.h"
#include "cmd/output.h"
#include "cmd/usage_error.h"
#include "lathe/common/exit_code.h"
#include "lathe/common/i18n.h"
#include "lathe/common/log.h"
#include "lathe/exec/monitor.h"
#include "lathe/exec/torchrun.h"
#include "lathe/run/notebook_prelude.h"
#include "lathe/snap/watcher.h"

int main(int argc, char** argv) {
  // The per-run monitor (`lathe __monitor LAUNCH FD`, started by the daemon
  // for every run; FD "-" in a Slurm job) skips building the whole command
  // line: it is on the path from submit to the job's first instruction.
  if (argc == 4 && std::strcmp(argv[1], "__monitor") == 0) {
    return lathe::exec::MonitorMain(argv[2], lathe::exec::ParseHandshakeFd(argv[3]),
                                    lathe::snap::WatchUntilStopped);
  }
  // A notebook run's first program (run/notebook_prelude.h): it execs Jupyter.
  if (argc >= 2 && std::strcmp(argv[1], "__notebook") == 0) {
    return lathe::run::NotebookMain(std::vector<std::string>(argv + 2, argv + argc));
  }
  // A run's first process when it has a workspace: the run's own command
  // line follows, never parsed as lathe's options.
  if (argc >= 2 && std::strcmp(argv[1], "__workspace") == 0) {
    return lathe::cmd::WorkspaceMain(argc, argv);
  }
  // A torchrun run's first process (exec/torchrun.h): it execs torchrun, or
  // srun of one torchrun per node.
  if (argc >= 2 && std::strcmp(argv[1], "__torchrun") == 0) {
    return lathe::exec::TorchrunMain(argc, argv);
  }
  // The deployments' front (docs/gateway.md), started by the daemon.
  if (argc >= 2 && std::strcmp(argv[1], "__gateway") == 0) {
    return lathe::cmd::GatewayMain(argc, argv);
  }
  // A command deployment's replica (gateway/relay.h), the run's first process.
  if (argc >= 2 && std::strcmp(argv[1], "__relay") == 0) {
    return lathe::cmd::RelayMain(argc, argv);
  }
  // What a shell's completion asks for (cmd_completion.cc): candidates, one a line.
  if (argc >= 2 && std::strcmp(argv[1], "__complete") == 0) {
    return lathe::cmd::CompleteMain(argc, argv);
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  // --help and parse errors are written in the reader's language.
  const lathe::Lang help_lang = lathe::cmd::HelpLanguage(args);
  CLI::App app;
  app.set_version_flag("--version", LATHE_VERSION);
  app.require_subcommand(1);
  lathe::cmd::Globals globals;
  app.add_option("--lang", globals.lang)
      ->check(CLI::IsMember({"zh", "en", "zh-CN", "zh_CN", "pseudo"}));

  lathe::Status status;
  lathe::cmd::SetupFor(app, globals, status, lathe::cmd::CommandWord(args));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Only now: the texts of every command and flag come from the catalog,
    // which a command that parses cleanly may never need to load.
    lathe::cmd::LocalizeHelp(app, help_lang);
    if (e.get_exit_code() == 0) {  // --help or --version
      return app.exit(e) == 0 ? lathe::kExitOk : lathe::kExitUsage;
    }
    auto describe = [&](lathe::Lang lang) {
      if (auto unknown = lathe::cmd::DescribeUnknownArgument(app, args, lang)) return *unknown;
      return lathe::cmd::DescribeParseError(app, e, lang);
    };
    // With --json, the error object too: the command line's own errors as well.
    if (lathe::cmd::JsonInArgs(args)) {
      lathe::cmd::PrintJsonUsageError(describe(lathe::Lang::kEn), describe(lathe::Lang::kZh));
    }
    std::fprintf(stderr, "lathe: %s\n", describe(help_lang).c_str());
    return lathe::kExitUsage;
  }
  if (status.ok()) return lathe::kExitOk;
  lathe::Lang lang = globals.Language();
  // The one place a failure is printed: with --json also as the API's error
  // object on stdout, unless the command printed its own answer (docs/cli.md).
  if (lathe::cmd::JsonAsked(app) && !lathe::cmd::JsonAnswered()) lathe::cmd::PrintJsonError(status);
  std::fprintf(stderr, "lathe: %s\n", lathe::Localize(status, lang).c_str());
  return lathe::ExitCodeFor(status);
}
