// A named resource profile (config.yaml `profiles:`): a set of spec fields
// that a spec takes by naming it (`profile: a100x2`, `lathe run --profile`).
//
//   profiles:
//     a100x2: {gpus: 2, gpu_type: A100, cpus: 16, memory: 128GB, shm: 16GB,
//              pool: cluster, partition: gpu-a100}
//     small: {gpus: 1, memory: 24GB}
//     a100x2x4: {gpus: 2, gpu_type: A100, nodes: 4, pool: cluster}
//
// A profile may set gpus, gpu_type, cpus, memory, shm, pool, partition,
// nodes and image (an image name, resolved among the submitting user's), each checked as the spec's
// own field is (spec.h; nodes: a whole number from 1 to kMaxNodes, gpus stays per node). What the
// spec sets itself wins over the profile: the daemon fills only the fields the submitted spec
// leaves out, and stores the spec with the profile's name and the fields as
// resolved.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/status.h"

namespace lathe::run {

struct Profile {
  std::string name;
  std::optional<int> gpus;
  std::string gpu_type;  // "" = not set
  std::optional<double> cpus;
  std::optional<uint64_t> memory_bytes;
  std::optional<uint64_t> shm_bytes;
  std::string pool;          // "" = not set ("local" as written)
  std::string partition;     // "" = not set
  std::optional<int> nodes;  // per attempt; gpus is per node
  std::string image;         // "" = not set (spec.image: resolved per user)

  friend bool operator==(const Profile&, const Profile&) = default;
};

// The spec fields a profile may set, in the order errors name them.
inline constexpr std::string_view kProfileFields[] = {"gpus", "gpu_type",  "cpus",  "memory", "shm",
                                                      "pool", "partition", "nodes", "image"};

// Parses the fields of profile `name` (a JSON object, e.g. from YAML).
// Errors: profile.bad_name (the name), profile.bad_field naming the field and
// what it allows (an unknown field, a bad value, a field that is not a single
// value).
Result<Profile> ProfileFromJson(const std::string& name, const Json& j);

// The spec fields the profile sets, in the spec's canonical form (sizes as
// bytes): {"gpus": 2, "gpu_type": "A100", ...}.
Json ProfileFieldsJson(const Profile& p);

// Fills `spec` (a spec object as submitted) with each field the profile sets
// and the spec leaves out (absent or null), and sets "profile" to its name.
// A field the spec sets stays as it is.
void ApplyProfile(const Profile& p, Json& spec);

// `spec` (a spec object as submitted: a run's, or a deployment's) with its
// `profile:` looked up in `profiles` and applied (ApplyProfile); the names of
// the fields it filled are appended to `filled`. A spec without a string
// `profile`, or with a name no profile could have, comes back as it is (the
// spec's parser says what is wrong with it). A valid name not in `profiles`
// is profile.unknown naming the allowed ones ("-" when there are none).
Result<Json> ResolveProfile(const std::map<std::string, Profile>& profiles, const Json& spec,
                            std::vector<std::string>& filled);

}  // namespace lathe::run
