// What a Containerfile (a Dockerfile) builds on: the images its FROM lines
// and its `COPY --from=` name, so that the daemon can give a build exactly
// the images the user may use (daemon/images.h Images::Build) before podman
// reads the file itself with --pull=never.
//
// Only the little of the syntax that locates those names is read: comments,
// the `# escape=` directive, line continuations, case-insensitive
// instructions, `--platform=` and other flags, `AS stage` names (a later
// `FROM stage` is not an image) and global `ARG NAME=default` substituted
// into `FROM ${NAME}`. Written by hand: no Debian library parses the format
// (buildah's parser is Go).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"

namespace lathe::exec {

struct BaseImage {
  std::string ref;  // as written, after ARG substitution ("pytorch", "127.0.0.1:5000/bb:1")
  int line = 0;     // 1-based, where its instruction starts
};

// The images in `text` in order of appearance, each once; `scratch` and
// stage names are left out. InvalidArgument image.build_bad_from naming the
// line for a FROM without an image, or with a variable that no global ARG
// gives a default.
Result<std::vector<BaseImage>> ContainerfileBases(std::string_view text);

}  // namespace lathe::exec
