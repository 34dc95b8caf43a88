// lathe share | unshare | shares: give another user or a group a role on a
// run, notebook, deployment or model, take it back, and list what is shared
// (docs/sharing.md). The daemon decides; this file only asks and prints.
#include <cstdio>

#include "cmd/commands.h"
#include "cmd/output.h"
#include "lathe/api/client.h"
#include "lathe/net/http.h"

namespace lathe::cmd {
namespace {

struct ShareArgs {
  std::string target, user, group, role = "view";
  bool json = false;
};

std::string Grantee(const Json& s, Lang lang) {
  if (s.contains("user")) return Tr("share.grantee_user", lang, {{"user", s.value("user", "")}});
  return Tr("share.grantee_group", lang, {{"group", s.value("group", "")}});
}

// As a target names it ("run:ID", "model:NAME"), for tables.
std::string Object(const Json& s) { return s.value("kind", "") + ":" + s.value("object", ""); }

// As a person reads it, in `lang`: "notebook lab", "运行 r3k…" (a notebook is
// a run the daemon marks "notebook").
std::string ObjectText(const Json& s, Lang lang) {
  const std::string kind = s.value("notebook", false) ? "notebook" : s.value("kind", "");
  return Tr("share.kind." + kind, lang) + " " + s.value("object", "");
}

Status RunShare(const ShareArgs& a, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  Json body = {{"target", a.target}, {"role", a.role}};
  if (!a.user.empty()) body["user"] = a.user;
  if (!a.group.empty()) body["group"] = a.group;
  ASSIGN_OR_RETURN(Json r, c->Post("/api/v1/shares", body));
  if (a.json) {
    PrintJson(r);
    return Status::OK();
  }
  std::printf("%s\n", Tr("share.done", lang,
                         {{"object", ObjectText(r, lang)},
                          {"grantee", Grantee(r, lang)},
                          {"role", r.value("role", "")}})
                          .c_str());
  return Status::OK();
}

Status RunUnshare(const ShareArgs& a, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  std::string path = "/api/v1/shares?target=" + net::PercentEncode(a.target);
  if (!a.user.empty()) path += "&user=" + net::PercentEncode(a.user);
  if (!a.group.empty()) path += "&group=" + net::PercentEncode(a.group);
  ASSIGN_OR_RETURN(Json r, c->Delete(path));
  if (a.json) {
    PrintJson(r);
    return Status::OK();
  }
  std::printf("%s\n", Tr("share.undone", lang,
                         {{"object", ObjectText(r, lang)}, {"grantee", Grantee(r, lang)}})
                          .c_str());
  return Status::OK();
}

void PrintShares(const Json& list, bool by_me, Lang lang) {
  std::vector<std::vector<std::string>> rows = {
      {Tr("share.col_object", lang), Tr(by_me ? "share.col_with" : "share.col_by", lang),
       Tr("share.col_role", lang), Tr("share.col_since", lang)}};
  for (const auto& s : list) {
    rows.push_back({Object(s), by_me ? Grantee(s, lang) : s.value("shared_by", ""),
                    s.value("role", ""), AgeAgo(s.value("created_at_ms", int64_t{0}), lang)});
  }
  PrintTable(rows);
}

Status RunShares(const std::string& target, bool json, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  std::string path = "/api/v1/shares";
  if (!target.empty()) path += "?target=" + net::PercentEncode(target);
  ASSIGN_OR_RETURN(Json r, c->Get(path));
  if (json) {
    PrintJson(r);
    return Status::OK();
  }
  if (!target.empty()) {
    if (r["shares"].empty()) {
      std::printf("%s\n", Tr("share.none_of", lang, {{"object", ObjectText(r, lang)}}).c_str());
      return Status::OK();
    }
    PrintShares(r["shares"], true, lang);
    return Status::OK();
  }
  std::printf("%s\n", Tr("share.with_me", lang).c_str());
  if (r["shared_with_me"].empty()) {
    std::printf("  %s\n", Tr("share.none", lang).c_str());
  } else {
    PrintShares(r["shared_with_me"], false, lang);
  }
  std::printf("\n%s\n", Tr("share.by_me", lang).c_str());
  if (r["shared_by_me"].empty()) {
    std::printf("  %s\n", Tr("share.none", lang).c_str());
  } else {
    PrintShares(r["shared_by_me"], true, lang);
  }
  return Status::OK();
}

void AddShareOptions(CLI::App* cmd, ShareArgs& a, bool with_role) {
  cmd->add_option("target", a.target)->required();
  auto* user = cmd->add_option("--user", a.user);
  auto* group = cmd->add_option("--group", a.group);
  user->excludes(group);
  if (with_role) cmd->add_option("--role", a.role);
  cmd->add_flag("--json", a.json);
}

}  // namespace

void SetupShare(CLI::App& app, Globals& g, Status& status) {
  static ShareArgs share, unshare;
  auto* s = app.add_subcommand("share");
  AddShareOptions(s, share, true);
  s->callback([&status, &g] { status = RunShare(share, g.Language()); });

  auto* u = app.add_subcommand("unshare");
  AddShareOptions(u, unshare, false);
  u->callback([&status, &g] { status = RunUnshare(unshare, g.Language()); });

  static std::string target;
  static bool json = false;
  auto* ls = app.add_subcommand("shares");
  ls->add_option("target", target);
  ls->add_flag("--json", json);
  ls->callback([&status, &g] { status = RunShares(target, json, g.Language()); });
}

}  // namespace lathe::cmd
