// The file and process questions the daemon asks about its runs — is there
// an exit.json, what does it say, is the monitor still alive — behind one
// interface (LevelDB's Env), so that a test can make a file appear or a
// process vanish at an exact point between two of them. Production code uses
// RealEnv(); tests wrap it (EnvWrapper) and override what they need.
//
// Thread-safe: RealEnv() is stateless; a wrapper must be as safe as what it
// is called from (the daemon calls it from its supervisor thread and, at
// start, from the thread that creates it).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "lathe/common/status.h"

namespace lathe::os {

class Env {
 public:
  virtual ~Env() = default;
  // The whole file (os::ReadFile); NotFound when it does not exist.
  virtual Result<std::string> ReadFile(const std::string& path) = 0;
  virtual bool FileExists(const std::string& path) = 0;
  // os::ProcessAlive: `pid` exists and, when given, started at `start_time`.
  virtual bool ProcessAlive(pid_t pid, std::optional<uint64_t> start_time) = 0;
};

// The process-wide real implementation. Never destroyed.
Env& RealEnv();

// Forwards every call to `target` (not owned); override what a test changes.
class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env& target) : target_(target) {}
  Result<std::string> ReadFile(const std::string& path) override { return target_.ReadFile(path); }
  bool FileExists(const std::string& path) override { return target_.FileExists(path); }
  bool ProcessAlive(pid_t pid, std::optional<uint64_t> start_time) override {
    return target_.ProcessAlive(pid, start_time);
  }
  Env& target() { return target_; }

 private:
  Env& target_;
};

}  // namespace lathe::os
