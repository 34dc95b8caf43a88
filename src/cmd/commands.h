// Registry of subcommands. Each cmd_<noun>.cc defines Setup<Noun>(app, globals,
// status): it adds its subcommand(s) to `app` with a callback that stores the
// outcome in `status`. main() maps that Status to the exit code. The
// descriptions of commands and flags are not written here: they are in the
// message catalog (data/messages_help.yaml, ids help.<command>.<flag>), set by
// LocalizeHelp (help_text.h) in the reader's language.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lathe/common/i18n.h"
#include "lathe/common/json.h"
#include "lathe/common/status.h"

namespace lathe::api {
class ApiClient;
}  // namespace lathe::api

namespace lathe::cmd {

struct Globals {
  std::string lang;  // --lang, empty when not given
  Lang Language() const {
    return DetectLang(lang.empty() ? std::nullopt : std::optional<std::string_view>(lang));
  }
};

void SetupAll(CLI::App& app, Globals& g, Status& status);
// `lathe __complete WORDS...` (cmd_completion.cc): the completions of the last word.
int CompleteMain(int argc, char** argv);
// The command `args` (argv without the program) names: the first word that
// is not a global option; "" when an option (--help, --version, a mistake)
// comes first or there is none.
std::string_view CommandWord(const std::vector<std::string>& args);
// Only what `command` needs on the command line (its Setup function); every
// command when it names none of them, so that help lists them all and a
// mistake is told apart from the commands.
void SetupFor(CLI::App& app, Globals& g, Status& status, std::string_view command);

// Shared with lathe notebook (cmd_run.cc): lathe logs RUN [-f], lathe stop RUN.
Status LogsOfRun(const std::string& ref, bool follow, Lang lang);
Status StopOfRun(const std::string& ref, bool json, Lang lang);
// lathe inspect RUN --metrics [--json] (cmd_inspect_metrics.cc): the run's
// telemetry summary and a sparkline of each series, labelled simulated.
Status InspectMetrics(const std::string& ref, bool json, Lang lang);
// The shell's working directory ("/" when it cannot be read).
std::string ShellCwd();
// What every submission from this shell adds to a spec (cmd_run.cc): the
// --env NAME=VALUE flags (cli.bad_env for one without '='), the shell's
// umask and PATH unless the spec sets them.
Status AddShellDefaults(Json& spec, const std::vector<std::string>& env_flags);
// The daemon's client for a command that submits work (cmd_run.cc):
// api::ApiClient::ConnectWaiting, saying on stderr when it waits for a
// daemon that restarts.
Result<std::unique_ptr<api::ApiClient>> ConnectToSubmit(Lang lang);
// One --port value as a spec ports entry ("8888", "tb=6006", "web=/abs.sock").
Json PortFlagJson(const std::string& value);
// A --workspace value as `lathe run` sends it (a local path looked at here).
Status ResolveWorkspaceFlag(Json& ws, const std::string& base);
// `lathe __workspace … -- ARGV…` (cmd_workspace.cc), a run's first process
// when it has a workspace; main() hands it the whole command line.
int WorkspaceMain(int argc, char** argv);
// `lathe __gateway --dir DIR --listen HOST:PORT …` (cmd_gateway.cc), the
// deployments' front that the daemon starts; main() hands it the command line.
int GatewayMain(int argc, char** argv);
// `lathe __relay --socket SOCK [--port P] -- CMD…` (cmd_relay.cc), a command
// deployment's replica; main() hands it the command line.
int RelayMain(int argc, char** argv);

}  // namespace lathe::cmd
