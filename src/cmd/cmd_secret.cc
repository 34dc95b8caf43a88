// lathe secret set | ls | rm: per-user secrets for runs (docs/cli.md, "Secrets").
// A value is read from standard input or a file, never from the command line,
// where `ps` would show it to every user.
#include <cstdio>

#include "cmd/commands.h"
#include "cmd/output.h"
#include "lathe/api/client.h"
#include "lathe/daemon/secrets.h"
#include "lathe/net/http.h"
#include "lathe/os/files.h"
#include "lathe/os/terminal.h"

namespace lathe::cmd {
namespace {

constexpr size_t kMaxValue = daemon::kMaxSecretValueBytes;

// One final newline is not part of a value (`echo TOKEN | lathe secret set`).
std::string WithoutFinalNewline(std::string v) {
  if (!v.empty() && v.back() == '\n') v.pop_back();
  if (!v.empty() && v.back() == '\r') v.pop_back();
  return v;
}

Result<std::string> ReadValue(const std::string& file, Lang lang) {
  std::string value;
  if (!file.empty()) {
    ASSIGN_OR_RETURN(value, os::ReadFileUpTo(file, kMaxValue + 2));
  } else if (os::StdinIsTerminal()) {
    value = os::ReadSecretLine(Tr("secret.prompt", lang), kMaxValue).value_or("");
  } else {
    value = os::ReadStdinUpTo(kMaxValue + 2);
  }
  value = WithoutFinalNewline(std::move(value));
  if (value.empty()) return Status::Msg(Code::kInvalidArgument, "secret.no_input");
  return value;  // the daemon checks the rest, in one place
}

Status RunSet(const std::string& name, const std::string& file, Lang lang) {
  ASSIGN_OR_RETURN(std::string value, ReadValue(file, lang));
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Post("/api/v1/secrets", Json{{"name", name}, {"value", value}}));
  const bool created = r.value("created", false);
  std::printf("%s\n",
              Tr(created ? "secret.created" : "secret.replaced", lang, {{"name", name}}).c_str());
  return Status::OK();
}

Status RunList(bool json, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Get("/api/v1/secrets"));
  if (json) {
    PrintJson(r["secrets"]);
    return Status::OK();
  }
  if (r["secrets"].empty()) {
    std::printf("%s\n", Tr("secret.none", lang).c_str());
    return Status::OK();
  }
  std::vector<std::vector<std::string>> rows = {{Tr("secret.col_name", lang),
                                                 Tr("secret.col_created", lang),
                                                 Tr("secret.col_updated", lang)}};
  for (const auto& s : r["secrets"]) {
    rows.push_back({s.value("name", ""), AgeAgo(s.value("created_at_ms", int64_t{0}), lang),
                    AgeAgo(s.value("updated_at_ms", int64_t{0}), lang)});
  }
  PrintTable(rows);
  return Status::OK();
}

Status RunRemove(const std::string& name, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Delete("/api/v1/secrets/" + net::PercentEncode(name)));
  std::printf("%s\n", Tr("secret.removed", lang, {{"name", r.value("name", name)}}).c_str());
  return Status::OK();
}

}  // namespace

void SetupSecret(CLI::App& app, Globals& g, Status& status) {
  auto* secret = app.add_subcommand("secret");
  secret->require_subcommand(1);

  static std::string set_name, from_file;
  auto* set = secret->add_subcommand("set");
  set->add_option("name", set_name)->required();
  set->add_option("--from-file", from_file);
  set->callback([&status, &g] { status = RunSet(set_name, from_file, g.Language()); });

  static bool json = false;
  auto* ls = secret->add_subcommand("ls");
  ls->add_flag("--json", json);
  ls->callback([&status, &g] { status = RunList(json, g.Language()); });

  static std::string rm_name;
  auto* rm = secret->add_subcommand("rm");
  rm->add_option("name", rm_name)->required();
  rm->callback([&status, &g] { status = RunRemove(rm_name, g.Language()); });
}

}  // namespace lathe::cmd
