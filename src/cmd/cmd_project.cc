// lathe project create | ls | show | add | remove | rm: projects, whose
// members reach every run, deployment and model that names the project as
// their role there says (docs/sharing.md). The daemon decides; this file
// only asks and prints.
#include <cstdio>

#include <fmt/format.h>

#include "cmd/commands.h"
#include "cmd/output.h"
#include "lathe/api/client.h"
#include "lathe/net/http.h"

namespace lathe::cmd {
namespace {

std::string ProjectPath(const std::string& name) {
  return "/api/v1/projects/" + net::PercentEncode(name);
}

std::string MemberList(const Json& p) {
  std::string out;
  for (const auto& m : p["members"]) {
    out += (out.empty() ? "" : ", ") + m.value("user", "") + ":" + m.value("role", "");
  }
  return out.empty() ? "-" : out;
}

void PrintProject(const Json& p, Lang lang) {
  std::printf("%s\n", Tr("project.show_head", lang,
                         {{"project", p.value("name", "")}, {"owner", p.value("owner", "")}})
                          .c_str());
  // Each member's GPU-hours in the usage window, beside their role (a member
  // with none used nothing).
  const Json by_user = p.value("usage", Json::object()).value("gpu_hours_by_user", Json());
  const bool hours = by_user.is_object();
  std::vector<std::vector<std::string>> rows = {
      {Tr("project.col_member", lang), Tr("project.col_role", lang)}};
  if (hours) {
    const int days = p["usage"].value("window_days", 30);
    rows[0].push_back(Tr("project.col_gpu_hours", lang, {{"days", std::to_string(days)}}));
  }
  auto add = [&](const std::string& user, const std::string& role) {
    rows.push_back({user, RoleText(role, lang)});
    if (hours) rows.back().push_back(fmt::format("{:.1f}", by_user.value(user, 0.0)));
  };
  add(p.value("owner", ""), "owner");
  for (const auto& m : p["members"]) add(m.value("user", ""), m.value("role", ""));
  PrintTable(rows);
  if (p.contains("usage")) {
    const Json& u = p["usage"];
    std::printf("%s\n", ProjectUsageLine("project.usage", p, lang).c_str());
    std::string limits = ProjectLimitsLine(p.value("limits", Json()), u, lang);
    if (!limits.empty()) std::printf("%s\n", limits.c_str());
  }
}

Status Print(const Json& r, bool json, Lang lang) {
  if (json) {
    PrintJson(r);
  } else {
    PrintProject(r, lang);
  }
  return Status::OK();
}

Status RunCreate(const std::string& name, const std::vector<std::string>& members, bool json,
                 Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Post("/api/v1/projects", Json{{"name", name}, {"members", members}}));
  return Print(r, json, lang);
}

Status RunList(bool json, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Get("/api/v1/projects"));
  if (json) {
    PrintJson(r["projects"]);
    return Status::OK();
  }
  if (r["projects"].empty()) {
    std::printf("%s\n", Tr("project.none", lang).c_str());
    return Status::OK();
  }
  std::vector<std::vector<std::string>> rows = {{Tr("project.col_name", lang),
                                                 Tr("project.col_owner", lang),
                                                 Tr("project.col_members", lang)}};
  for (const auto& p : r["projects"]) {
    rows.push_back({p.value("name", ""), p.value("owner", ""), MemberList(p)});
  }
  PrintTable(rows);
  return Status::OK();
}

Status RunShow(const std::string& name, bool json, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Get(ProjectPath(name)));
  return Print(r, json, lang);
}

Status RunChange(const std::string& name, const std::vector<std::string>& add,
                 const std::vector<std::string>& remove, bool json, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Patch(ProjectPath(name), Json{{"add", add}, {"remove", remove}}));
  return Print(r, json, lang);
}

Status RunRemove(const std::string& name, bool json, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Delete(ProjectPath(name)));
  if (json) {
    PrintJson(r);
  } else {
    std::printf("%s\n", Tr("project.removed", lang, {{"project", name}}).c_str());
  }
  return Status::OK();
}

}  // namespace

void SetupProject(CLI::App& app, Globals& g, Status& status) {
  auto* project = app.add_subcommand("project");
  project->require_subcommand(1);
  static std::string name;
  static std::vector<std::string> members, removed;
  static bool json = false;

  auto* create = project->add_subcommand("create");
  create->add_option("name", name)->required();
  create->add_option("--member", members);
  create->add_flag("--json", json);
  create->callback([&status, &g] { status = RunCreate(name, members, json, g.Language()); });

  auto* ls = project->add_subcommand("ls");
  ls->add_flag("--json", json);
  ls->callback([&status, &g] { status = RunList(json, g.Language()); });

  auto* show = project->add_subcommand("show");
  show->add_option("name", name)->required();
  show->add_flag("--json", json);
  show->callback([&status, &g] { status = RunShow(name, json, g.Language()); });

  auto* add = project->add_subcommand("add");
  add->add_option("name", name)->required();
  add->add_option("--member", members)->required();
  add->add_flag("--json", json);
  add->callback([&status, &g] { status = RunChange(name, members, {}, json, g.Language()); });

  auto* remove = project->add_subcommand("remove");
  remove->add_option("name", name)->required();
  remove->add_option("--member", removed)->required();
  remove->add_flag("--json", json);
  remove->callback([&status, &g] { status = RunChange(name, {}, removed, json, g.Language()); });

  auto* rm = project->add_subcommand("rm");
  rm->add_option("name", name)->required();
  rm->add_flag("--json", json);
  rm->callback([&status, &g] { status = RunRemove(name, json, g.Language()); });
}

}  // namespace lathe::cmd
