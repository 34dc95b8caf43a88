#include "lathe/snap/checkpoints.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <string>

namespace lathe::snap {
namespace {

bool AllDigits(std::string_view s) {
  return !s.empty() && s.size() <= 18 &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

std::string_view BaseName(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::optional<int64_t> LastNumber(std::string_view name) {
  size_t dot = name.find('.');
  std::string_view stem = name.substr(0, dot);
  size_t end = stem.size();
  while (end > 0 && !std::isdigit(static_cast<unsigned char>(stem[end - 1]))) --end;
  size_t begin = end;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(stem[begin - 1]))) --begin;
  if (begin == end || end - begin > 18) return std::nullopt;
  return std::stoll(std::string(stem.substr(begin, end - begin)));
}

// The outermost checkpoint directory that contains `path`, or "".
std::string DirCheckpointOf(std::string_view path) {
  for (size_t slash = path.find('/'); slash != std::string_view::npos;
       slash = path.find('/', slash + 1)) {
    bool tmp = false;
    if (CheckpointDirStep(BaseName(path.substr(0, slash)), &tmp))
      return std::string(path.substr(0, slash));
  }
  return "";
}

void AddFile(Checkpoint* c, const FileEntry& f) {
  c->mtime_ns = std::max(c->mtime_ns, f.mtime_ns);
  if (f.check == Verdict::kIncomplete && c->complete) {
    c->complete = false;
    c->reason = c->is_dir ? f.path + ": " + f.reason : f.reason;
  }
}

}  // namespace

std::optional<int64_t> CheckpointDirStep(std::string_view name, bool* tmp) {
  *tmp = false;
  static constexpr std::string_view kTmp = "tmp-";
  if (name.substr(0, kTmp.size()) == kTmp) {
    *tmp = true;
    name.remove_prefix(kTmp.size());
  }
  for (std::string_view prefix : {"checkpoint-", "checkpoint_", "global_step", "step_", "step-"}) {
    if (name.substr(0, prefix.size()) == prefix && AllDigits(name.substr(prefix.size()))) {
      return std::stoll(std::string(name.substr(prefix.size())));
    }
  }
  *tmp = false;
  return std::nullopt;
}

std::vector<Checkpoint> FindCheckpoints(const std::vector<FileEntry>& files) {
  std::map<std::string, Checkpoint> found;
  for (const auto& f : files) {
    if (f.type != EntryType::kFile) continue;
    std::string dir = DirCheckpointOf(f.path);
    if (dir.empty() && f.format.empty()) continue;
    std::string key = dir.empty() ? f.path : dir;
    auto [it, fresh] = found.try_emplace(key);
    Checkpoint& c = it->second;
    if (fresh) {
      bool tmp = false;
      c.path = key;
      c.is_dir = !dir.empty();
      c.step = c.is_dir ? CheckpointDirStep(BaseName(dir), &tmp) : LastNumber(BaseName(f.path));
      c.complete = !tmp;
      if (tmp) c.reason = "still being written (tmp- directory)";
    }
    AddFile(&c, f);
  }
  std::vector<Checkpoint> out;
  for (auto& [k, c] : found) out.push_back(std::move(c));
  return out;
}

std::optional<Checkpoint> ChooseResume(const Manifest& m) {
  const Checkpoint* best = nullptr;
  for (const auto& c : m.checkpoints) {
    if (!c.complete) continue;
    if (best == nullptr || c.mtime_ns > best->mtime_ns ||
        (c.mtime_ns == best->mtime_ns && c.step.value_or(-1) > best->step.value_or(-1))) {
      best = &c;
    }
  }
  return best ? std::optional<Checkpoint>(*best) : std::nullopt;
}

}  // namespace lathe::snap
