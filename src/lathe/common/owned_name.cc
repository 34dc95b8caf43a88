#include "lathe/common/owned_name.h"

#include "lathe/common/ids.h"

namespace lathe {

std::string_view ShortName(std::string_view key) {
  size_t slash = key.rfind('/');
  return slash == std::string_view::npos ? key : key.substr(slash + 1);
}

std::string_view NamespaceOf(std::string_view key) {
  size_t slash = key.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : key.substr(0, slash);
}

std::string OwnedKey(std::string_view owner, std::string_view name) {
  std::string key(owner);
  key += '/';
  key += name;
  return key;
}

bool IsValidOwnedName(std::string_view key) {
  size_t slash = key.find('/');
  if (slash == std::string_view::npos) return IsValidName(key);
  return IsValidName(key.substr(0, slash)) && IsValidName(key.substr(slash + 1));
}

std::string FileSafeName(std::string_view key) {
  std::string out(key);
  for (char& c : out)
    if (c == '/') c = '~';
  return out;
}

}  // namespace lathe
