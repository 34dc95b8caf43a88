// lathe ui [--print | --browser] [--user NAME] [--json]: a one-time sign-in
// link for the web UI (docs/cli.md, "Web UI"), opened in a browser when there
// is someone at a desktop to see it.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "cmd/commands.h"
#include "cmd/output.h"
#include "lathe/api/client.h"

namespace lathe::cmd {
namespace {

struct UiFlags {
  bool browser = false, print = false, json = false;
  std::string user;
};

bool Set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

// --browser opens; --print and --json never do; otherwise only for a person at
// a graphical session: stdout a terminal, and an X or Wayland display.
bool ShouldOpen(const UiFlags& f) {
  if (f.browser) return true;
  if (f.print || f.json) return false;
  return isatty(STDOUT_FILENO) == 1 && (Set("DISPLAY") || Set("WAYLAND_DISPLAY"));
}

// The port of "http://host:port/..." ("" when there is none).
std::string PortOf(const std::string& url) {
  size_t start = url.find("://");
  start = start == std::string::npos ? 0 : start + 3;
  size_t slash = url.find('/', start);
  std::string authority = url.substr(start, slash - start);
  size_t colon = authority.rfind(':');
  if (colon == std::string::npos || authority.find(']', colon) != std::string::npos) return "";
  return authority.substr(colon + 1);
}

Status RunUi(const UiFlags& f, Lang lang) {
  Json body = Json::object();
  if (!f.user.empty()) body["user"] = f.user;
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json r, c->Post("/api/v1/sessions/code", body));
  const std::string url = r.value("url", "");
  if (f.json) {
    PrintJson(r);
  } else {
    std::printf("%s\n", url.c_str());
    std::fflush(stdout);
    std::fprintf(stderr, "%s\n",
                 Tr("ui.url_note", lang,
                    {{"user", r.value("user", "")},
                     {"seconds", std::to_string(r.value("expires_in_ms", int64_t{0}) / 1000)},
                     {"port", PortOf(url)}})
                     .c_str());
  }
  if (ShouldOpen(f)) {
    if (std::string detail = OpenInBrowser(url); !detail.empty()) {
      std::fprintf(stderr, "%s\n", Tr("ui.browser_failed", lang, {{"detail", detail}}).c_str());
    }
  }
  return Status::OK();
}

}  // namespace

void SetupUi(CLI::App& app, Globals& g, Status& status) {
  static UiFlags f;
  auto* ui = app.add_subcommand("ui");
  ui->add_flag("--browser", f.browser);
  ui->add_flag("--print", f.print)->excludes("--browser");
  ui->add_option("--user", f.user);
  ui->add_flag("--json", f.json);
  ui->callback([&status, &g] { status = RunUi(f, g.Language()); });
}

}  // namespace lathe::cmd
