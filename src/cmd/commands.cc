#include "cmd/commands.h"

namespace lathe::cmd {

void SetupVersion(CLI::App& app, Globals& g, Status& status);
void SetupDaemon(CLI::App& app, Globals& g, Status& status);
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

void SetupAll(CLI::App& app, Globals& g, Status& status) {
  SetupVersion(app, g, status);
  SetupDaemon(app, g, status);
  SetupRun(app, g, status);
  SetupGpus(app, g, status);
  SetupTop(app, g, status);
  SetupSnap(app, g, status);
  SetupDoctor(app, g, status);
  SetupServe(app, g, status);
  SetupToken(app, g, status);
  SetupLogin(app, g, status);
  SetupRm(app, g, status);
  SetupSecret(app, g, status);
  SetupOpen(app, g, status);
  SetupUi(app, g, status);
  SetupNotebook(app, g, status);
  SetupModel(app, g, status);
  SetupDeploy(app, g, status);
}

}  // namespace lathe::cmd
