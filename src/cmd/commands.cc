#include "cmd/commands.h"

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

namespace lathe::cmd {

void SetupVersion(CLI::App& app, Globals& g, Status& status);
void SetupDaemon(CLI::App& app, Globals& g, Status& status);
void SetupCompletion(CLI::App& app, Globals& g, Status& status);  // cmd_completion.cc
void SetupRun(CLI::App& app, Globals& g, Status& status);
void SetupGpus(CLI::App& app, Globals& g, Status& status);
void SetupTop(CLI::App& app, Globals& g, Status& status);   // cmd_top.cc
void SetupSnap(CLI::App& app, Globals& g, Status& status);  // cmd_snap.cc
void SetupDoctor(CLI::App& app, Globals& g,
                 Status& status);  // cmd_doctor.cc: doctor, explain, term, plan
void SetupServe(CLI::App& app, Globals& g, Status& status);     // cmd_serve.cc
void SetupToken(CLI::App& app, Globals& g, Status& status);     // cmd_token.cc
void SetupLogin(CLI::App& app, Globals& g, Status& status);     // cmd_login.cc: login, logout
void SetupRm(CLI::App& app, Globals& g, Status& status);        // cmd_rm.cc
void SetupSecret(CLI::App& app, Globals& g, Status& status);    // cmd_secret.cc
void SetupOpen(CLI::App& app, Globals& g, Status& status);      // cmd_open.cc
void SetupUi(CLI::App& app, Globals& g, Status& status);        // cmd_ui.cc
void SetupNotebook(CLI::App& app, Globals& g, Status& status);  // cmd_notebook.cc
void SetupModel(CLI::App& app, Globals& g, Status& status);     // cmd_model.cc
void SetupDeploy(CLI::App& app, Globals& g, Status& status);    // cmd_deploy.cc
void SetupPools(CLI::App& app, Globals& g, Status& status);     // cmd_pools.cc
void SetupProfiles(CLI::App& app, Globals& g, Status& status);  // cmd_profiles.cc
void SetupImage(CLI::App& app, Globals& g, Status& status);     // cmd_image.cc
void SetupShare(CLI::App& app, Globals& g, Status& status);  // cmd_share.cc: share, unshare, shares
void SetupProject(CLI::App& app, Globals& g, Status& status);  // cmd_project.cc

namespace {

using SetupFn = void (*)(CLI::App&, Globals&, Status&);

// Which Setup function registers each top-level command. Every call of
// `lathe` builds the command line of its own command only (a whole CLI11
// tree is ~250 KB of heap and ~5 ms of start-up on a machine where a page
// fault is dear); tests/integ/test_cli.py checks that every command that
// `lathe --help` lists is found here.
constexpr std::pair<std::string_view, SetupFn> kCommands[] = {
    {"version", SetupVersion}, {"daemon", SetupDaemon},     {"up", SetupDaemon},
    {"down", SetupDaemon},     {"status", SetupDaemon},     {"run", SetupRun},
    {"ps", SetupRun},          {"logs", SetupRun},          {"stop", SetupRun},
    {"inspect", SetupRun},     {"gpus", SetupGpus},         {"top", SetupTop},
    {"snap", SetupSnap},       {"doctor", SetupDoctor},     {"explain", SetupDoctor},
    {"term", SetupDoctor},     {"plan", SetupDoctor},       {"serve", SetupServe},
    {"token", SetupToken},     {"login", SetupLogin},       {"logout", SetupLogin},
    {"rm", SetupRm},           {"secret", SetupSecret},     {"open", SetupOpen},
    {"ui", SetupUi},           {"notebook", SetupNotebook}, {"model", SetupModel},
    {"deploy", SetupDeploy},   {"pools", SetupPools},       {"profiles", SetupProfiles},
    {"image", SetupImage},     {"reload", SetupDaemon},     {"completion", SetupCompletion},
    {"share", SetupShare},     {"unshare", SetupShare},     {"shares", SetupShare},
    {"project", SetupProject},
};

}  // namespace

std::string_view CommandWord(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--lang") {
      ++i;  // its value
      continue;
    }
    if (a.starts_with("--lang=")) continue;
    if (a.starts_with("-")) return "";  // --help, --version, or a mistake: every command
    return a;
  }
  return "";
}

void SetupFor(CLI::App& app, Globals& g, Status& status, std::string_view command) {
  for (const auto& [name, setup] : kCommands) {
    if (name == command) return setup(app, g, status);
  }
  SetupAll(app, g, status);  // no command, or one to tell apart from the others
}

void SetupAll(CLI::App& app, Globals& g, Status& status) {
  // From the one table, each Setup function once: what --help lists, what
  // completion offers and what a mistyped command is compared with cannot
  // drift from the commands that exist (tests/integ/test_cli.py).
  std::vector<SetupFn> done;
  for (const auto& [name, setup] : kCommands) {
    if (std::find(done.begin(), done.end(), setup) != done.end()) continue;
    done.push_back(setup);
    setup(app, g, status);
  }
}

}  // namespace lathe::cmd
