// lathe token create | ls | rm: per-user API tokens, and the browser sessions
// that ls and rm show and revoke too (docs/cli.md, "Tokens").
#include <chrono>
#include <cstdio>

#include "cmd/commands.h"
#include "cmd/output.h"
#include "lathe/api/client.h"
#include "lathe/api/tokens.h"
#include "lathe/net/http.h"

namespace lathe::cmd {
namespace {

struct CreateFlags {
  std::string name, expires, user;
  bool expires_given = false;  // --expires "" is sent, and refused, not taken as "never"
  bool json = false;
};

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "5m" until `ms` (epoch milliseconds), in Age()'s units.
std::string Until(int64_t ms) {
  int64_t s = std::max<int64_t>(0, (ms - NowMs()) / 1000);
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m";
  if (s < 86400) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

std::string ExpiresText(const Json& t, Lang lang) {
  if (!t["expires_at_ms"].is_number()) return Tr("token.never", lang);
  if (t.value("expired", false)) return Tr("token.expired_label", lang);
  return Tr("token.in", lang, {{"age", Until(t["expires_at_ms"].get<int64_t>())}});
}

Status RunCreate(const CreateFlags& f, Lang lang) {
  Json body = Json::object();
  if (!f.name.empty()) body["name"] = f.name;
  if (f.expires_given) body["expires"] = f.expires;
  if (!f.user.empty()) body["user"] = f.user;
  ASSIGN_OR_RETURN(auto c, ConnectToSubmit(lang));
  ASSIGN_OR_RETURN(Json t, c->Post("/api/v1/tokens", body));
  if (f.json) {
    PrintJson(t);
    return Status::OK();
  }
  std::printf("%s\n", t.value("token", "").c_str());
  std::fflush(stdout);
  std::string expires = t["expires_at_ms"].is_number()
                            ? api::FormatUtc(t["expires_at_ms"].get<int64_t>())
                            : Tr("token.never", lang);
  std::fprintf(stderr, "%s\n",
               Tr("token.created", lang,
                  {{"id", t.value("id", "")}, {"user", t.value("user", "")}, {"expires", expires}})
                   .c_str());
  return Status::OK();
}

// The caller's sessions (GET /api/v1/sessions), each with "kind": "session";
// none from a daemon that has no sessions.
Result<Json> ListSessions(api::ApiClient& c, bool all) {
  auto r = c.Get(std::string("/api/v1/sessions") + (all ? "?all=1" : ""));
  if (!r.ok()) {
    if (r.status().msg_id() == "api.no_route") return Json::array();
    return r.status();
  }
  Json out = Json::array();
  for (Json s : (*r)["sessions"]) {
    s["kind"] = "session";
    out.push_back(std::move(s));
  }
  return out;
}

Status RunList(bool all, bool json, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Get(std::string("/api/v1/tokens") + (all ? "?all=1" : "")));
  ASSIGN_OR_RETURN(Json sessions, ListSessions(*c, all));
  Json items = Json::array();
  for (Json t : r["tokens"]) {
    t["kind"] = "token";
    items.push_back(std::move(t));
  }
  for (auto& s : sessions) items.push_back(std::move(s));
  if (json) {
    PrintJson(items);
    return Status::OK();
  }
  if (items.empty()) {
    std::printf("%s\n", Tr("token.none", lang).c_str());
    return Status::OK();
  }
  std::vector<std::vector<std::string>> rows = {
      {Tr("token.col_id", lang), Tr("token.col_kind", lang), Tr("token.col_name", lang),
       Tr("token.col_scope", lang), Tr("token.col_user", lang), Tr("token.col_created", lang),
       Tr("token.col_expires", lang), Tr("token.col_last_used", lang)}};
  for (const auto& t : items) {
    const bool session = t.value("kind", "") == "session";
    std::string used = t["last_used_at_ms"].is_number()
                           ? AgeAgo(t["last_used_at_ms"].get<int64_t>(), lang)
                           : Tr("token.never", lang);
    std::string name = t.value("name", "");
    rows.push_back(
        {t.value("id", ""), Tr(session ? "token.kind_session" : "token.kind_token", lang),
         name.empty() ? "-" : name, session ? t.value("scope", "") : "-", t.value("user", ""),
         AgeAgo(t.value("created_at_ms", int64_t{0}), lang), ExpiresText(t, lang), used});
  }
  PrintTable(rows);
  return Status::OK();
}

// A session's id starts with "s", a token's with "t" (sessions.h, tokens.h).
bool IsSessionId(const std::string& id) { return !id.empty() && id[0] == 's'; }

Status RunRemove(const std::string& id, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  if (IsSessionId(id)) {
    ASSIGN_OR_RETURN(Json s, c->Delete("/api/v1/sessions/" + net::PercentEncode(id)));
    std::printf("%s\n", Tr("session.revoked", lang, {{"id", s.value("id", id)}}).c_str());
    return Status::OK();
  }
  ASSIGN_OR_RETURN(Json t, c->Delete("/api/v1/tokens/" + net::PercentEncode(id)));
  std::printf("%s\n", Tr("token.revoked", lang, {{"id", t.value("id", id)}}).c_str());
  return Status::OK();
}

}  // namespace

void SetupToken(CLI::App& app, Globals& g, Status& status) {
  auto* token = app.add_subcommand("token");
  token->require_subcommand(1);

  static CreateFlags cf;
  auto* create = token->add_subcommand("create");
  create->add_option("--name", cf.name);
  auto* expires = create->add_option("--expires", cf.expires);
  create->add_option("--user", cf.user);
  create->add_flag("--json", cf.json);
  create->callback([&status, &g, expires] {
    cf.expires_given = expires->count() > 0;
    status = RunCreate(cf, g.Language());
  });

  static bool all = false, json = false;
  auto* ls = token->add_subcommand("ls");
  ls->add_flag("-a,--all", all);
  ls->add_flag("--json", json);
  ls->callback([&status, &g] { status = RunList(all, json, g.Language()); });

  static std::string id;
  auto* rm = token->add_subcommand("rm");
  rm->add_option("id", id)->required();
  rm->callback([&status, &g] { status = RunRemove(id, g.Language()); });
}

}  // namespace lathe::cmd
