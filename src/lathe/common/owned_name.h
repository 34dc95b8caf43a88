// Names unique per owner (docs/sharing.md, "Names"): a model or a deployment
// is stored under the key "OWNER/NAME", so two users may each have a
// "digits". Those made before names were per owner keep a bare key
// ("digits") and belong to their owner's namespace all the same.
//
// A reference a user types is either qualified ("alice/digits": that owner's)
// or bare ("digits": the caller's own first, else the one of that name the
// caller may see, when only one is; deploy/registry.cc, deployments.cc).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lathe {

// The name part of a key or reference: "alice/digits" -> "digits",
// "digits" -> "digits".
std::string_view ShortName(std::string_view key);

// The owner part of a qualified key or reference: "alice/digits" -> "alice";
// "" for a bare one.
std::string_view NamespaceOf(std::string_view key);

// The key of `owner`'s object called `name`: "alice/digits".
std::string OwnedKey(std::string_view owner, std::string_view name);

// NAME or OWNER/NAME, each part a valid name (common/ids.h IsValidName).
bool IsValidOwnedName(std::string_view key);

// The key as one path component (a directory or file name): '/' becomes
// '~', which no name has, so that two keys never give the same component.
std::string FileSafeName(std::string_view key);

// The one of `all` (objects with a key, ns_of(x) their owner part) that
// `name` means to `user`: with an owner, that owner's of that name; bare,
// the user's own, else the only one of that name `seen(x)` lets them see.
// When several are seen, `found` is empty and `several` holds them.
template <typename T>
struct NameChoice {
  std::optional<T> found;
  std::vector<T> several;
};

template <typename T, typename KeyOf, typename NsOf, typename Seen>
NameChoice<T> ChooseByName(std::vector<T> all, std::string_view name, std::string_view user,
                           KeyOf key_of, NsOf ns_of, Seen seen) {
  NameChoice<T> out;
  const std::string_view wanted_ns = NamespaceOf(name);
  for (auto& x : all) {
    if (ShortName(key_of(x)) != ShortName(name)) continue;
    const std::string ns = ns_of(x);
    if (ns == (wanted_ns.empty() ? user : wanted_ns)) {
      out.found = std::move(x);
      out.several.clear();
      return out;
    }
    if (wanted_ns.empty() && seen(x)) out.several.push_back(std::move(x));
  }
  if (out.several.size() == 1) {
    out.found = std::move(out.several[0]);
    out.several.clear();
  }
  return out;
}

}  // namespace lathe
