// YAML documents as JSON values, so YAML files (run specs, model configs) are
// validated by the same code as JSON request bodies.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <string_view>

#include "lathe/common/json.h"

namespace lathe {

// What converting one document may produce. yaml-cpp loads an alias as a
// second reference to its anchor's node, so a few hundred bytes of aliases of
// aliases ("billion laughs") expand to gigabytes once copied into JSON, and an
// alias inside its own anchor (`&a [*a]`) is a cycle; these bound both.
struct YamlLimits {
  size_t max_nodes = 100'000;  // mappings, sequences and scalars, each alias use counted again
  size_t max_scalar_bytes =
      4u << 20;        // bytes of scalar text (keys included), each alias use counted again
  int max_depth = 64;  // nesting of mappings and sequences
};

// Plain (untagged, unquoted) scalars become numbers, booleans or null where
// they read as such (a number too large for a double stays a string); quoted
// scalars stay strings. Fails, naming `file`, on a key given twice in one
// mapping (yaml.duplicate_key), a key that is not a scalar (yaml.bad_key), and
// a document beyond `limits` (yaml.too_many_nodes,
// yaml.too_many_bytes, yaml.too_deep). Never throws;
// YAML::Load, the caller's, may.
Result<Json> YamlToJson(const YAML::Node& n, std::string_view file, const YamlLimits& limits = {});
// A document yaml-cpp could not read (spec.yaml_error): `file`, the line and
// column, and what is wrong — in the reader's language where the catalog has
// yaml-cpp's text (yaml.syntax.*), else yaml-cpp's English.
Status YamlSyntaxError(const YAML::Exception& e, std::string_view file);

// The one document `text` holds (a data file of ours: data/openapi.yaml), as
// above; InvalidArgument naming `file` when it does not parse.
Result<Json> YamlTextToJson(std::string_view text, std::string_view file);

}  // namespace lathe
