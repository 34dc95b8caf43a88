// YAML documents as JSON values, so YAML files (run specs, model configs) are
// validated by the same code as JSON request bodies.
#pragma once

#include <yaml-cpp/yaml.h>

#include "lathe/common/json.h"

namespace lathe {

// Plain (untagged, unquoted) scalars become numbers, booleans or null where
// they read as such; quoted scalars stay strings. May throw YAML::Exception
// only through the caller's YAML::Load, never itself.
Json YamlToJson(const YAML::Node& n);

}  // namespace lathe
