// lathe login | logout: use a daemon over TCP with a token (docs/cli.md, "Remote use").
#include <cstdio>
#include <filesystem>

#include "cmd/commands.h"
#include "lathe/api/client.h"
#include "lathe/api/credentials.h"
#include "lathe/os/files.h"
#include "lathe/os/terminal.h"

namespace lathe::cmd {
namespace {

constexpr size_t kMaxTokenBytes = 512;

// The first line of `text` without surrounding white space; login.bad_token
// unless it is one printable word.
Result<std::string> TokenFrom(std::string text, const std::string& source) {
  if (size_t nl = text.find('\n'); nl != std::string::npos) text.resize(nl);
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!text.empty() && space(text.back())) text.pop_back();
  size_t start = 0;
  while (start < text.size() && space(text[start])) ++start;
  text.erase(0, start);
  bool printable = !text.empty() && text.size() <= kMaxTokenBytes;
  for (unsigned char c : text) printable = printable && c > 0x20 && c < 0x7f;
  if (!printable) {
    return Status::Msg(Code::kInvalidArgument, "login.bad_token",
                       {{"source", source}, {"max", std::to_string(kMaxTokenBytes)}});
  }
  return text;
}

Result<std::string> ReadToken(const std::string& file, Lang lang) {
  if (!file.empty()) {
    ASSIGN_OR_RETURN(std::string text, os::ReadFileUpTo(file, kMaxTokenBytes * 2));
    return TokenFrom(std::move(text), file);
  }
  std::optional<std::string> line = os::ReadSecretLine(Tr("login.prompt", lang), kMaxTokenBytes);
  if (!line || line->empty()) return Status::Msg(Code::kInvalidArgument, "login.no_token");
  return TokenFrom(std::move(*line), "stdin");
}

Status RunLogin(const std::string& url, const std::string& token_file, std::string ca, Lang lang) {
  ASSIGN_OR_RETURN(api::DaemonUrl u, api::ParseDaemonUrl(url));
  if (!u.tls && !ca.empty()) {
    return Status::Msg(Code::kInvalidArgument, "login.ca_with_http", {{"url", url}});
  }
  if (!u.tls && !u.loopback()) {
    std::fprintf(stderr, "%s\n", Tr("login.plain_http", lang, {{"host", u.host}}).c_str());
  }
  // Kept in the credentials: later commands run from other directories.
  if (!ca.empty()) ca = std::filesystem::absolute(ca).lexically_normal().string();
  ASSIGN_OR_RETURN(std::string token, ReadToken(token_file, lang));
  std::unique_ptr<api::ApiClient> c = api::ApiClient::ForUrl(u.Url(), token, "login", ca);
  // The daemon's own verdict on the token, over a verified connection.
  ASSIGN_OR_RETURN(Json s, c->Get("/api/v1/status"));
  RETURN_IF_ERROR(api::SaveCredentials({u.Url(), token, ca}));
  std::string user = s.contains("caller") ? s["caller"].value("user", "") : "";
  std::printf("%s\n", Tr("login.ok", lang, {{"url", u.Url()}, {"user", user}}).c_str());
  return Status::OK();
}

Status RunLogout(Lang lang) {
  auto login = api::LoadCredentials();
  std::string url = login.ok() && *login ? (*login)->url : "";
  ASSIGN_OR_RETURN(bool removed, api::RemoveCredentials());
  if (!removed) {
    std::printf("%s\n", Tr("logout.none", lang, {{"path", api::CredentialsPath()}}).c_str());
    return Status::OK();
  }
  std::printf("%s\n",
              Tr("logout.ok", lang, {{"url", url.empty() ? api::CredentialsPath() : url}}).c_str());
  return Status::OK();
}

}  // namespace

void SetupLogin(CLI::App& app, Globals& g, Status& status) {
  static std::string url, token_file, ca;
  auto* login = app.add_subcommand("login");
  login->add_option("url", url)->required();
  login->add_option("--token-file", token_file);
  login->add_option("--ca", ca);
  login->callback([&status, &g] { status = RunLogin(url, token_file, ca, g.Language()); });
  app.add_subcommand("logout")->callback([&status, &g] { status = RunLogout(g.Language()); });
}

}  // namespace lathe::cmd
