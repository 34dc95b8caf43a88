// lathe snap ... (checkpoint snapshots)
#include "cmd/commands.h"

namespace lathe::cmd {

void SetupSnap(CLI::App& app, Globals& g, Status& status) {}

}  // namespace lathe::cmd
