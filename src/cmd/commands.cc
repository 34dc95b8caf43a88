#include "cmd/commands.h"

namespace lathe::cmd {

void SetupVersion(CLI::App& app, Globals& g, Status& status);

void SetupAll(CLI::App& app, Globals& g, Status& status) {
  SetupVersion(app, g, status);
}

}  // namespace lathe::cmd
