// What images.cc and image_build.cc share about podman's answers; not for
// other files.
#pragma once

#include <optional>
#include <string>

#include "lathe/common/status.h"
#include "lathe/os/command.h"

namespace lathe::daemon {

// The last "sha256:HEX" or bare 64-hex word of podman's output.
std::optional<std::string> IdIn(const std::string& out);
// A name as `lathe image` takes it: a reference without '@' (a digest is
// what an image is, not a name for it). InvalidArgument image.bad_name.
Status CheckImageName(const std::string& name);
// podman's reason for a failure: the last line of `text` (its stderr, or
// its merged output), without "Error: ".
std::string PodmanReasonIn(const std::string& text, int exit_code);
std::string PodmanReason(const os::CommandOutput& out);

}  // namespace lathe::daemon
