#include "lathe/run/workspace.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "lathe/os/command.h"
#include "lathe/os/files.h"
#include "lathe/run/workspace_spec.h"

extern char** environ;

namespace lathe::run {
namespace {

constexpr size_t kGitTailBytes = 16 * 1024;
constexpr int64_t kQuickGitMs = 30'000;  // rev-parse, config: local and quick

struct FailureName {
  GitFailure f;
  std::string_view name;
};
constexpr FailureName kFailureNames[] = {
    {GitFailure::kNone, ""},
    {GitFailure::kAuth, "auth"},
    {GitFailure::kUnknownRef, "unknown_ref"},
    {GitFailure::kNotFound, "not_found"},
    {GitFailure::kUnreachable, "unreachable"},
    {GitFailure::kNoGit, "no_git"},
    {GitFailure::kLocal, "local"},
    {GitFailure::kOther, "other"},
};

bool Contains(std::string_view text, std::string_view what) {
  return text.find(what) != std::string_view::npos;
}

void Say(int fd, const std::string& line) {
  std::string s = line + "\n";
  (void)!::write(fd, s.data(), s.size());  // a progress line: a closed log loses only it
}

std::string RefLabel(const std::string& ref, Lang lang) {
  return ref.empty() ? Tr("workspace.default_branch", lang) : ref;
}

// One git command whose output the run's log shows.
struct GitStep {
  int exit_code = 0;
  std::string err;
  bool missing = false;  // git itself cannot be executed
};

GitStep Git(const std::vector<std::string>& args, int log_fd) {
  std::vector<std::string> argv = {"git"};
  argv.insert(argv.end(), args.begin(), args.end());
  GitStep s;
  auto r = os::RunCommandStreaming(argv, log_fd, kGitTailBytes);
  if (!r.ok()) {
    s.missing = r.status().IsNotFound();
    s.exit_code = 127;
    s.err = r.status().message();
    return s;
  }
  s.exit_code = r->exit_code;
  s.err = std::move(r->err);
  return s;
}

// A quiet git command (its output is read, not shown); nullopt on failure.
std::optional<std::string> GitQuiet(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"git"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = os::RunCommand(argv, kQuickGitMs);
  if (!r.ok() || r->exit_code != 0) return std::nullopt;
  std::string out = r->out;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

// JSON holds UTF-8 only: what git printed in another encoding keeps its ASCII.
std::string Utf8(std::string s) {
  if (IsValidUtf8(s)) return s;
  for (char& c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) c = '?';
  }
  return s;
}

WorkspaceOutcome Failed(const GitStep& s) {
  WorkspaceOutcome o;
  o.failure = s.missing ? GitFailure::kNoGit : ClassifyGitError(s.err);
  o.git_message = GitMessage(s.err);
  o.exit_code = s.exit_code;
  return o;
}

WorkspaceOutcome LocalFailure(const std::string& detail) {
  WorkspaceOutcome o;
  o.failure = GitFailure::kLocal;
  o.detail = detail;
  return o;
}

// A complete clone of this source and ref (marked at the end of CloneInto).
bool HoldsClone(const WorkspaceJob& job) {
  auto source = GitQuiet({"-C", job.dir, "config", "--local", "--get", "lathe.source"});
  if (!source || *source != job.git) return false;
  auto ref = GitQuiet({"-C", job.dir, "config", "--local", "--get", "lathe.ref"});
  return ref.value_or("") == job.ref;
}

// git clone --depth 1 [--branch REF]; an abbreviated commit id that is no
// branch or tag: a full clone, then the checkout.
WorkspaceOutcome CloneByName(const WorkspaceJob& job, int log_fd) {
  std::vector<std::string> args = {"clone", "--depth", "1", "--progress", "--no-local"};
  if (!job.ref.empty()) args.insert(args.end(), {"--branch", job.ref});
  args.insert(args.end(), {"--", job.git, job.dir});
  GitStep s = Git(args, log_fd);
  if (s.exit_code == 0) return {};
  WorkspaceOutcome failed = Failed(s);
  if (!MayBeCommitId(job.ref) || failed.failure != GitFailure::kUnknownRef) return failed;
  // Best effort: clean-up: what stays is removed again at the next start or sweep.
  (void)os::RemoveAll(job.dir);
  s = Git({"clone", "--progress", "--no-local", "--no-checkout", "--", job.git, job.dir}, log_fd);
  if (s.exit_code != 0) return Failed(s);
  s = Git({"-C", job.dir, "checkout", "--quiet", "--detach", job.ref + "^{commit}"}, log_fd);
  if (s.exit_code != 0) {
    WorkspaceOutcome o = Failed(s);
    o.failure = GitFailure::kUnknownRef;
    return o;
  }
  return {};
}

// A full commit id: fetched alone with depth 1 where the server allows it
// (protocol v2 does for any reachable commit), else everything, then checked out.
WorkspaceOutcome CloneByCommit(const WorkspaceJob& job, int log_fd) {
  GitStep s = Git({"init", "--quiet", "--", job.dir}, log_fd);
  if (s.exit_code == 0) s = Git({"-C", job.dir, "remote", "add", "origin", job.git}, log_fd);
  if (s.exit_code != 0) return Failed(s);
  s = Git({"-C", job.dir, "fetch", "--depth", "1", "--progress", "origin", job.ref}, log_fd);
  std::string target = "FETCH_HEAD";
  if (s.exit_code != 0) {
    WorkspaceOutcome first = Failed(s);
    if (first.failure == GitFailure::kAuth || first.failure == GitFailure::kUnreachable ||
        first.failure == GitFailure::kNotFound || first.failure == GitFailure::kNoGit) {
      return first;
    }
    s = Git({"-C", job.dir, "fetch", "--progress", "--tags", "origin",
             "+refs/heads/*:refs/remotes/origin/*"},
            log_fd);
    if (s.exit_code != 0) return Failed(s);
    target = job.ref;
  }
  s = Git({"-C", job.dir, "checkout", "--quiet", "--detach", target + "^{commit}"}, log_fd);
  if (s.exit_code != 0) {
    WorkspaceOutcome o = Failed(s);
    o.failure = GitFailure::kUnknownRef;
    return o;
  }
  return {};
}

WorkspaceOutcome CloneInto(const WorkspaceJob& job, int log_fd, Lang lang) {
  std::filesystem::path parent = std::filesystem::path(job.dir).parent_path();
  if (Status st = os::MakeDirs(parent.string(), 0700); !st.ok()) return LocalFailure(st.message());
  if (os::Exists(job.dir) && HoldsClone(job)) {
    Say(log_fd, Tr("workspace.log.reusing", lang,
                   {{"dir", job.dir}, {"source", job.git}, {"ref", RefLabel(job.ref, lang)}}));
    return {};
  }
  // Nothing else is ever in this directory: what is there is a clone cut short.
  if (Status st = os::RemoveAll(job.dir); !st.ok()) return LocalFailure(st.message());
  Say(log_fd, Tr("workspace.log.cloning", lang,
                 {{"source", job.git}, {"ref", RefLabel(job.ref, lang)}, {"dir", job.dir}}));
  WorkspaceOutcome o =
      IsFullCommitId(job.ref) ? CloneByCommit(job, log_fd) : CloneByName(job, log_fd);
  if (o.failure != GitFailure::kNone) return o;
  GitStep s = Git({"-C", job.dir, "config", "--local", "lathe.source", job.git}, log_fd);
  if (s.exit_code == 0) s = Git({"-C", job.dir, "config", "--local", "lathe.ref", job.ref}, log_fd);
  if (s.exit_code != 0) return Failed(s);
  return o;
}

Status WriteRecord(const WorkspaceJob& job, const WorkspaceOutcome& o) {
  if (job.record_path.empty()) return Status::OK();
  return os::WriteFileAtomic(job.record_path, o.ToJson(job.in_place).dump() + "\n", 0600);
}

std::string WorkdirOf(const WorkspaceJob& job) {
  if (job.workdir.empty()) return job.dir;
  if (job.workdir[0] == '/') return job.workdir;
  return (std::filesystem::path(job.dir) / job.workdir).lexically_normal().string();
}

}  // namespace

std::string_view GitFailureName(GitFailure f) {
  for (const auto& n : kFailureNames) {
    if (n.f == f) return n.name;
  }
  return "other";
}

GitFailure GitFailureFromName(std::string_view name) {
  for (const auto& n : kFailureNames) {
    if (n.name == name) return n.f;
  }
  return GitFailure::kOther;
}

GitFailure ClassifyGitError(std::string_view e) {
  // Checked in this order: a missing branch's message also says "not found".
  for (auto s : {"Remote branch", "couldn't find remote ref", "not our ref", "unknown revision",
                 "did not match any", "reference is not a tree", "invalid reference",
                 "upload-pack: not our ref", "bad object", "is not a commit"}) {
    if (Contains(e, s)) return GitFailure::kUnknownRef;
  }
  for (auto s :
       {"Authentication failed", "could not read Username", "could not read Password",
        "terminal prompts disabled", "Permission denied (publickey", "Host key verification failed",
        "HTTP Basic: Access denied", "The requested URL returned error: 401",
        "The requested URL returned error: 403"}) {
    if (Contains(e, s)) return GitFailure::kAuth;
  }
  for (auto s : {"Could not resolve host", "Could not resolve hostname", "Connection refused",
                 "Connection timed out", "Network is unreachable", "No route to host",
                 "unable to connect", "Failed to connect", "Connection reset",
                 "Proxy CONNECT aborted", "Received HTTP code 407", "timed out"}) {
    if (Contains(e, s)) return GitFailure::kUnreachable;
  }
  for (auto s : {"does not appear to be a git repository", "Repository not found", "not exported",
                 "The requested URL returned error: 404", "not found", "does not exist",
                 "No such file or directory", "not a git repository"}) {
    if (Contains(e, s)) return GitFailure::kNotFound;
  }
  return GitFailure::kOther;
}

std::string GitMessage(std::string_view e) {
  std::string out, last;
  size_t start = 0;
  while (start < e.size()) {
    size_t nl = e.find('\n', start);
    std::string_view line = e.substr(start, nl == std::string_view::npos ? e.npos : nl - start);
    start = nl == std::string_view::npos ? e.size() : nl + 1;
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.remove_suffix(1);
    if (line.empty()) continue;
    last = std::string(line);
    if (line.starts_with("fatal:") || line.starts_with("error:") ||
        line.starts_with("remote: fatal") || line.starts_with("ERROR")) {
      out += (out.empty() ? "" : " ") + std::string(line);
    }
  }
  if (out.empty()) out = last;
  if (out.size() > kMaxGitMessageBytes) out.resize(kMaxGitMessageBytes);
  return out;
}

Json WorkspaceOutcome::ToJson(bool in_place) const {
  Json j = Json::object();
  if (failure != GitFailure::kNone) {
    j["error"] = std::string(GitFailureName(failure));
    j["git"] = Utf8(git_message);
    j["exit_code"] = exit_code;
    if (!detail.empty()) j["detail"] = Utf8(detail);
    return j;
  }
  if (in_place) j["in_place"] = true;
  if (!commit.empty()) j["commit"] = commit;
  return j;
}

WorkspaceOutcome MakeWorkspace(const WorkspaceJob& job, int log_fd, Lang lang) {
  WorkspaceOutcome o;
  if (job.in_place) {
    Say(log_fd, Tr("workspace.log.in_place", lang, {{"dir", job.dir}}));
    o.commit = GitQuiet({"-C", job.dir, "rev-parse", "--verify", "--quiet", "HEAD"}).value_or("");
  } else {
    o = CloneInto(job, log_fd, lang);
    if (o.failure != GitFailure::kNone) return o;
    auto head = GitQuiet({"-C", job.dir, "rev-parse", "--verify", "HEAD"});
    if (!head) return LocalFailure("git rev-parse HEAD failed in " + job.dir);
    o.commit = *head;
  }
  if (!o.commit.empty()) Say(log_fd, Tr("workspace.log.checked_out", lang, {{"commit", o.commit}}));
  return o;
}

int RunWorkspaceJob(const WorkspaceJob& job) {
  const Lang lang = DetectLang();
  constexpr int kLogFd = 2;
  // Never a prompt: the run has no terminal, and a credential it lacks is an
  // error to report, not a question to wait on.
  ::setenv("GIT_TERMINAL_PROMPT", "0", 0);
  WorkspaceOutcome o = MakeWorkspace(job, kLogFd, lang);
  Status recorded = WriteRecord(job, o);
  if (!recorded.ok()) {
    Say(kLogFd, Tr("workspace.log.failed", lang, {{"reason", recorded.message()}}));
  }
  if (o.failure != GitFailure::kNone) {
    std::string why = o.failure == GitFailure::kLocal ? Tr("workspace.why.local", lang,
                                                           {{"dir", job.dir}, {"detail", o.detail}})
                      : o.failure == GitFailure::kUnknownRef
                          ? Tr("workspace.why.unknown_ref", lang, {{"ref", job.ref}})
                      : o.failure == GitFailure::kOther
                          ? Tr("workspace.why.other", lang, {{"code", std::to_string(o.exit_code)}})
                          : Tr("workspace.why." + std::string(GitFailureName(o.failure)), lang);
    Say(kLogFd, Tr("workspace.log.failed", lang,
                   {{"reason", Tr("workspace.clone_failed", lang,
                                  {{"source", job.git},
                                   {"ref", RefLabel(job.ref, lang)},
                                   {"why", why},
                                   {"git", o.git_message}})}}));
    return kWorkspaceFailedExit;
  }
  if (job.setup_only) return 0;
  const std::string workdir = WorkdirOf(job);
  if (::chdir(workdir.c_str()) != 0) {
    Say(kLogFd,
        Tr("workspace.log.no_workdir", lang, {{"dir", workdir}, {"detail", std::strerror(errno)}}));
    return kWorkspaceFailedExit;
  }
  ::setenv("LATHE_WORKSPACE", job.dir.c_str(), 1);
  ::setenv("PWD", workdir.c_str(), 1);
  if (job.argv.empty()) return 0;
  std::vector<char*> argv;
  for (const auto& a : job.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  int err = errno;
  Say(kLogFd,
      "lathe: " + (err == ENOENT ? "command not found: " + job.argv[0]
                                 : "cannot execute " + job.argv[0] + ": " + std::strerror(err)));
  return err == ENOENT ? 127 : 126;
}

}  // namespace lathe::run
