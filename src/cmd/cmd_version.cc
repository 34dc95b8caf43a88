#include <cstdio>

#include "cmd/commands.h"

namespace lathe::cmd {

void SetupVersion(CLI::App& app, Globals& g, Status& status) {
  auto* sub = app.add_subcommand("version");
  sub->callback([&status] {
    std::printf("lathe %s\n", LATHE_VERSION);
    status = Status::OK();
  });
}

}  // namespace lathe::cmd
