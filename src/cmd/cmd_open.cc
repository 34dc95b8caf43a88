// lathe open RUN [--port NAME] [--browser]: prints the address of a run's
// port on the run's own origin (docs/cli.md, "Run ports").
#include <cstdio>

#include "cmd/commands.h"
#include "cmd/output.h"
#include "lathe/api/client.h"
#include "lathe/net/http.h"

namespace lathe::cmd {
namespace {

struct OpenFlags {
  std::string ref;
  std::string port;
  bool browser = false;
  bool json = false;
};

Status RunOpen(const OpenFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  Json body = Json::object();
  if (!f.port.empty()) body["port"] = f.port;
  ASSIGN_OR_RETURN(Json r, c->Post("/api/v1/runs/" + net::PercentEncode(f.ref) + "/open", body));
  if (f.json) {
    PrintJson(r);
    return Status::OK();
  }
  const std::string url = r.value("login_url", r.value("url", ""));  // signs the browser in
  std::printf("%s\n", url.c_str());
  if (f.browser) {
    if (!OpenInBrowser(url).empty()) {
      std::fprintf(stderr, "%s\n", Tr("open.no_browser", lang).c_str());
    }
  }
  return Status::OK();
}

}  // namespace

void SetupOpen(CLI::App& app, Globals& g, Status& status) {
  static OpenFlags f;
  auto* open = app.add_subcommand("open");
  open->add_option("run", f.ref)->required();
  open->add_option("--port", f.port);
  open->add_flag("--browser", f.browser);
  open->add_flag("--json", f.json);
  open->callback([&status, &g] { status = RunOpen(f, g.Language()); });
}

}  // namespace lathe::cmd
