// The model registry's rules that need no daemon (models.h).
#include "lathe/deploy/models.h"

#include <fnmatch.h>

#include <algorithm>
#include <charconv>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lathe/common/ids.h"
#include "lathe/common/owned_name.h"
#include "lathe/common/path_check.h"
#include "lathe/os/files.h"
#include "lathe/snap/checkpoints.h"
#include "lathe/snap/store.h"

namespace lathe::deploy {
namespace {

constexpr size_t kMaxModelName = 64;
constexpr size_t kMaxAlias = 32;

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}
bool AlnumChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

std::string Shown(std::string_view s) {
  std::string out(s.substr(0, 100));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return out;
}

bool TopLevel(const std::string& path) { return path.find('/') == std::string::npos; }

std::string BackendOfFile(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".pt" || ext == ".pth" || ext == ".ts" || ext == ".torchscript" || ext == ".jit")
    return "torchscript";
  if (ext == ".py") return "process";
  return "";
}

// A pattern without '/' also matches a file in a subdirectory by its name.
bool MatchesName(const std::string& pattern, const std::string& path) {
  if (pattern.find('/') != std::string::npos) return false;
  std::string base = std::filesystem::path(path).filename().string();
  return ::fnmatch(pattern.c_str(), base.c_str(), 0) == 0;
}

std::string FirstFew(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 5; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > 5) s += fmt::format(", … (+{})", v.size() - 5);
  return s.empty() ? "-" : s;
}

bool AllDigits(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::optional<int64_t> PositiveNumber(std::string_view s) {
  int64_t n = 0;
  if (s.empty() || s.size() > 15 || s[0] == '0') return std::nullopt;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || end != s.data() + s.size() || n < 1) return std::nullopt;
  return n;
}

Status CheckModelName(const std::string& name) {
  bool ok = !name.empty() && name.size() <= kMaxModelName && AlnumChar(name[0]) &&
            std::all_of(name.begin(), name.end(), NameChar) &&
            !AllDigits(name);  // "alice/3" is a version
  if (ok) return Status::OK();
  return Status::Msg(Code::kInvalidArgument, "model.bad_name", {{"value", Shown(name)}});
}

Status CheckAliasName(const std::string& alias) {
  bool ok = !alias.empty() && alias.size() <= kMaxAlias && alias[0] >= 'a' && alias[0] <= 'z' &&
            std::all_of(alias.begin(), alias.end(), [](char c) {
              return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
            });
  if (ok) return Status::OK();
  return Status::Msg(Code::kInvalidArgument, "model.bad_alias", {{"value", Shown(alias)}});
}

Result<ModelRef> ParseModelRef(std::string_view ref) {
  // NAME, NAME/N, NAME@ALIAS, each with an optional OWNER/ before NAME
  // (common/owned_name.h). Two parts split by '/' are NAME/N when the second
  // is a number: a model name is never all digits.
  ModelRef r;
  auto bad = [&] {
    return Status::Msg(Code::kInvalidArgument, "model.bad_ref", {{"value", Shown(ref)}});
  };
  std::string_view name = ref;
  if (size_t at = ref.find('@'); at != std::string_view::npos) {
    r.alias = std::string(ref.substr(at + 1));
    name = ref.substr(0, at);
    if (!CheckAliasName(r.alias).ok()) return bad();
  } else if (size_t slash = ref.rfind('/'); slash != std::string_view::npos) {
    std::string_view last = ref.substr(slash + 1);
    const bool two_slashes = ref.substr(0, slash).find('/') != std::string_view::npos;
    if (auto n = PositiveNumber(last)) {
      r.version = n;
      name = ref.substr(0, slash);
    } else if (two_slashes || AllDigits(last)) {
      return bad();
    }
  }
  if (std::count(name.begin(), name.end(), '/') > 1) return bad();
  std::string_view owner = NamespaceOf(name);
  if (name.find('/') != std::string_view::npos && !IsValidName(owner)) return bad();
  r.name = std::string(name);
  if (!CheckModelName(std::string(ShortName(name))).ok()) return bad();
  return r;
}

Result<RunSource> ParseRunSource(std::string_view s) {
  RunSource r;
  size_t at = s.find('@');
  r.run = std::string(s.substr(0, at));
  if (r.run.empty()) {
    return Status::Msg(Code::kInvalidArgument, "model.bad_run_source", {{"value", Shown(s)}});
  }
  if (at == std::string_view::npos) return r;
  std::string_view rest = s.substr(at + 1);
  if (rest == "latest") return r;
  int64_t step = 0;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), step);
  if (rest.empty() || ec != std::errc() || end != rest.data() + rest.size() || step < 0) {
    return Status::Msg(Code::kInvalidArgument, "model.bad_run_source", {{"value", Shown(s)}});
  }
  r.step = step;
  return r;
}

Result<ServedFiles> ChooseServedFiles(const snap::Manifest& m, const std::string& pattern,
                                      const std::string& handler, const std::string& backend,
                                      const std::string& checkpoint) {
  std::vector<std::string> files;
  for (const auto& e : m.files)
    if (e.type == snap::EntryType::kFile) files.push_back(e.path);
  auto is_file = [&](const std::string& p) {
    return std::find(files.begin(), files.end(), p) != files.end();
  };
  if (!backend.empty() && backend != "torchscript" && backend != "process") {
    return Status::Msg(Code::kInvalidArgument, "model.bad_backend", {{"value", Shown(backend)}});
  }
  ServedFiles out;
  // 1. The handler.
  if (!handler.empty()) {
    if (!is_file(handler)) {
      return Status::Msg(
          Code::kInvalidArgument, "model.no_such_file",
          {{"field", "handler"}, {"value", Shown(handler)}, {"files", FirstFew(files)}});
    }
    if (backend == "torchscript") {
      return Status::Msg(Code::kInvalidArgument, "model.handler_needs_process");
    }
    out.handler = handler;
    out.backend = "process";
  }
  // 2. The primary file.
  if (!pattern.empty()) {
    // Paths the pattern matches whole come first; base names only without.
    std::vector<std::string> hits, by_name;
    for (const auto& f : files) {
      if (::fnmatch(pattern.c_str(), f.c_str(), 0) == 0) {
        hits.push_back(f);
      } else if (MatchesName(pattern, f)) {
        by_name.push_back(f);
      }
    }
    if (hits.empty()) hits = std::move(by_name);
    if (hits.empty()) {
      return Status::Msg(
          Code::kInvalidArgument, "model.no_such_file",
          {{"field", "file"}, {"value", Shown(pattern)}, {"files", FirstFew(files)}});
    }
    if (hits.size() == 1) {
      out.file = hits[0];
    } else if (is_file(checkpoint) &&
               std::find(hits.begin(), hits.end(), checkpoint) != hits.end()) {
      out.file = checkpoint;
    } else {
      return Status::Msg(Code::kInvalidArgument, "model.file_ambiguous",
                         {{"value", Shown(pattern)}, {"files", FirstFew(hits)}});
    }
  } else if (is_file(checkpoint)) {
    out.file = checkpoint;
  } else if (out.handler.empty()) {
    if (files.size() != 1) {
      return Status::Msg(Code::kInvalidArgument, "model.needs_file", {{"files", FirstFew(files)}});
    }
    out.file = files[0];
  }
  // 3. The backend.
  if (out.backend.empty()) out.backend = backend.empty() ? BackendOfFile(out.file) : backend;
  if (out.backend.empty()) {
    return Status::Msg(Code::kInvalidArgument, "model.backend_unknown",
                       {{"file", Shown(out.file)}});
  }
  if (out.backend == "process" && out.handler.empty()) {
    if (BackendOfFile(out.file) != "process") {
      return Status::Msg(Code::kInvalidArgument, "model.process_needs_handler");
    }
    out.handler = out.file;
    out.file.clear();
  }
  // 4. What the server loads by name sits at the top.
  const std::string& loaded = out.backend == "process" ? out.handler : out.file;
  if (!TopLevel(loaded)) {
    return Status::Msg(
        Code::kInvalidArgument, "model.file_not_top_level",
        {{"field", out.backend == "process" ? "handler" : "file"}, {"value", Shown(loaded)}});
  }
  return out;
}

std::string ExportConfigYaml(const state::ModelVersionRecord& v) {
  const std::string& loaded = v.backend == "process" ? v.handler : v.file;
  std::string y = fmt::format(
      "# Written by `lathe model export {}/{}` (snapshot {}).\n"
      "backend: {}\n"
      "default_model_filename: {}\n",
      v.model, v.version, v.snapshot.substr(0, 12), v.backend, Json(loaded).dump());
  // A handler learns which file is the version's from its environment.
  if (v.backend == "process" && !v.file.empty()) {
    y += "parameters: {env: {LATHE_MODEL_FILE: " + Json(v.file).dump() + "}}\n";
  }
  // The signature (inputs, outputs) is not written: it is what `lathe serve`
  // itself described of this model (KServe metadata, not config.yaml's form).
  return y;
}

}  // namespace lathe::deploy
