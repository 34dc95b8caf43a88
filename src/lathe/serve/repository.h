// Where models come from: a Triton-style repository (`<repo>/<model>/config.yaml`,
// versions in `<repo>/<model>/<N>/`) or one `--model NAME=PATH`.
//
// Nothing here loads a model: it reads configs and lists version directories.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/serve/config.h"

namespace lathe::serve {

struct VersionSource {
  int64_t version = 0;
  std::string dir;  // the version directory
  std::string
      model_file;  // dir/<default_model_filename>, or the model dir's file, or the --model file
};

struct ModelSource {
  std::string name;
  std::string model_dir;
  ModelConfig config;
  std::vector<VersionSource> available;  // every version found, ascending
};

// Reads <model_dir>/config.yaml (validated) and lists its versions. `name` is
// the model's name (the directory's name in a repository).
Result<ModelSource> LoadModelDir(const std::string& model_dir, const std::string& name);

// Every model of a repository: each subdirectory holding a config.yaml. A
// subdirectory without one is skipped with a warning; an invalid config fails.
Result<std::vector<ModelSource>> ScanRepository(const std::string& repository);

// `--model NAME=PATH`: PATH is a model directory (with or without config.yaml),
// or a model file whose extension names the backend (.pt .pth .ts .torchscript
// → torchscript; .py → process). Without a config, defaults apply
// (DefaultModelConfig) and the file is served as version 1.
Result<ModelSource> ModelFromFlag(const std::string& flag);

// What a file looked like at one scan (watch mode compares two scans).
struct FileState {
  int64_t size = -1;
  int64_t mtime_ns = 0;
  bool operator==(const FileState&) const = default;
};
FileState StatFile(const std::string& path);  // size -1 when it does not exist

// The name of the marker file that declares a version directory complete.
inline constexpr const char* kVersionReadyMarker = "READY";

// Whether a version directory has been copied in completely, so watch mode may
// load it: it holds the marker file READY (written last by whoever copies the
// version in), or its model file is whole: a zip archive (TorchScript) whose
// end-of-central-directory record is present and whose size did not change
// since the previous scan, or any other file whose size and mtime did not
// change since `previous` (the state at the previous scan; nullopt at the
// first). `now` receives the model file's current state.
bool VersionComplete(const VersionSource& v, const std::optional<FileState>& previous,
                     FileState& now);

// The versions a policy selects from `available` (ascending); empty when none.
std::vector<int64_t> SelectVersions(const VersionPolicy& policy,
                                    const std::vector<int64_t>& available);

}  // namespace lathe::serve
