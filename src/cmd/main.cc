// The `lathe` binary: parses the command line, runs one subcommand, and maps
// its Status to the documented exit code (docs/cli.md). Subcommands live in
// cmd_<noun>.cc, each registering itself through a Setup function.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cmd/commands.h"
#include "cmd/usage_error.h"
#include "lathe/common/exit_code.h"
#include "lathe/common/i18n.h"
#include "lathe/common/log.h"
#include "lathe/run/monitor.h"

int main(int argc, char** argv) {
  // The per-run monitor (`lathe __monitor LAUNCH FD`, started by the daemon
  // for every run) skips building the whole command line: it is on the path
  // from submit to the job's first instruction.
  if (argc == 4 && std::strcmp(argv[1], "__monitor") == 0) {
    return lathe::run::MonitorMain(argv[2], std::atoi(argv[3]));
  }
  CLI::App app{"Lathe: a self-hosted AI workbench for GPU machines"};
  app.set_version_flag("--version", LATHE_VERSION);
  app.require_subcommand(1);
  lathe::cmd::Globals globals;
  app.add_option("--lang", globals.lang, "language of messages: zh | en")
      ->check(CLI::IsMember({"zh", "en", "zh-CN", "zh_CN", "pseudo"}));

  lathe::Status status;
  lathe::cmd::SetupAll(app, globals, status);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) {  // not --help or --version
      std::vector<std::string> args(argv + 1, argv + argc);
      if (auto what = lathe::cmd::DescribeUnknownArgument(app, args, globals.Language())) {
        std::fprintf(stderr, "lathe: %s\n", what->c_str());
        return lathe::kExitUsage;
      }
    }
    int rc = app.exit(e);
    return rc == 0 ? lathe::kExitOk : lathe::kExitUsage;
  }
  if (status.ok()) return lathe::kExitOk;
  lathe::Lang lang = globals.Language();
  std::fprintf(stderr, "lathe: %s\n", lathe::Localize(status, lang).c_str());
  return lathe::ExitCodeFor(status);
}
