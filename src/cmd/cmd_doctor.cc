// lathe doctor | explain | term | plan
#include "cmd/commands.h"

namespace lathe::cmd {

void SetupDoctor(CLI::App& app, Globals& g, Status& status) {}

}  // namespace lathe::cmd
