#include "lathe/run/workspace_spec.h"

#include <cctype>
#include <filesystem>

#include "lathe/common/path_check.h"

namespace lathe::run {
namespace {

constexpr std::string_view kUrlSchemes[] = {"https://", "http://", "git://", "ssh://", "file://"};

Status Bad(const std::string& field, std::string_view value) {
  return Status::Msg(Code::kInvalidArgument, "workspace.bad_value",
                     {{"field", field}, {"value", std::string(value.substr(0, 300))}});
}

bool HasControl(std::string_view s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return true;
  }
  return false;
}

// user@host:path, as scp writes it (git@github.com:org/repo.git).
bool IsScpLike(std::string_view s) {
  size_t at = s.find('@'), colon = s.find(':');
  if (at == 0 || at == std::string_view::npos || colon == std::string_view::npos || colon < at ||
      colon == at + 1 || s.find('/') < colon) {
    return false;
  }
  for (char c : s.substr(0, colon)) {
    bool ok =
        std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' || c == '@';
    if (!ok) return false;
  }
  return true;
}

bool IsUrl(std::string_view s) {
  for (auto scheme : kUrlSchemes) {
    if (s.starts_with(scheme) && s.size() > scheme.size()) return true;
  }
  return IsScpLike(s);
}

// A git source: a URL or an absolute path, never an option to git.
Status CheckSource(std::string_view s, const std::string& field) {
  if (s.empty() || s.size() > kMaxWorkspaceSourceBytes || s[0] == '-' || HasControl(s) ||
      !IsValidUtf8(s)) {
    return Bad(field, s);
  }
  if (s[0] == '/') return CheckPathName(s, field);
  if (!IsUrl(s)) return Bad(field, s);
  return Status::OK();
}

// A branch, tag or commit as git accepts one (git check-ref-format, roughly).
Status CheckRef(std::string_view ref, const std::string& field) {
  bool ok = !ref.empty() && ref.size() <= kMaxWorkspaceRefBytes && ref[0] != '-' &&
            !HasControl(ref) && ref.find("..") == std::string_view::npos &&
            ref.find_first_of(" ~^:?*[\\") == std::string_view::npos && ref.back() != '/' &&
            !ref.ends_with(".lock") && IsValidUtf8(ref);
  if (!ok) {
    return Status::Msg(Code::kInvalidArgument, "workspace.bad_ref",
                       {{"field", field}, {"value", std::string(ref.substr(0, 300))}});
  }
  return Status::OK();
}

Status CheckDir(std::string_view d, const std::string& field) {
  if (d.empty() || d[0] != '/' || HasControl(d) || !IsValidUtf8(d)) {
    return Status::Msg(Code::kInvalidArgument, "workspace.bad_dir",
                       {{"field", field}, {"value", std::string(d.substr(0, 300))}});
  }
  return CheckPathName(d, field);
}

std::string Normal(std::string_view path) {
  std::string p = std::filesystem::path(std::string(path)).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

// "source#ref" split at the first '#' (git URLs have no fragment).
Status SplitRef(std::string_view s, const std::string& field, std::string& source,
                std::string& ref) {
  size_t hash = s.find('#');
  source = std::string(s.substr(0, hash));
  if (hash == std::string_view::npos) return Status::OK();
  ref = std::string(s.substr(hash + 1));
  return CheckRef(ref, field);
}

}  // namespace

Status ResolveWorkspaceWorkdir(const WorkspaceSpec& w, std::string& workdir) {
  if (workdir.empty() || workdir[0] == '/') return Status::OK();
  if (w.empty()) {
    return Status::Msg(Code::kInvalidArgument, "spec.bad_workdir", {{"value", workdir}});
  }
  std::string rel = Normal(workdir);
  if (rel == ".") rel.clear();
  if (rel == ".." || rel.starts_with("../")) {
    return Status::Msg(Code::kInvalidArgument, "workspace.workdir_outside", {{"value", workdir}});
  }
  workdir = w.dir.empty() ? rel : Normal(w.dir + "/" + rel);
  return Status::OK();
}

bool IsFullCommitId(std::string_view ref) {
  return (ref.size() == 40 || ref.size() == 64) &&
         ref.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

bool MayBeCommitId(std::string_view ref) {
  return ref.size() >= 4 && ref.size() < 40 &&
         ref.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

Result<WorkspaceSpec> ParseWorkspaceString(std::string_view s, const std::string& field,
                                           const GitRepositoryProbe& is_git_repository) {
  WorkspaceSpec w;
  std::string source;
  RETURN_IF_ERROR(SplitRef(s, field, source, w.ref));
  RETURN_IF_ERROR(CheckSource(source, field));
  if (source[0] != '/') {
    w.git = source;
    return w;
  }
  source = Normal(source);
  bool git =
      !w.ref.empty() || (is_git_repository ? is_git_repository(source) : source.ends_with(".git"));
  (git ? w.git : w.dir) = source;
  return w;
}

Result<WorkspaceSpec> WorkspaceFromJson(const Json& j,
                                        const GitRepositoryProbe& is_git_repository) {
  if (j.is_null()) return WorkspaceSpec{};
  if (j.is_string()) {
    return ParseWorkspaceString(j.get_ref<const std::string&>(), "workspace", is_git_repository);
  }
  if (!j.is_object()) {
    return Status::Msg(
        Code::kInvalidArgument, "spec.wrong_type",
        {{"field", "workspace"}, {"type", "git URL, path or {git|dir, ref, readonly}"}});
  }
  WorkspaceSpec w;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string field = "workspace." + it.key();
    if (it->is_null()) continue;
    if (it.key() == "readonly") {
      if (!it->is_boolean()) {
        return Status::Msg(Code::kInvalidArgument, "spec.wrong_type",
                           {{"field", field}, {"type", "boolean (true/false)"}});
      }
      w.readonly = it->get<bool>();
      continue;
    }
    if (it.key() != "git" && it.key() != "ref" && it.key() != "dir") {
      return Status::Msg(Code::kInvalidArgument, "spec.unknown_field",
                         {{"field", field}, {"allowed", "git, ref, dir, readonly"}});
    }
    if (!it->is_string()) return Bad(field, it->dump());
    const std::string& v = it->get_ref<const std::string&>();
    if (it.key() == "git") {
      std::string ref;
      RETURN_IF_ERROR(SplitRef(v, field, w.git, ref));
      RETURN_IF_ERROR(CheckSource(w.git, field));
      if (w.git[0] == '/') w.git = Normal(w.git);
      if (!ref.empty()) w.ref = ref;
    } else if (it.key() == "ref") {
      RETURN_IF_ERROR(CheckRef(v, field));
      w.ref = v;
    } else {
      RETURN_IF_ERROR(CheckDir(v, field));
      w.dir = Normal(v);
    }
  }
  if (w.git.empty() == w.dir.empty()) {
    return Status::Msg(Code::kInvalidArgument, "workspace.needs_one");
  }
  if (!w.dir.empty() && !w.ref.empty()) {
    return Status::Msg(Code::kInvalidArgument, "workspace.ref_without_git");
  }
  return w;
}

Json WorkspaceToJson(const WorkspaceSpec& w) {
  if (w.empty()) return nullptr;
  Json j = Json::object();
  if (!w.git.empty()) j["git"] = w.git;
  if (!w.ref.empty()) j["ref"] = w.ref;
  if (!w.dir.empty()) j["dir"] = w.dir;
  if (w.readonly) j["readonly"] = true;
  return j;
}

}  // namespace lathe::run
