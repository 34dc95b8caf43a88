#include "cmd/commands.h"

namespace lathe::cmd {

void SetupVersion(CLI::App& app, Globals& g, Status& status);
void SetupDaemon(CLI::App& app, Globals& g, Status& status);
void SetupRun(CLI::App& app, Globals& g, Status& status);
void SetupGpus(CLI::App& app, Globals& g, Status& status);

void SetupAll(CLI::App& app, Globals& g, Status& status) {
  SetupVersion(app, g, status);
  SetupDaemon(app, g, status);
  SetupRun(app, g, status);
  SetupGpus(app, g, status);
}

}  // namespace lathe::cmd
