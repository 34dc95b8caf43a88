#include "lathe/snap/paths.h"

#include <set>
#include <string>

namespace lathe::snap {

bool IsSafeRelPath(std::string_view path) {
  if (path.empty() || path.front() == '/' || path.find('\0') != std::string_view::npos)
    return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

bool SymlinkStaysInside(std::string_view link_path, std::string_view target) {
  if (target.empty() || target.front() == '/' || target.find('\0') != std::string_view::npos)
    return false;
  // ".." may only lead the target: "B/.." where B is a symlink to "." would
  // climb one level higher than the text suggests. With leading ".." only,
  // and each link's own directories being real ones (no entry lies below a
  // symlink), the lexical depth is the physical one.
  int depth = 0;
  for (char c : link_path) depth += c == '/';
  bool descended = false;
  size_t start = 0;
  while (start <= target.size()) {
    size_t end = target.find('/', start);
    if (end == std::string_view::npos) end = target.size();
    std::string_view part = target.substr(start, end - start);
    if (part == "..") {
      if (descended || --depth < 0) return false;
    } else if (!part.empty() && part != ".") {
      descended = true;
    }
    start = end + 1;
  }
  return true;
}

namespace {
Status Escape(const std::string& path, std::string_view why) {
  return Status::Msg(Code::kInvalidArgument, "snap.path_escape",
                     {{"path", path}, {"why", std::string(why)}});
}

// True when some proper prefix directory of `path` is in `links`.
bool BelowSymlink(const std::string& path, const std::set<std::string>& links) {
  for (size_t slash = path.find('/'); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    if (links.count(path.substr(0, slash))) return true;
  }
  return false;
}
}  // namespace

Status ValidateManifestPaths(const Manifest& m) {
  std::set<std::string> seen, links;
  for (const auto& e : m.files) {
    if (!IsSafeRelPath(e.path)) return Escape(e.path, "not a clean relative path");
    if (!seen.insert(e.path).second) return Escape(e.path, "listed twice");
    if (e.type == EntryType::kSymlink) {
      if (!SymlinkStaysInside(e.path, e.target))
        return Escape(e.path, "symlink to " + e.target + " leaves the tree");
      links.insert(e.path);
    }
  }
  for (const auto& e : m.files) {
    if (BelowSymlink(e.path, links)) return Escape(e.path, "lies below a symlink");
  }
  return Status::OK();
}

}  // namespace lathe::snap
