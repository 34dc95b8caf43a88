#include "lathe/exec/slurm/slurm_commands.h"

#include <fmt/format.h>

namespace lathe::exec {
namespace {

constexpr char kSetpriv[] = "/usr/bin/setpriv";

class RealSlurmCommands final : public SlurmCommands {
 public:
  explicit RealSlurmCommands(int64_t timeout_ms) : timeout_ms_(timeout_ms) {}
  Result<os::CommandOutput> Run(const std::vector<std::string>& argv, const RunUser* user,
                                const std::map<std::string, std::string>& env) override {
    if (user == nullptr) return os::RunCommandWithEnv(argv, env, timeout_ms_);
    std::vector<std::string> full = SetprivPrefix(*user);
    full.insert(full.end(), argv.begin(), argv.end());
    return os::RunCommandWithEnv(full, env, timeout_ms_);
  }

 private:
  const int64_t timeout_ms_;
};

}  // namespace

std::unique_ptr<SlurmCommands> MakeRealSlurmCommands(int64_t timeout_ms) {
  return std::make_unique<RealSlurmCommands>(timeout_ms);
}

std::vector<std::string> SetprivPrefix(const RunUser& user) {
  std::vector<std::string> argv = {kSetpriv, fmt::format("--reuid={}", user.uid),
                                   fmt::format("--regid={}", user.gid)};
  if (!user.groups.empty()) {
    argv.push_back(fmt::format("--groups={}", fmt::join(user.groups, ",")));
  } else if (!user.name.empty()) {
    argv.push_back("--init-groups");
  } else {
    argv.push_back("--clear-groups");
  }
  argv.push_back("--");
  return argv;
}

}  // namespace lathe::exec
