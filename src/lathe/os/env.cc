#include "lathe/os/env.h"

#include "lathe/os/files.h"
#include "lathe/os/process.h"

namespace lathe::os {
namespace {

class Real final : public Env {
 public:
  Result<std::string> ReadFile(const std::string& path) override { return os::ReadFile(path); }
  bool FileExists(const std::string& path) override { return os::Exists(path); }
  bool ProcessAlive(pid_t pid, std::optional<uint64_t> start_time) override {
    return os::ProcessAlive(pid, start_time);
  }
};

}  // namespace

Env& RealEnv() {
  static Real* env = new Real();  // never destroyed: usable from exit handlers
  return *env;
}

}  // namespace lathe::os
