// lathe rm RUN... | lathe rm --finished --older-than AGE: removes finished
// runs (docs/cli.md, "Removing runs").
#include <algorithm>
#include <cstdio>
#include <map>

#include "cmd/commands.h"
#include "cmd/output.h"
#include "lathe/api/client.h"
#include "lathe/common/exit_code.h"
#include "lathe/net/http.h"
#include "lathe/run/event_text.h"

namespace lathe::cmd {
namespace {

struct RmFlags {
  CLI::App* app = nullptr;  // to tell which flags were given
  std::vector<std::string> refs;
  bool finished = false;
  std::string older_than;
  std::string user;
  bool all_users = false;
  bool dry_run = false;
  bool snapshots = false;
  bool json = false;
};

// --json: the API's answer for each run, one JSON object a line (one that
// cannot go: its error object, RemoveRuns).
Status RemoveOne(api::ApiClient& c, const std::string& ref, bool snapshots, bool json, Lang lang) {
  ASSIGN_OR_RETURN(Json r, c.Delete("/api/v1/runs/" + net::PercentEncode(ref) +
                                    (snapshots ? "?snapshots=1" : "")));
  if (json) {
    std::printf("%s\n", r.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
    return Status::OK();
  }
  size_t n = r.value("snapshots_deleted", size_t{0});
  std::string id = r.value("id", ref);
  MsgArgs args = {{"run", id}, {"snapshots", std::to_string(n)}};
  std::string line = Tr(n > 0 ? "rm.removed_with_snapshots" : "rm.removed", lang, args);
  std::printf("%s\n", line.c_str());
  return Status::OK();
}

// Each run in turn; one that cannot go is reported and the rest still go.
// The exit code is the highest of theirs.
Status RemoveRuns(const RmFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  if (f.refs.size() == 1) return RemoveOne(*c, f.refs[0], f.snapshots, f.json, lang);
  Status worst = Status::OK();
  size_t failed = 0;
  for (const auto& ref : f.refs) {
    Status s = RemoveOne(*c, ref, f.snapshots, f.json, lang);
    if (s.ok()) continue;
    ++failed;
    // --json: its error object on the line where its answer would be.
    if (f.json) PrintJsonError(s, Json{{"run", ref}});
    std::fprintf(stderr, "lathe: %s\n", Localize(s, lang).c_str());
    if (ExitCodeFor(s) > ExitCodeFor(worst)) worst = s;
  }
  if (failed == 0) return Status::OK();
  return Status::Msg(
      worst.code(), "rm.some_failed",
      {{"failed", std::to_string(failed)}, {"total", std::to_string(f.refs.size())}});
}

Status Prune(const RmFlags& f, Lang lang) {
  Json body = {{"older_than", f.older_than}, {"dry_run", f.dry_run}, {"snapshots", f.snapshots}};
  if (!f.user.empty()) body["user"] = f.user;
  if (f.all_users) body["all_users"] = true;
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Post("/api/v1/runs/prune", body));
  if (f.json) {
    PrintJson(r);
    return Status::OK();
  }
  const char* line = f.dry_run ? "rm.would_remove" : "rm.removed_old";
  for (const auto& run : r["removed"]) {
    std::printf("%s\n", Tr(line, lang,
                           {{"run", run.value("id", "")},
                            {"name", run.value("name", "")},
                            {"user", run.value("user", "")},
                            {"state", run::StateLabel(run.value("state", ""), lang)},
                            {"ended", AgeAgo(run.value("ended_at_ms", int64_t{0}), lang)}})
                            .c_str());
  }
  std::string removed = std::to_string(r["removed"].size());
  std::string kept = std::to_string(r.value("kept", size_t{0}));
  if (f.dry_run) {
    std::printf("%s\n",
                Tr("rm.dry_run_summary", lang, {{"removed", removed}, {"kept", kept}}).c_str());
  } else {
    std::printf("%s\n", Tr("rm.summary", lang,
                           {{"removed", removed},
                            {"kept", kept},
                            {"snapshots", std::to_string(r.value("snapshots_deleted", size_t{0}))}})
                            .c_str());
  }
  return Status::OK();
}

Status RunRm(const RmFlags& f, Lang lang) {
  auto given = [&](const char* name) { return f.app->count(name) > 0; };
  if (!f.refs.empty() && f.finished) {
    return Status::Msg(Code::kInvalidArgument, "rm.runs_and_finished");
  }
  if (f.finished) {
    if (!given("--older-than")) {
      return Status::Msg(Code::kInvalidArgument, "rm.finished_needs_older_than");
    }
    return Prune(f, lang);
  }
  if (given("--older-than") || given("--user") || given("--all-users") || given("--dry-run")) {
    return Status::Msg(Code::kInvalidArgument, "rm.filter_needs_finished");
  }
  if (f.refs.empty()) return Status::Msg(Code::kInvalidArgument, "rm.needs_what");
  return RemoveRuns(f, lang);
}

}  // namespace

void SetupRm(CLI::App& app, Globals& g, Status& status) {
  static RmFlags f;
  auto* rm = app.add_subcommand("rm");
  f.app = rm;
  rm->add_option("run", f.refs);
  rm->add_flag("--finished", f.finished);
  rm->add_option("--older-than", f.older_than);
  rm->add_option("--user", f.user);
  rm->add_flag("--all-users", f.all_users);
  rm->add_flag("--dry-run", f.dry_run);
  rm->add_flag("--snapshots", f.snapshots);
  rm->add_flag("--json", f.json);
  rm->callback([&status, &g] { status = RunRm(f, g.Language()); });
}

}  // namespace lathe::cmd
