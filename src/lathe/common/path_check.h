// Checks on paths and strings a person or a client hands over, before they
// reach the kernel: a NUL byte would silently cut the string short there, and
// an over-long path fails deep inside with ENAMETOOLONG.
#pragma once

#include <string_view>

#include "lathe/common/status.h"

namespace lathe {

// InvalidArgument "input.nul_byte" naming `field` when `value` holds a NUL
// byte (a command argument, an environment variable or a path cannot).
Status CheckNoNul(std::string_view value, std::string_view field);

// Whether `path` can name a file: no NUL byte, at most PATH_MAX - 1 bytes
// (path.too_long), no component longer than NAME_MAX bytes
// (path.name_too_long). Errors are InvalidArgument naming `field`; they quote
// at most the start of what was given. Absoluteness is the caller's to check.
Status CheckPathName(std::string_view path, std::string_view field);

}  // namespace lathe
