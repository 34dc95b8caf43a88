// A temporary directory for a test, removed with it.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace lathe::telemetry {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/lathe-telemetry-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace lathe::telemetry
