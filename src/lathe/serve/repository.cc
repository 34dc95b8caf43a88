#include "lathe/serve/repository.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <re2/re2.h>
#include <spdlog/spdlog.h>

#include "lathe/os/files.h"

namespace lathe::serve {
namespace fs = std::filesystem;
namespace {

bool IsFile(const std::string& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}
bool IsDir(const std::string& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

std::string ModelFilename(const ModelConfig& c) {
  return c.default_model_filename.empty() ? DefaultModelFilename(c.backend)
                                          : c.default_model_filename;
}

// Numeric subdirectories of `model_dir`, ascending.
Result<std::vector<VersionSource>> ListVersions(const std::string& model_dir,
                                                const ModelConfig& c) {
  std::vector<VersionSource> out;
  std::error_code ec;
  fs::directory_iterator it(model_dir, ec);
  if (ec) return ErrnoStatus("list " + model_dir, ec.value());
  std::string file = ModelFilename(c);
  for (const auto& e : it) {
    std::string n = e.path().filename().string();
    int64_t v = 0;
    if (!e.is_directory(ec) || !RE2::FullMatch(n, R"(([1-9]\d{0,15}))", &v)) continue;
    VersionSource s{v, e.path().string(), ""};
    if (!file.empty()) {
      std::string in_version = s.dir + "/" + file, in_model = model_dir + "/" + file;
      s.model_file = (!IsFile(in_version) && IsFile(in_model)) ? in_model : in_version;
    }
    out.push_back(s);
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.version < b.version; });
  // A model directory holding its file directly (no version dirs) serves it as version 1.
  if (out.empty() && !file.empty() && IsFile(model_dir + "/" + file)) {
    out.push_back({1, model_dir, model_dir + "/" + file});
  }
  return out;
}

std::string BackendForFile(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  if (ext == ".pt" || ext == ".pth" || ext == ".ts" || ext == ".torchscript" || ext == ".jit")
    return "torchscript";
  if (ext == ".py") return "process";
  return "";
}

}  // namespace

Result<ModelSource> LoadModelDir(const std::string& model_dir, const std::string& name) {
  ModelSource m;
  m.name = name;
  m.model_dir = fs::absolute(model_dir).lexically_normal().string();
  std::string file = m.model_dir + "/config.yaml";
  ASSIGN_OR_RETURN(std::string text, os::ReadFile(file));
  ASSIGN_OR_RETURN(m.config, ParseModelConfig(text, file, name));
  ASSIGN_OR_RETURN(m.available, ListVersions(m.model_dir, m.config));
  return m;
}

Result<std::vector<ModelSource>> ScanRepository(const std::string& repository) {
  if (!IsDir(repository)) {
    return Status::Msg(Code::kNotFound, "serve.repository_missing", {{"path", repository}});
  }
  std::vector<std::string> dirs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(repository, ec)) {
    if (e.is_directory(ec) && e.path().filename().string()[0] != '.')
      dirs.push_back(e.path().string());
  }
  if (ec) return ErrnoStatus("list " + repository, ec.value());
  std::sort(dirs.begin(), dirs.end());
  std::vector<ModelSource> out;
  for (const auto& d : dirs) {
    if (!IsFile(d + "/config.yaml")) {
      spdlog::warn("serve: {} has no config.yaml; skipped", d);
      continue;
    }
    ASSIGN_OR_RETURN(ModelSource m, LoadModelDir(d, fs::path(d).filename().string()));
    out.push_back(std::move(m));
  }
  return out;
}

Result<ModelSource> ModelFromFlag(const std::string& flag) {
  size_t eq = flag.find('=');
  static const RE2 kName("[A-Za-z0-9_.-]{1,128}");
  if (eq == std::string::npos || !RE2::FullMatch(flag.substr(0, eq), kName) ||
      eq + 1 == flag.size()) {
    return Status::Msg(Code::kInvalidArgument, "serve.bad_model_flag", {{"value", flag}});
  }
  std::string name = flag.substr(0, eq), path = flag.substr(eq + 1);
  if (IsDir(path)) {
    if (IsFile(path + "/config.yaml")) return LoadModelDir(path, name);
    // No config: guess the backend from the file found.
    for (const char* backend : {"torchscript", "process"}) {
      ModelSource m;
      m.name = name;
      m.model_dir = fs::absolute(path).lexically_normal().string();
      m.config = DefaultModelConfig(name, backend);
      ASSIGN_OR_RETURN(m.available, ListVersions(m.model_dir, m.config));
      if (!m.available.empty() && IsFile(m.available.back().model_file)) return m;
    }
    return Status::Msg(Code::kInvalidArgument, "serve.model_dir_unknown", {{"path", path}});
  }
  if (!os::Exists(path))
    return Status::Msg(Code::kNotFound, "serve.model_path_missing", {{"path", path}});
  std::string backend = BackendForFile(path);
  if (backend.empty())
    return Status::Msg(Code::kInvalidArgument, "serve.model_file_unknown", {{"path", path}});
  ModelSource m;
  m.name = name;
  std::string abs = fs::absolute(path).lexically_normal().string();
  m.model_dir = fs::path(abs).parent_path().string();
  m.config = DefaultModelConfig(name, backend);
  m.config.default_model_filename = fs::path(abs).filename().string();
  m.available.push_back({1, m.model_dir, abs});
  return m;
}

FileState StatFile(const std::string& path) {
  auto st = os::StatFile(path);
  if (!st.ok()) return FileState{};
  return FileState{static_cast<int64_t>(st->size_bytes), st->mtime_ns};
}

namespace {
// A zip archive ends with its end-of-central-directory record ("PK\5\6",
// within the last 64 KiB + 22 bytes); a half-copied one does not.
bool ZipIsWhole(const std::string& path, int64_t size) {
  constexpr int64_t kTail = 65536 + 22;
  std::ifstream f(path, std::ios::binary);
  char magic[4] = {};
  if (!f.read(magic, 4) || !(magic[0] == 'P' && magic[1] == 'K' && magic[2] == 3 && magic[3] == 4))
    return false;
  int64_t n = std::min(size, kTail);
  std::string tail(static_cast<size_t>(n), '\0');
  f.seekg(size - n);
  if (!f.read(tail.data(), n)) return false;
  return tail.rfind(std::string("PK\x05\x06", 4)) != std::string::npos;
}

bool IsZip(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char magic[2] = {};
  return f.read(magic, 2) && magic[0] == 'P' && magic[1] == 'K';
}
}  // namespace

bool VersionComplete(const VersionSource& v, const std::optional<FileState>& previous,
                     FileState& now) {
  now = StatFile(v.model_file);
  if (IsFile(v.dir + "/" + kVersionReadyMarker)) return true;
  if (now.size < 0) return false;
  bool stable = previous && *previous == now;
  if (IsZip(v.model_file)) return stable && ZipIsWhole(v.model_file, now.size);
  return stable;
}

std::vector<int64_t> SelectVersions(const VersionPolicy& policy,
                                    const std::vector<int64_t>& available) {
  std::vector<int64_t> v = available;
  std::sort(v.begin(), v.end());
  switch (policy.kind) {
    case VersionPolicy::Kind::kAll:
      return v;
    case VersionPolicy::Kind::kLatest:
      if (static_cast<int>(v.size()) > policy.latest) v.erase(v.begin(), v.end() - policy.latest);
      return v;
    case VersionPolicy::Kind::kSpecific: {
      std::vector<int64_t> out;
      for (int64_t x : v) {
        if (std::find(policy.versions.begin(), policy.versions.end(), x) != policy.versions.end())
          out.push_back(x);
      }
      return out;
    }
  }
  return v;
}

}  // namespace lathe::serve
