#include "lathe/snap/diff.h"

#include <set>

namespace lathe::snap {
namespace {

bool Same(const FileEntry& x, const FileEntry& y) {
  return x.type == y.type && x.size == y.size && x.mode == y.mode && x.target == y.target &&
         x.chunks == y.chunks;
}

uint64_t NewBytes(const FileEntry& e, const std::set<Digest>& have) {
  uint64_t n = 0;
  for (const auto& c : e.chunks) n += have.count(c.id) ? 0 : c.size;
  return n;
}

}  // namespace

std::vector<DiffEntry> DiffManifests(const Manifest& a, const Manifest& b) {
  std::set<Digest> in_a;
  for (const auto& f : a.files) {
    for (const auto& c : f.chunks) in_a.insert(c.id);
  }
  std::vector<DiffEntry> out;
  size_t i = 0, j = 0;
  while (i < a.files.size() || j < b.files.size()) {
    bool take_a = j == b.files.size() || (i < a.files.size() && a.files[i].path < b.files[j].path);
    bool take_b = i == a.files.size() || (j < b.files.size() && b.files[j].path < a.files[i].path);
    if (take_a) {
      out.push_back({DiffEntry::Kind::kRemoved, a.files[i++].path, 0});
    } else if (take_b) {
      out.push_back({DiffEntry::Kind::kAdded, b.files[j].path, NewBytes(b.files[j], in_a)});
      ++j;
    } else {
      if (!Same(a.files[i], b.files[j])) {
        out.push_back({DiffEntry::Kind::kModified, b.files[j].path, NewBytes(b.files[j], in_a)});
      }
      ++i, ++j;
    }
  }
  return out;
}

}  // namespace lathe::snap
