// Identifiers: short, random, lower-case, URL- and shell-safe.
#pragma once

#include <string>
#include <string_view>

namespace lathe {

// A new id: `prefix` followed by 10 characters of Crockford base32 from the
// system's random source (50 bits), e.g. "r3k7q0m9x2a".
std::string NewId(std::string_view prefix);

// A new secret: 32 random bytes as 64 hex characters (API tokens).
std::string NewSecret();

// True when `name` can be a run or model name: 1-63 of [a-z0-9._-], starting
// with a letter or digit.
bool IsValidName(std::string_view name);

}  // namespace lathe
