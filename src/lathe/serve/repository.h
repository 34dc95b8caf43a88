// Where models come from: a Triton-style repository (`<repo>/<model>/config.yaml`,
// versions in `<repo>/<model>/<N>/`) or one `--model NAME=PATH`.
//
// Nothing here loads a model: it reads configs and lists version directories.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/serve/config.h"

namespace lathe::serve {

struct VersionSource {
  int64_t version = 0;
  std::string dir;         // the version directory
  std::string model_file;  // dir/<default_model_filename>, or the model dir's file, or the --model file
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

// The versions a policy selects from `available` (ascending); empty when none.
std::vector<int64_t> SelectVersions(const VersionPolicy& policy, const std::vector<int64_t>& available);

}  // namespace lathe::serve
