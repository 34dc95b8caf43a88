// Path safety for restore: nothing a manifest says may put a file outside
// the directory being restored into, whoever wrote the manifest.
#pragma once

#include <string_view>

#include "lathe/common/status.h"
#include "lathe/snap/manifest.h"

namespace lathe::snap {

// A clean relative path: not empty, not absolute, no "", "." or ".."
// component, no NUL byte.
bool IsSafeRelPath(std::string_view path);

// True when a symlink at `link_path` (relative to the root) pointing to
// `target` stays inside the tree, judged lexically: not absolute, ".." only
// as leading components, and those never climb above the root.
bool SymlinkStaysInside(std::string_view link_path, std::string_view target);

// Every entry has a safe path, no path repeats, no entry lies below a
// symlink (writing through it could leave the tree), and every symlink stays
// inside. Otherwise InvalidArgument (catalog id snap.path_escape) naming the
// first offending path.
Status ValidateManifestPaths(const Manifest& m);

}  // namespace lathe::snap
